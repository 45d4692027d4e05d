"""What the git box reads without a process (GitPython), against the real git binary.

Every answer is compared with git's own; a `git` on PATH that records each run shows which
reads start a process (none should, for the usual shapes of a repository) and that a no-op
sync cycle still costs exactly two (status and fetch).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.transports import gitread
from memsync.transports.git import Git
from tests.conftest import Team
from tests.helpers import commit, git


def _spy(tmp_path: Path, *, real: bool = True) -> tuple[Path, Path]:
    """A directory holding a `git` that logs its arguments (then runs the real git)."""
    real_git = shutil.which("git")
    assert real_git is not None
    folder = tmp_path / "spy"
    folder.mkdir(parents=True)
    log = tmp_path / "git-runs.log"
    then = f'exec {real_git} "$@"\n' if real else "exit 97\n"
    # One line per run, unit-separated, in one write: runs may overlap (the prefetch).
    record = f"line=$(printf '%s\\037' \"$@\"); printf '%s\\n' \"$line\" >> {log}\n"
    (folder / "git").write_text(f"#!/bin/sh\n{record}{then}")
    (folder / "git").chmod(0o755)
    return folder, log


def _runs(log: Path) -> list[str]:
    """The git subcommand of each logged run (the box's `-c key=value` pairs skipped)."""
    found = []
    for line in log.read_text().splitlines() if log.exists() else []:
        args = line.split("\x1f")[:-1]
        while args[:1] == ["-c"]:
            args = args[2:]
        found.append(args[0] if args else "")
    return found


def test_a_no_op_cycle_costs_two_git_processes(
    team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    assert team.bob.sync().status == "synced"
    assert team.bob.sync().status == "current"  # the config guard has read bob's config
    for packed in (False, True):  # the tracking ref as fetch writes it, and packed
        if packed:
            git(team.bob.path, "pack-refs", "--all")
            assert team.bob.sync().status == "current"
        folder, log = _spy(tmp_path / f"packed-{packed}")
        with monkeypatch.context() as env:
            env.setenv("PATH", f"{folder}:{os.environ['PATH']}")
            assert team.bob.sync().status == "current"
        assert sorted(_runs(log)) == ["fetch", "status"]  # side by side (the prefetch)


def _scene(tmp_path: Path) -> tuple[Path, Path]:
    """A root with loose, packed and symbolic refs, config, two remotes, and a worktree."""
    root = tmp_path / "root"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    git(root, "config", "user.name", "Root Person")
    git(root, "config", "user.email", "root@example.invalid")
    git(root, "remote", "add", "origin", "https://example.invalid/first.git")
    git(root, "config", "--add", "remote.origin.url", "https://example.invalid/last.git")
    git(root, "remote", "add", "mirror", "/srv/mirror.git")
    first = commit(root, {"a.md": "# A\n"})
    git(root, "update-ref", "refs/remotes/origin/main", first)
    git(root, "update-ref", "refs/memsync/kept", first)
    git(root, "pack-refs", "--all")
    second = commit(root, {"b.md": "# B\n"})
    git(root, "update-ref", "refs/memsync/kept", second)  # loose, over the packed one
    git(root, "symbolic-ref", "refs/remotes/origin/HEAD", "refs/remotes/origin/main")
    worktree = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "--detach", str(worktree), first)
    return root, worktree


_REFS = (
    "HEAD",
    "refs/heads/main",
    "refs/remotes/origin/main",  # packed only
    "refs/memsync/kept",  # loose over packed
    "refs/remotes/origin/HEAD",  # symbolic
)


def _readers(root: Path, worktree: Path) -> dict[str, object]:
    box_root, box_wt = Git(root), Git(worktree)
    return {
        "git_dir": str(box_root.git_dir()),
        "common_dir": str(box_root.common_dir()),
        "wt_git_dir": str(box_wt.git_dir()),
        "wt_common_dir": str(box_wt.common_dir()),
        "merge": box_root.merge_in_progress(),
        "refs": {ref: box_root.ref_value(ref) for ref in _REFS},
        "wt_refs": {ref: box_wt.ref_value(ref) for ref in _REFS},
        "branch": box_root.current_branch(),
        "wt_branch": box_wt.current_branch(),
        "user": box_root.config_get("user.name"),
        "identity": box_root.identity_config(),
        "origin": box_root.remote_url("origin"),
        "mirror": box_root.remote_url("mirror"),
        "wt_origin": box_wt.remote_url("origin"),
    }


def _expected(root: Path, worktree: Path) -> dict[str, object]:
    """The same facts in git's own words."""

    def absolute(cwd: Path, *args: str) -> str:
        return str(Path(git(cwd, "rev-parse", "--path-format=absolute", *args)).resolve())

    return {
        "git_dir": str(root / ".git"),
        "common_dir": str(root / ".git"),
        "wt_git_dir": absolute(worktree, "--git-dir"),
        "wt_common_dir": absolute(worktree, "--git-common-dir"),
        "merge": False,
        "refs": {ref: git(root, "rev-parse", ref) for ref in _REFS},
        "wt_refs": {ref: git(worktree, "rev-parse", ref) for ref in _REFS},
        "branch": git(root, "symbolic-ref", "--short", "HEAD"),
        "wt_branch": None,  # detached
        "user": git(root, "config", "--get", "user.name"),
        "identity": [
            ("user.name", git(root, "config", "--get", "user.name")),
            ("user.email", git(root, "config", "--get", "user.email")),
        ],
        "origin": git(root, "config", "--get", "remote.origin.url"),
        "mirror": git(root, "config", "--get", "remote.mirror.url"),
        "wt_origin": git(worktree, "config", "--get", "remote.origin.url"),
    }


def test_every_reader_answers_like_git_without_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, worktree = _scene(tmp_path)
    expected = _expected(root, worktree)
    assert expected["origin"] == "https://example.invalid/last.git"  # git's last value wins
    folder, log = _spy(tmp_path)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    assert _readers(root, worktree) == expected
    assert _runs(log) == []


_CHILD = """
import json, os, sys
from pathlib import Path
from memsync.transports import gitread
from tests.integration.test_git_refs import _readers
root, worktree = Path(sys.argv[1]), Path(sys.argv[2])
answers = _readers(root, worktree)
handle = gitread.HANDLES.open(root)
attempts = {
    "repo.git.version": lambda: handle.repo.git.version(),
    "is_dirty": handle.repo.is_dirty,
    "an object read": lambda: handle.repo.head.commit.tree,
}
refused = {}
for name, attempt in attempts.items():
    try:
        attempt()
        refused[name] = "ran"
    except Exception as exc:
        refused[name] = type(exc).__name__
left = sorted(key for key in os.environ if key.startswith("GIT_PYTHON"))
print(json.dumps({"answers": answers, "refused": refused, "env": left}))
"""


@pytest.mark.parametrize("git_on_path", [True, False], ids=["spy-git", "no-git"])
def test_gitpython_never_starts_git_from_import_on(tmp_path: Path, git_on_path: bool) -> None:
    """A fresh interpreter: importing GitPython, opening the handle, every reader, and three
    calls that would run git in GitPython (each fails instead); with git missing, the
    import neither fails nor warns and the readers still answer."""
    root, worktree = _scene(tmp_path)
    expected = json.loads(json.dumps(_expected(root, worktree)))
    folder, log = _spy(tmp_path, real=git_on_path)
    if not git_on_path:
        (folder / "git").unlink()
    env = {**os.environ, "PATH": str(folder), "PYTHONWARNINGS": "error"}
    env.pop("GIT_PYTHON_REFRESH", None)
    env.pop("GIT_PYTHON_GIT_EXECUTABLE", None)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(root), str(worktree)],
        cwd=Path(__file__).parents[2],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr == ""
    found = json.loads(done.stdout)
    assert found["answers"] == expected
    assert found["refused"] == dict.fromkeys(
        ("repo.git.version", "is_dirty", "an object read"), "GitCommandNotFound"
    )
    assert found["env"] == []  # the import's settings were put back
    assert _runs(log) == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"]])
def test_cli_start_up_does_not_import_gitpython(argv: list[str]) -> None:
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memsync", *argv],
        capture_output=True,
        text=True,
        check=True,
    )
    modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines()}
    assert "memsync" in modules  # (the box itself is not imported either since start-up work)
    assert not {m for m in modules if m.split(".")[0] in ("git", "gitdb", "smmap")}


def test_unusual_shapes_are_asked_of_git(tmp_path: Path) -> None:
    """What GitPython would read differently is answered by git: the same values."""
    root = tmp_path / "root"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    box_root = Git(root)
    assert box_root.current_branch() == "main"  # unborn
    assert box_root.ref_value("HEAD") is None
    first = commit(root, {"a.md": "# A\n"})
    git(root, "symbolic-ref", "refs/heads/alias", "refs/heads/main")
    git(root, "symbolic-ref", "HEAD", "refs/heads/alias")
    assert box_root.current_branch() == git(root, "symbolic-ref", "--short", "HEAD") == "main"
    git(root, "symbolic-ref", "HEAD", "refs/heads/main")
    git(root, "update-ref", "refs/bisect/bad", first)
    assert box_root.ref_value("refs/bisect/bad") == first
    worktree = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "--detach", str(worktree))
    second = commit(worktree, {"b.md": "# B\n"})
    git(worktree, "update-ref", "refs/bisect/bad", second)  # the worktree's own
    assert Git(worktree).ref_value("refs/bisect/bad") == second
    assert box_root.ref_value("refs/heads/nope") is None
    # Values GitPython's parser keeps escaped, a per-worktree config, keys the box forces.
    git(root, "config", "user.name", 'A "quoted" \\ name')
    assert box_root.config_get("user.name") == 'A "quoted" \\ name'
    git(root, "config", "core.hooksPath", "/somewhere/hooks")
    assert box_root.config_get("core.hooksPath") == os.devnull
    git(root, "config", "extensions.worktreeConfig", "true")
    git(root, "config", "--worktree", "user.email", "worktree@example.invalid")
    git(root, "config", "user.email", "shared@example.invalid")
    assert box_root.config_get("user.email") == "worktree@example.invalid"
    assert box_root.remote_url("nope") is None


def test_config_is_the_repository_level_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".config" / "git").mkdir(parents=True)
    for path in (home / ".gitconfig", home / ".config" / "git" / "config"):
        path.write_text(
            "[user]\n\tname = Global Person\n\temail = global@example.invalid\n"
            '[remote "origin"]\n\turl = https://global.invalid/x.git\n'
        )
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    root = tmp_path / "root"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    box_root = Git(root)
    assert box_root.config_get("user.name") is None
    assert box_root.remote_url("origin") is None
    assert box_root.identity_config() == [
        ("user.name", "memsync"),
        ("user.email", "memsync@localhost"),
    ]
    (root / ".git" / "identity").write_text("[user]\n\tname = Included Person\n")
    git(root, "config", "include.path", "identity")
    assert box_root.config_get("user.name") == "Included Person"


def test_inherited_git_environment_does_not_redirect_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GitPython obeys GIT_COMMON_DIR and GIT_OBJECT_DIRECTORY; git in the box never sees
    them (nor GIT_DIR or GIT_WORK_TREE). A root first opened under them reads its own."""
    roots = {}
    for name in ("mine", "theirs"):
        roots[name] = tmp_path / name
        git(tmp_path, "init", "-q", "-b", name, str(roots[name]))
        git(roots[name], "remote", "add", "origin", f"/srv/{name}.git")
        commit(roots[name], {f"{name}.md": f"# {name}\n"})
    mine, theirs = roots["mine"], roots["theirs"]
    head = git(mine, "rev-parse", "HEAD")
    other = str(theirs / ".git")
    monkeypatch.setenv("GIT_DIR", other)
    monkeypatch.setenv("GIT_WORK_TREE", str(theirs))
    monkeypatch.setenv("GIT_COMMON_DIR", other)
    monkeypatch.setenv("GIT_OBJECT_DIRECTORY", f"{other}/objects")
    box_mine = Git(mine)
    assert box_mine.git_dir() == mine / ".git"
    assert box_mine.common_dir() == (mine / ".git").resolve()
    assert box_mine.ref_value("HEAD") == head
    assert box_mine.ref_value("refs/heads/mine") == head
    assert box_mine.current_branch() == "mine"
    assert box_mine.remote_url("origin") == "/srv/mine.git"


def test_one_handle_per_root_until_dot_git_changes(tmp_path: Path) -> None:
    root, _ = _scene(tmp_path)
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", "-b", "main", str(other))
    commit(other, {"o.md": "# O\n"})
    worktree = tmp_path / "other-wt"
    git(other, "worktree", "add", "-q", "--detach", str(worktree))
    first = gitread.HANDLES.open(root)
    assert not isinstance(first, gitread.Read)
    assert Git(root).current_branch() == "main"
    assert gitread.HANDLES.open(root) is first  # every Git of the root shares it
    # The root becomes a linked worktree: `.git` turns into a `gitdir:` file.
    shutil.rmtree(root / ".git")
    (root / ".git").write_bytes((worktree / ".git").read_bytes())
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    box_root = Git(root)
    assert box_root.git_dir() == admin
    assert box_root.current_branch() is None  # the worktree's HEAD is detached
    assert box_root.ref_value("HEAD") == git(worktree, "rev-parse", "HEAD")


def test_a_dot_git_that_becomes_a_repository_is_seen(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / ".git").mkdir(parents=True)  # a clone or init still in progress
    assert Git(root).git_dir() is None
    git(root, "init", "-q", "-b", "main")
    assert Git(root).git_dir() == root / ".git"
    assert Git(root).current_branch() == "main"


def test_kept_work_trees_are_bounded() -> None:
    """Every cycle's candidate worktree has its own path: a daemon must not keep them all."""
    kept: gitread.Recent[int, str] = gitread.Recent(3)
    for key in range(5):
        kept.put(key, str(key))
        assert kept.get(0) == "0"  # used again: kept
    assert [kept.get(key) for key in range(5)] == ["0", None, None, "3", "4"]


def test_a_team_servers_roots_polled_in_turn_keep_their_handles(tmp_path: Path) -> None:
    # 300 roots polled one after the other: each still has its handle at its next poll (at
    # 128 kept, each was forgotten first and reopened every poll, config read again).
    first = tmp_path / "r0"
    git(tmp_path, "init", "-q", "-b", "main", str(first))
    roots = [first] + [shutil.copytree(first, tmp_path / f"r{i}") for i in range(1, 300)]
    opened = [gitread.HANDLES.open(root) for root in roots]
    assert not any(isinstance(handle, gitread.Read) for handle in opened)
    again = [gitread.HANDLES.open(root) for root in roots]
    assert all(a is b for a, b in zip(opened, again, strict=True))


# -- the plain file readers (a one-shot box reads these without GitPython or a process) --


def test_a_one_shot_box_reads_plain_refs_and_dirs_like_git_without_a_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _worktree = _scene(tmp_path)
    git(root, "config", "--unset-all", "remote.origin.url")  # two URLs refuse the root
    plain = ("refs/heads/main", "refs/remotes/origin/main", "refs/memsync/kept")
    expected = {ref: git(root, "rev-parse", ref) for ref in (*plain, "refs/remotes/origin/HEAD")}
    folder, log = _spy(tmp_path)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    box = Git(root, resident=False)
    assert box.git_dir() == box.common_dir() == root / ".git"
    assert {ref: box.ref_value(ref) for ref in plain} == {ref: expected[ref] for ref in plain}
    assert box.merge_in_progress() is False
    assert _runs(log) == []  # loose, packed only, loose over packed: read from the files
    assert box.ref_value("refs/remotes/origin/HEAD") == expected["refs/remotes/origin/HEAD"]
    assert _runs(log) == ["config", "rev-parse"]  # a symbolic ref: git follows it


def test_file_refs_answer_git_s_value_or_nothing(tmp_path: Path) -> None:
    """Each shape the files backend can hold: the reader gives git's own value, or None
    (git decides) for every shape it does not know for certain."""
    root = tmp_path / "root"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    first = commit(root, {"a.md": "# A\n"})
    second = commit(root, {"b.md": "# B\n"})
    git(root, "tag", "-a", "-m", "t", "v1", first)
    git(root, "update-ref", "refs/memsync/packed", first)
    git(root, "update-ref", "refs/memsync/over", first)
    git(root, "pack-refs", "--all")
    git(root, "update-ref", "refs/memsync/over", second)  # loose over packed
    git(root, "update-ref", "refs/memsync/loose", second)
    git(root, "symbolic-ref", "refs/memsync/symbolic", "refs/heads/main")
    dot = root / ".git"
    assert gitread.plain_git_dir(root) == dot
    answers = {
        ref: gitread.file_ref(dot, ref)
        for ref in (
            "refs/heads/main",
            "refs/tags/v1",  # packed, with its peeled line
            "refs/memsync/packed",
            "refs/memsync/over",
            "refs/memsync/loose",
        )
    }
    assert answers == {ref: git(root, "rev-parse", ref) for ref in answers}
    assert answers["refs/memsync/over"] == second
    for unsure in (
        "refs/memsync/symbolic",  # `ref: ...`: git follows it
        "refs/memsync/absent",
        "refs/memsync",  # a directory
        "refs/memsync/../heads/main",
        "refs/memsync/loose.lock",
        "HEAD",
    ):
        assert gitread.file_ref(dot, unsure) is None, unsure
    (dot / "refs" / "memsync" / "linked").symlink_to(dot / "refs" / "memsync" / "loose")
    assert gitread.file_ref(dot, "refs/memsync/linked") is None
    packed = (dot / "packed-refs").read_bytes()
    (dot / "packed-refs").write_bytes(packed.rstrip(b"\n"))  # not a file git wrote whole
    assert gitread.file_ref(dot, "refs/memsync/packed") is None
    (dot / "packed-refs").write_bytes(packed + b"garbage\n")
    assert gitread.file_ref(dot, "refs/memsync/packed") is None
    (dot / "packed-refs").write_bytes(packed)
    (dot / "reftable").mkdir()  # another ref backend: git decides
    assert gitread.file_ref(dot, "refs/memsync/loose") is None


def test_only_a_plain_dot_git_is_read_from_its_files(tmp_path: Path) -> None:
    root = tmp_path / "root"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    commit(root, {"a.md": "# A\n"})
    assert gitread.plain_git_dir(root) == root / ".git"
    (root / "HEAD").write_text("ref: refs/heads/main\n")  # the work tree looks bare too
    assert gitread.plain_git_dir(root) is None
    (root / "HEAD").unlink()
    (root / ".git" / "commondir").write_text("..\n")  # a worktree's administrative dir
    assert gitread.plain_git_dir(root) is None
    (root / ".git" / "commondir").unlink()
    worktree = tmp_path / "wt"
    git(root, "worktree", "add", "-q", "--detach", str(worktree))
    assert gitread.plain_git_dir(worktree) is None  # a `gitdir:` file
    assert Git(worktree, resident=False).git_dir() == Path(
        git(worktree, "rev-parse", "--absolute-git-dir")
    )
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".git").symlink_to(root / ".git")
    assert gitread.plain_git_dir(linked) is None
    empty = tmp_path / "empty"
    (empty / ".git").mkdir(parents=True)
    assert gitread.plain_git_dir(empty) is None
    assert Git(empty, resident=False).git_dir() is None
