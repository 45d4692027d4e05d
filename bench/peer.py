"""The peer's own test (issue 18): a cold memsync process against raw git, in one run.

What a timer unit, a cron job, a git hook or a person typing `memsync sync-now` without a
daemon pays. Every row is a whole process, wall clock, median of RUNS:

- `memsync sync-now` (no daemon) admitting one incoming one-file commit, on a 100-file and a
  10k-file root, against `git fetch && git merge --ff-only` on a clone of the same upstream:
  targets <= 4x and <= 2x;
- `memsync --help` and `memsync status` with no daemon, against `python -I -c pass` (the
  bare interpreter): targets <= 3x and <= 6x.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.startup import memsync_command
from bench.sync import ENV, clone, git, make_upstream

RUNS = int(os.environ.get("MEMSYNC_BENCH_RUNS", "9"))
WARMUP = 2


def _ms(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def _run(argv: Sequence[str], env: dict[str, str], cwd: Path | None = None) -> None:
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{list(argv)} exited {done.returncode}: {done.stderr.decode()}")


def _row(name: str, ours: list[float], theirs: list[float], target: float) -> dict[str, Any]:
    m, r = statistics.median(ours), statistics.median(theirs)
    return {
        "name": name,
        "memsync_ms": m,
        "raw_ms": r,
        "ratio": m / r,
        "target": f"<= {target:g}x",
        "runs": len(ours),
    }


def _config(base: Path, root: Path) -> Path:
    config = base / "config.yaml"
    config.write_text(
        "version: 1\n"
        f"state_dir: {base / 'state'}\n"
        f"control: {{socket: {base / 'run' / 'memsync.sock'}}}\n"
        f"roots:\n  bench:\n    path: {root}\n    watch: false\n"
    )
    return config


def sync_now(base: Path, files: int, env: dict[str, str]) -> dict[str, Any]:
    """One incoming one-file commit, admitted by a fresh `memsync sync-now` process."""
    upstream = make_upstream(base, files)
    writer = clone(upstream, base / "writer")
    root = clone(upstream, base / "root")
    raw = clone(upstream, base / "raw")
    cli = [*memsync_command(), "--config", str(_config(base, root)), "sync-now"]
    _run(cli, env)  # the first cycle: the state directory, the root's first verdict
    ours, theirs = [], []
    for i in range(WARMUP + RUNS):
        (writer / "MEMORY_note00001.md").write_text(f"# Note 1\n\nrevision {i}\n")
        git(writer, "commit", "-qam", f"edit {i}")
        git(writer, "push", "-q", "origin", "main")
        mine = _ms(lambda: _run(cli, env))
        peer = _ms(
            lambda: (
                _run(["git", "fetch", "-q", "origin"], env, raw),
                _run(["git", "merge", "-q", "--ff-only", "origin/main"], env, raw),
            )
        )
        if i >= WARMUP:
            ours.append(mine)
            theirs.append(peer)
    if git(root, "rev-parse", "HEAD") != git(upstream, "rev-parse", "main"):
        raise RuntimeError("sync-now did not admit the incoming commits")
    target = 2.0 if files >= 10_000 else 4.0
    name = f"peer: sync-now, one incoming commit, {files} files (vs fetch+merge --ff-only)"
    return _row(name, ours, theirs, target)


def interpreter_rows(base: Path, env: dict[str, str]) -> list[dict[str, Any]]:
    """`--help` and `status` (no daemon) against the bare interpreter, interleaved."""
    root = clone(make_upstream(base, 100), base / "root")
    cli = memsync_command()
    config = _config(base, root)
    _run([*cli, "--config", str(config), "sync-now"], env)
    argvs = {
        "bare": [sys.executable, "-I", "-c", "pass"],
        "help": [*cli, "--help"],
        "status": [*cli, "--config", str(config), "status"],
    }
    times: dict[str, list[float]] = {k: [] for k in argvs}
    for i in range(WARMUP + RUNS):
        for key, argv in argvs.items():
            took = _ms(lambda argv=argv: _run(argv, env))  # type: ignore[misc]
            if i >= WARMUP:
                times[key].append(took)
    return [
        _row("peer: memsync --help (vs python -I -c pass)", times["help"], times["bare"], 3),
        _row(
            "peer: memsync status, no daemon (vs python -I -c pass)",
            times["status"],
            times["bare"],
            6,
        ),
    ]


def run() -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="memsync-peer-") as tmp:
        base = Path(tmp)
        # As installed: bytecode cached (pip compiles it; a session may have switched that off).
        env = {k: v for k, v in ENV.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["XDG_CACHE_HOME"] = str(base / "cache")
        for files in (100, 10_000):
            (base / str(files)).mkdir()
            rows.append(sync_now(base / str(files), files, env))
        (base / "start").mkdir()
        rows.extend(interpreter_rows(base / "start", env))
    return rows


if __name__ == "__main__":
    for r in run():
        print(
            f"{r['name']:<78} {r['memsync_ms']:7.1f} ms vs {r['raw_ms']:6.1f} ms  "
            f"ratio {r['ratio']:5.2f}  {r['target']}"
        )
