"""A cold `memsync sync-now` (no daemon) admitting one incoming commit (issue 18, item 1):
the git processes it runs and the modules it imports are pinned, so neither grows unseen.

Each run is a fresh interpreter through the console script's entry point, with a `git` on
PATH that logs each run (`test_git_refs._spy`); the process box's own counter must agree.
Its first git processes (the fetch, the preflight status) start before the gate's modules
load, so they run on the other core meanwhile: Python's own audit events (an import begun,
a process started) give the order.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from memsync.errors import LockBusy
from memsync.roots import packs
from memsync.roots.layout import RootLayout
from memsync.roots.lock import RootLock
from tests.conftest import Team
from tests.e2e.daemons import write_config
from tests.e2e.test_startup import probe_counting
from tests.helpers import GIT_ENV, commit, git, push, wait_for
from tests.integration.test_git_refs import _runs, _spy

# The git processes of a cold fast-forward of one incoming one-file commit, at most (12
# before issue 18: the config read twice, `merge-base --is-ancestor`, a `rev-parse` for
# the start tree; 10 with the config guard's one reading, which a warm timer unit now
# takes from the root's state while the config files are as git read them): the
# preflight status beside the prefetch, the incoming log, one `cat-file --batch` kept
# open for every object read (the upstream commit's parents answer the ancestry question;
# blob sizes and bytes, the commits' trees), the start tree's listing (beside the log),
# one `update-ref --stdin` for the candidate ref and, later, the branch move (two
# transactions), the fence's status of the changed path and the work-tree move.
COLD_FAST_FORWARD = Counter(
    {
        "status": 2,
        "fetch": 1,
        "log": 1,
        "cat-file": 1,
        "ls-tree": 1,
        "update-ref": 1,
        "read-tree": 1,
    }
)

# What such a cycle never needs: GitPython and gitdb (their import costs more than the
# processes they save in a one-shot process), the merge, replay and repair stages, the
# push, the words for a failed fetch, the repository-config report, the views.
NOT_IMPORTED = (
    "git",
    "gitdb",
    "smmap",
    "memsync.cycles",
    "memsync.roots.candidate",
    "memsync.roots.push",
    "memsync.roots.reach",
    "memsync.transports.repoconfig",
    "memsync.transports.gitobjects",
    "memsync.views",
)


def _cold_sync(config: Path, env: dict[str, str]) -> tuple[int, int, list[str], str]:
    """Exit code, processes the box started, watched modules loaded, and stdout."""
    code, loaded, started, out, rest = probe_counting(
        "--config",
        str(config),
        "sync-now",
        env=env,
        heavy=NOT_IMPORTED,
        cwd=Path(__file__).parents[2],
        timeout=120,
    )
    assert code == 0, (out, rest)
    return code, started, loaded, out


def _one_incoming_commit(team: Team, turn: int) -> None:
    commit(team.alice.path, {"MEMORY_cold.md": f"# Cold\n\nturn {turn}\n"}, f"cold {turn}")
    push(team.alice.path)


def test_a_cold_fast_forward_runs_no_more_git_processes_than_pinned(
    team: Team, tmp_path: Path
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    folder, log = _spy(tmp_path / "spy")
    spied = {**env, "PATH": f"{folder}:{os.environ['PATH']}"}  # one git for every run
    for turn in range(2):  # the state file and the settings memo, as a timer unit has them
        _one_incoming_commit(team, turn)
        _cold_sync(config, spied)
    log.unlink()
    _one_incoming_commit(team, 2)
    _code, started, _loaded, out = _cold_sync(config, spied)
    assert out.split()[:2] == ["bob", "synced"], out
    assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
    runs = Counter(_runs(log))
    assert started == sum(runs.values())  # the box counts every process it starts
    grown = runs - COLD_FAST_FORWARD
    assert not grown, f"more git processes than pinned: {dict(grown)} (all: {dict(runs)})"
    assert sum(runs.values()) <= 8


def test_a_cold_fast_forward_imports_only_what_it_uses(team: Team, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    for turn in range(3):  # the first loads the schema and writes the memo; the rest do not
        _one_incoming_commit(team, turn)
        _code, _started, loaded, out = _cold_sync(config, env)
        assert out.split()[:2] == ["bob", "synced"], out
        if turn:
            assert loaded == [], turn
    assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")


# The gate: the admission transaction and the checks and validators it runs, and the git
# box's readers (trees, commits, history, names: the fetch and the status run on the runner
# alone, `gitfetch.Fetches`). A cold cycle's fetch and status must be running before the
# first of these begins to load.
GATE = (
    "memsync.transports.git",
    "memsync.transports.gittree",
    "memsync.transports.gitcommits",
    "memsync.transports.gitfacts",
    "memsync.transports.gitmemo",
    "memsync.transports.gitparse",
    "memsync.transports.gitrefsession",
    "memsync.validators.tree",
    "typing",  # the modules before the first git name their types for the type checker only
    "memsync.roots.incoming",
    "memsync.roots.admit",
    "memsync.roots.checks",
    "memsync.roots.publish",
    "memsync.validators.candidate",
    "memsync.validators.gate",
    "memsync.validators.graph",
    "memsync.validators.rightmemory",
    "memsync.validators.cache",
    "memsync.roots.plan",  # what the fetch's answer decides: loaded with the gate
)

# The console script's entry point with an audit hook: every import begun (not one already
# loaded; with whether the garbage collector was on), every process started and every
# listing or shape record opened (its kind), every file opened in a root's journal, in the
# order this interpreter saw them.
ORDER_PROBE = """
import gc
import os
import sys

seen = []


def hook(event, args):
    if event == "import":
        seen.append(("import", args[0], gc.isenabled()))
    elif event == "subprocess.Popen":
        argv = [str(a) for a in args[1]]
        while argv[1:2] == ["-c"]:
            del argv[1:3]
        seen.append(("process", " ".join(argv[:2]), None))
    elif event == "open" and str(args[0]).endswith((".listing", ".shape")):
        kind = str(args[0]).rpartition(".")[2]
        seen.append(("record", kind, None))
        if os.environ.get("ORDER_MARKS"):  # for a git that waits for them (test_cold_tenk)
            open(os.path.join(os.environ["ORDER_MARKS"], kind), "a").close()
    elif event == "open" and "/journal/" in str(args[0]):
        seen.append(("journal", str(args[0]).rpartition("/")[2], None))


sys.addaudithook(hook)
from memsync.__main__ import main

os._exit = sys.exit  # the plain commands end with os._exit: here, SystemExit
try:
    main()
except SystemExit as exc:
    code = exc.code
print("ORDER " + repr((code, seen)), file=sys.stderr)
"""


def _cold_sync_order(
    config: Path, env: dict[str, str]
) -> tuple[str, list[tuple[str, str, bool | None]]]:
    """stdout of a cold `sync-now` and what it imported (collector on?) and started, in order."""
    done = subprocess.run(
        [sys.executable, "-c", ORDER_PROBE, "--config", str(config), "sync-now"],
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV, **env},
        cwd=Path(__file__).parents[2],
        timeout=120,
        check=False,
    )
    last = done.stderr.rstrip("\n").rpartition("\n")[2]
    assert last.startswith("ORDER "), done.stderr
    code, seen = eval(last.removeprefix("ORDER "))  # noqa: S307 - our own repr
    assert code == 0, (done.stdout, done.stderr)
    return done.stdout, seen


def _warmed(team: Team, tmp_path: Path, env: dict[str, str]) -> Path:
    """Bob's config after two cold syncs (the state file, with the branch to prefetch, and
    the settings memo, as a timer unit has them), with a third commit waiting upstream."""
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    for turn in range(2):
        _one_incoming_commit(team, turn)
        _cold_sync(config, env)
    _one_incoming_commit(team, 2)
    return config


def _warmed_order(team: Team, tmp_path: Path) -> list[tuple[str, str, bool | None]]:
    """What a cold `sync-now` of the third commit (after `_warmed`) imported and started, in
    order; it synced, and bob is at the upstream's head."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    out, seen = _cold_sync_order(_warmed(team, tmp_path, env), env)
    assert out.split()[:2] == ["bob", "synced"], out
    assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
    return seen


def test_a_cold_cycle_starts_its_fetch_and_status_before_the_gate_loads(
    team: Team, tmp_path: Path
) -> None:
    seen = _warmed_order(team, tmp_path)
    gate = next(i for i, (kind, name, _) in enumerate(seen) if kind == "import" and name in GATE)
    started = [name for kind, name, _ in seen[:gate] if kind == "process"]
    assert {"git fetch", "git status"} <= set(started), (seen[gate], started)
    # ... and loads as the rest of the command's code does: with the collector off (it
    # would walk the new modules' objects again and again and find no garbage).
    collected = [name for kind, name, on in seen[gate:] if kind == "import" and name in GATE and on]
    assert collected == [], collected


# What a clean fast-forward never makes, so never builds (a dataclass costs its module a
# few generated functions as it loads): the admission's answers that publish nothing
# (`roots.refused`), the daemon's status memo (`roots.statusmemo`), GitPython's handles,
# what a recovery settled and a hidden code point found.
NOT_BUILT = (
    "DryRun",
    "Unstaged",
    "Invalid",
    "Fenced",
    "AlreadyDone",
    "NoChange",
    "Marks",
    "Seen",
    "_Handle",
    "Recovered",
    "Hidden",
)

# Runs the console script's entry point, naming the classes built as they loaded: by
# `memsync.values` (frozen values, no code generated), and by `dataclasses`.
BUILT_PROBE = """
import dataclasses, os, sys
built, generated = [], []
original = dataclasses._process_class
def counting(cls, *args, **kwargs):
    generated.append(cls.__qualname__)
    return original(cls, *args, **kwargs)
dataclasses._process_class = counting
try:
    from memsync import values
except ImportError:  # a tree from before `memsync.values`
    pass
else:
    made = values._make
    def making(cls, *args):
        built.append(cls.__qualname__)
        return made(cls, *args)
    values._make = making
from memsync.__main__ import main
os._exit = sys.exit  # the plain commands end with os._exit: here, SystemExit
try:
    main()
except SystemExit as exc:
    code = exc.code
print("BUILT " + repr((code, sorted(built), sorted(generated))), file=sys.stderr)
"""


def _cold_sync_built(config: Path, env: dict[str, str]) -> tuple[list[str], list[str]]:
    """A cold `sync-now`'s frozen values and dataclasses, by name, as they were built."""
    done = subprocess.run(
        [sys.executable, "-c", BUILT_PROBE, "--config", str(config), "sync-now"],
        capture_output=True,
        text=True,
        env=env,
        cwd=Path(__file__).parents[2],
        timeout=120,
        check=False,
    )
    last = done.stderr.rstrip("\n").rpartition("\n")[2]
    assert last.startswith("BUILT "), done.stderr
    code, built, generated = eval(last.removeprefix("BUILT "))  # noqa: S307 - our own repr
    assert code == 0 and done.stdout.split()[:2] == ["bob", "synced"], (done.stdout, done.stderr)
    return built, generated


def test_a_cold_fast_forward_builds_no_dataclass_it_never_makes(team: Team, tmp_path: Path) -> None:
    """Issue 18: a cold `sync-now` that publishes builds none of the admission's refusal
    answers and no status memo (a one-shot process never reuses a status). And it generates
    no dataclass code: `@dataclass` writes and compiles each class's methods as its module
    loads (about half a millisecond a class: forty of them were a fifth of a cold
    `sync-now`); every class such a cycle loads is a frozen value (`memsync.values`)
    instead, whose methods were compiled once."""
    env = {**os.environ, **GIT_ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = _warmed(team, tmp_path, env)
    built, generated = _cold_sync_built(config, env)
    assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
    assert not set(built) & set(NOT_BUILT), sorted(set(built) & set(NOT_BUILT))
    assert generated == [] and {"RootSettings", "SyncResult", "Operation"} <= set(built)


# What a cold cycle has no use for at all: `dataclasses` and what it loads to write and
# compile a class's methods (`inspect`, and with it `ast` and `dis`; `tokenize` comes
# with `logging` too).
NEVER_IMPORTED = ("dataclasses", "inspect", "ast", "dis")


def test_a_cold_cycle_never_loads_dataclasses_or_inspect(team: Team, tmp_path: Path) -> None:
    """Issue 18: its values are `memsync.values` classes; `dataclasses` loads only for
    code that asks it about one (`dataclasses.replace`, `fields`, `asdict`)."""
    seen = _warmed_order(team, tmp_path)
    imported = {name for kind, name, _ in seen if kind == "import"}
    assert "memsync.roots.incoming" in imported  # the probe sees what loads
    assert not imported & set(NEVER_IMPORTED), sorted(imported & set(NEVER_IMPORTED))


def _held(lock_file: Path) -> bool:
    """Whether some process holds the root lock (a try-once that lets go at once)."""
    try:
        with RootLock(lock_file, wait=0):
            return False
    except LockBusy:
        return True


def _crowd(root: Path) -> None:
    """More packs in the root's store than the cycle lets stay (`packs.PACK_LIMIT`)."""
    head = git(root, "rev-parse", "HEAD^{tree}")
    for n in range(packs.PACK_LIMIT + 1):  # one object each, as a fetch of one blob leaves
        blob = subprocess.run(
            ["git", "-C", str(root), "hash-object", "-w", "--stdin"],
            input=f"crowd {n}\n",
            text=True,
            capture_output=True,
            check=True,
        ).stdout.strip()
        subprocess.run(
            ["git", "-C", str(root), "pack-objects", "-q", ".git/objects/pack/pack"],
            input=f"{blob}\n" if n else f"{head}\n",
            text=True,
            capture_output=True,
            check=True,
        )
    assert packs.crowded(packs.objects_dir(root / ".git"))


class HeldFold:
    """A root whose store is crowded, one incoming commit, and a `git` on PATH whose repack
    writes its parent's process id to `started` and waits for `word` (at most a minute)."""

    def __init__(self, team: Team, tmp_path: Path) -> None:
        self.env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
        # The fold's time limit (the cycle's) is longer than the test waits for the command.
        self.config = write_config(tmp_path, {"bob": {"path": team.bob.path, "timeout": "90s"}})
        _one_incoming_commit(team, 0)
        _cold_sync(self.config, self.env)  # the state file, the settings memo
        _crowd(team.bob.path)
        _one_incoming_commit(team, 1)
        real_git = shutil.which("git")
        folder, self.word = tmp_path / "slowfold", tmp_path / "fold-may-end"
        folder.mkdir()
        self.started = tmp_path / "fold-started"
        (folder / "git").write_text(
            "#!/bin/sh\n"
            f'case " $* " in *" repack "*) echo $PPID > {self.started}; n=0\n'
            f"  while [ ! -e {self.word} ] && [ $n -lt 600 ]; do\n"
            "    sleep 0.1; n=$((n+1)); done;; esac\n"
            f'exec {real_git} "$@"\n'
        )
        (folder / "git").chmod(0o755)
        self.path = f"{folder}:{os.environ['PATH']}"
        self.lock_file = RootLayout.for_root(tmp_path / "state", "bob").lock_file

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "memsync", "--config", str(self.config), "sync-now"]

    def folder_of(self) -> int:
        """The process id of the repack's parent, once the repack started."""
        wait_for(
            lambda: self.started.exists() and self.started.read_text().strip(),
            30,
            "the fold to start",
        )
        return int(self.started.read_text())


def test_a_cold_sync_now_answers_before_the_pack_fold_ends(team: Team, tmp_path: Path) -> None:
    """Issue 18: the pack fold is upkeep: a `sync-now` without a daemon answers and exits
    while it runs (a 280 ms repack at 10k files was a cold run's wall). The fold still runs,
    under the root lock, handed over to it: no cycle runs on the root before it ends, and
    afterwards the store is small again and has lost nothing."""
    scene = HeldFold(team, tmp_path)
    env = {**os.environ, **GIT_ENV, **scene.env, "PATH": scene.path}
    env.pop("INVOCATION_ID", None)  # not a service's process
    try:
        done = subprocess.run(
            scene.argv(),
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).parents[2],
            timeout=30,  # the old code waited for the fold: for the word, a minute
            check=False,
        )
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert done.stdout.split()[:2] == ["bob", "synced"], done.stdout
        assert not scene.word.exists()  # so the fold has not ended
        scene.folder_of()
        assert _held(scene.lock_file)  # the fold holds the root lock
    finally:
        scene.word.touch()
    wait_for(lambda: not _held(scene.lock_file), 60, "the fold to end and let go of the lock")
    assert not packs.crowded(packs.objects_dir(team.bob.path / ".git"))
    git(team.bob.path, "fsck", "--strict", "--no-dangling")
    assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")


def test_a_fold_behind_a_command_started_with_stdin_closed_keeps_the_lock(
    team: Team, tmp_path: Path
) -> None:
    """A command started with its standard input closed opens the root lock as fd 0; the
    fold's child points 0-2 at the null device: the lock must not go with it (the fold
    then failed at once and the lock was free while nothing had folded)."""
    scene = HeldFold(team, tmp_path)
    env = {**os.environ, **GIT_ENV, **scene.env, "PATH": scene.path}
    env.pop("INVOCATION_ID", None)
    try:
        done = subprocess.run(
            ["sh", "-c", 'exec "$@" <&-', "sh", *scene.argv()],
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).parents[2],
            timeout=30,
            check=False,
        )
        assert done.returncode == 0, (done.stdout, done.stderr)
        assert done.stdout.split()[:2] == ["bob", "synced"], done.stdout
        scene.folder_of()
        assert _held(scene.lock_file)  # the fold holds the root lock
    finally:
        scene.word.touch()
    wait_for(lambda: not _held(scene.lock_file), 60, "the fold to end and let go of the lock")
    assert not packs.crowded(packs.objects_dir(team.bob.path / ".git"))


def test_a_sync_now_run_by_a_service_manager_folds_before_it_exits(
    team: Team, tmp_path: Path
) -> None:
    """A timer's oneshot unit (`systemd/memsync-sync.service`): systemd kills what is left
    in the unit once the command exits, so a fold behind it would never end and the packs
    would pile up run after run. Under a service manager (INVOCATION_ID set) the command
    folds itself, and the store is small when it exits."""
    scene = HeldFold(team, tmp_path)
    env = {**os.environ, **GIT_ENV, **scene.env, "PATH": scene.path, "INVOCATION_ID": "0" * 32}
    command = subprocess.Popen(
        scene.argv(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=Path(__file__).parents[2],
    )
    try:
        assert scene.folder_of() == command.pid  # the command's own repack, not a child's
    finally:
        scene.word.touch()
        out, err = command.communicate(timeout=60)
    assert command.returncode == 0, (out, err)
    assert out.split()[:2] == ["bob", "synced"], out
    assert not packs.crowded(packs.objects_dir(team.bob.path / ".git"))
    assert not _held(scene.lock_file)


def test_a_cold_fast_forward_starts_the_fence_status_beside_the_checks(
    team: Team, tmp_path: Path
) -> None:
    """Issue 18: the fence's status of the changed paths is a read: it starts once the log
    named them, beside the incoming history's checks (before the admission writes its
    journal record and opens its `update-ref` session), instead of after the candidate's
    verdict; the fence judges it after the verdict."""
    seen = _warmed_order(team, tmp_path)
    order = [name if kind == "process" else kind for kind, name, _ in seen]
    statuses = [i for i, name in enumerate(order) if name == "git status"]
    assert len(statuses) == 2, order  # the preflight's, the fence's
    assert order.index("git log") < statuses[1] < order.index("journal"), order
    assert statuses[1] < order.index("git update-ref"), order


# What a cold cycle uses only once git has answered: the preflight's judgement of the status
# (`roots.edits`), the trust anchor and the index's stat data (after the cycle), the words
# of the result. None of them loads before the first git process starts.
AFTER_FIRST_GIT = (
    "memsync.roots.edits",
    "memsync.roots.anchor",
    "memsync.roots.indexstat",
    "memsync.cli.text",
)


def test_a_cold_cycle_loads_nothing_before_its_first_git_that_git_does_not_need(
    team: Team, tmp_path: Path
) -> None:
    seen = _warmed_order(team, tmp_path)
    first = next(i for i, (kind, _, _) in enumerate(seen) if kind == "process")
    before = {name for kind, name, _ in seen[:first] if kind == "import"}
    assert "memsync.roots.cycle" in before  # the probe sees what loads
    assert not before & set(AFTER_FIRST_GIT), sorted(before & set(AFTER_FIRST_GIT))
    after = {name for kind, name, _ in seen[first:] if kind == "import"}
    assert {"memsync.roots.edits", "memsync.cli.text"} <= after  # still used, later
