"""The peer's own test (issue 18): a cold memsync process against raw git, in one run.

What a timer unit, a cron job, a git hook or a person typing `memsync sync-now` without a
daemon pays. Every row is a whole process, wall clock, median of RUNS:

- `memsync sync-now` (no daemon) admitting one incoming one-file commit, on a 100-file and a
  10k-file root, against `git fetch && git merge --ff-only` on a clone of the same upstream:
  targets <= 4x and <= 2x;
- `memsync --help` and `memsync status` with no daemon, against `python -I -c pass` (the
  bare interpreter): targets <= 3x and <= 6x;
- the floor under the sync-now rows: the git processes memsync's fast-forward runs on its
  critical path (the fetch with memsync's forced config beside the preflight `status`, the
  incoming log, the fence's `status` of the changed path, without the index preload,
  `read-tree -m -u`, the ref move), back to back with no Python between them, against the
  same raw git: what no cut in memsync's own work can go under (no target: it shows what is
  left for Python once git has had its share).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.startup import memsync_command
from bench.sync import ENV, clone, make_upstream, row
from memsync.transports.gitenv import FORCED_ARGS
from memsync.transports.gitstatus import NARROW_CONFIG
from tests.kit import git

RUNS = int(os.environ.get("MEMSYNC_BENCH_RUNS", "9"))
WARMUP = 2
# A directory holding another tree's `memsync` package (`git archive REV memsync | tar -x`):
# its rows are timed in the same run, interleaved, for a before/after comparison.
BASELINE = os.environ.get("MEMSYNC_PEER_BASELINE", "")


def variants(env: dict[str, str]) -> dict[str, tuple[list[str], dict[str, str]]]:
    """The memsync commands to time: this checkout's, and the baseline's when given."""
    out = {"": (memsync_command(), env)}
    if BASELINE:
        old = {**env, "PYTHONPATH": BASELINE, "XDG_CACHE_HOME": env["XDG_CACHE_HOME"] + "-old"}
        out[" (baseline)"] = ([sys.executable, "-c", CONSOLE_SCRIPT], old)
    return out


# What the `memsync` console script runs (pip's wrapper), for the baseline's tree: the same
# entry point as this checkout's script, not `python -m` (runpy costs a few milliseconds).
CONSOLE_SCRIPT = "import sys; from memsync.__main__ import main; sys.argv[0] = 'memsync'; main()"


def _ms(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def _run(argv: Sequence[str], env: dict[str, str], cwd: Path | None = None) -> None:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{list(argv)} exited {done.returncode}: {done.stderr.decode()}")


def _row(name: str, ours: list[float], theirs: list[float], target: float) -> dict[str, Any]:
    return row(name, ours, theirs, f"<= {target:g}x")


def _config(base: Path, root: Path) -> Path:
    config = base / "config.yaml"
    config.write_text(
        "version: 1\n"
        f"state_dir: {base / 'state'}\n"
        f"control: {{socket: {base / 'run' / 'memsync.sock'}}}\n"
        f"roots:\n  bench:\n    path: {root}\n    watch: false\n"
    )
    return config


def _floor(root: Path, env: dict[str, str], old: str, new: str, path: str) -> None:
    """memsync's git processes of a one-commit fast-forward of `root` from `old` to `new`
    (changing `path`), as a cold `sync-now` runs them, without the Python between them."""
    box = ["git", *FORCED_ARGS]
    refspec = "+refs/heads/main:refs/remotes/origin/main"
    flags = ["--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--quiet"]
    fetch = subprocess.Popen(
        [*box, "fetch", *flags, "--end-of-options", "origin", refspec], env=env, cwd=root
    )
    status = [*box, "status", "--porcelain=v2", "-z", "--untracked-files=all", "--no-renames"]
    _run([*status, "--branch", "--ignore-submodules=none"], env, root)
    if fetch.wait() != 0:
        raise RuntimeError(f"the floor's fetch exited {fetch.returncode}")
    _run([*box, "log", "--raw", "-z", "--no-renames", "--no-abbrev", new, f"^{old}"], env, root)
    narrow = [arg for key, value in NARROW_CONFIG for arg in ("-c", f"{key}={value}")]
    _run([*box, *narrow, *status[len(box) :], "--", path], env, root)
    _run([*box, "read-tree", "-m", "-u", old, new], env, root)
    _run([*box, "update-ref", "HEAD", new, old], env, root)


def sync_now(base: Path, files: int, env: dict[str, str]) -> list[dict[str, Any]]:
    """One incoming one-file commit, admitted by a fresh `memsync sync-now` process."""
    upstream = make_upstream(base, files)
    writer = clone(upstream, base / "writer")
    raw = clone(upstream, base / "raw")
    floor_root = clone(upstream, base / "floor")
    runs: dict[str, tuple[list[str], dict[str, str], Path]] = {}
    for label, (cli, cli_env) in variants(env).items():
        root = clone(upstream, base / f"root{len(runs)}")
        sub = base / f"cfg{len(runs)}"
        sub.mkdir()
        argv = [*cli, "--config", str(_config(sub, root)), "sync-now"]
        _run(argv, cli_env, cwd=base)  # the first cycle: the state dir, the first verdict
        runs[label] = (argv, cli_env, root)
    ours: dict[str, list[float]] = {label: [] for label in runs}
    theirs, floor = [], []
    for i in range(WARMUP + RUNS):
        old = git(writer, "rev-parse", "HEAD")
        (writer / "MEMORY_note00001.md").write_text(f"# Note 1\n\nrevision {i}\n")
        git(writer, "commit", "-qam", f"edit {i}")
        git(writer, "push", "-q", "origin", "main")
        new = git(writer, "rev-parse", "HEAD")
        step = (old, new, "MEMORY_note00001.md")
        least = _ms(lambda step=step: _floor(floor_root, env, *step))  # type: ignore[misc]
        # This checkout's and the baseline's, in turn first (whichever runs first runs right
        # after the writer's push and the floor: an order it would always pay).
        for label, (argv, cli_env, _) in sorted(runs.items(), reverse=i % 2 == 1):
            took = _ms(lambda argv=argv, cli_env=cli_env: _run(argv, cli_env, cwd=base))  # type: ignore[misc]
            if i >= WARMUP:
                ours[label].append(took)
        peer = _ms(
            lambda: (
                _run(["git", "fetch", "-q", "origin"], env, raw),
                _run(["git", "merge", "-q", "--ff-only", "origin/main"], env, raw),
            )
        )
        if i >= WARMUP:
            theirs.append(peer)
            floor.append(least)
    for root in [*(root for _, _, root in runs.values()), floor_root]:
        if git(root, "rev-parse", "HEAD") != git(upstream, "rev-parse", "main"):
            raise RuntimeError("sync-now did not admit the incoming commits")
    target = 2.0 if files >= 10_000 else 4.0
    name = f"peer: sync-now, one incoming commit, {files} files (vs fetch+merge --ff-only)"
    rows = [_row(name + label, ours[label], theirs, target) for label in runs]
    least_name = f"peer: floor, memsync's git alone, {files} files (vs fetch+merge --ff-only)"
    return [*rows, row(least_name, floor, theirs, "(no target)")]


def interpreter_rows(base: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """`--help` and `status` (no daemon) against the bare interpreter, interleaved."""
    root = clone(make_upstream(base, 100), base / "root")
    config = _config(base, root)
    argvs: dict[str, tuple[list[str], dict[str, str]]] = {
        "bare": ([sys.executable, "-I", "-c", "pass"], env)
    }
    for label, (cli, cli_env) in variants(env).items():
        _run([*cli, "--config", str(config), "sync-now"], cli_env, cwd=base)
        argvs["help" + label] = ([*cli, "--help"], cli_env)
        argvs["status" + label] = ([*cli, "--config", str(config), "status"], cli_env)
    times: dict[str, list[float]] = {k: [] for k in argvs}
    for i in range(WARMUP + RUNS):
        for key, (argv, cli_env) in argvs.items():
            took = _ms(lambda argv=argv, cli_env=cli_env: _run(argv, cli_env, cwd=base))  # type: ignore[misc]
            if i >= WARMUP:
                times[key].append(took)
    rows = []
    for label in variants(env):
        bare = times["bare"]
        rows.append(
            _row(
                f"peer: memsync --help (vs python -I -c pass){label}",
                times["help" + label],
                bare,
                3,
            )
        )
        rows.append(
            _row(
                f"peer: memsync status, no daemon (vs python -I -c pass){label}",
                times["status" + label],
                bare,
                6,
            )
        )
    return rows


def run() -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="memsync-peer-") as tmp:
        base = Path(tmp)
        # As installed: bytecode cached (pip compiles it; a session may have switched that off).
        env = {k: v for k, v in ENV.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["XDG_CACHE_HOME"] = str(base / "cache")
        for files in (100, 10_000):
            (base / str(files)).mkdir()
            rows.extend(sync_now(base / str(files), files, env))
        (base / "start").mkdir()
        rows.extend(interpreter_rows(base / "start", env))
    return rows


if __name__ == "__main__":
    for r in run():
        print(
            f"{r['name']:<78} {r['memsync_ms']:7.1f} ms vs {r['raw_ms']:6.1f} ms  "
            f"ratio {r['ratio']:5.2f}  {r['target']}"
        )
