"""B2 and B3 (design/BENCHMARKS.md): sync-now against raw git on the same upstream.

B2: a cycle with nothing to do, against `git fetch` of the same upstream.
B3: a cycle admitting one incoming commit that touches one file, against
`git fetch && git merge --ff-only`, on a 100-file and a 10k-file root: <= 2.5x at 100 files,
<= 1.5x at 10k files, and the 10k-file / 100-file ratio at most raw git's own ratio x 1.2 in
the same run (validation and publication are O(diff): the daemon keeps the last tree's
listing and verdict by object id and derives the next from git's diff).

The memsync side runs in-process (`sync_root`, as the daemon runs it); the CLI's own
start-up time is reported separately.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import Any

from memsync.config.model import RootSettings
from memsync.roots.cycle import SyncOptions, sync_root
from tests.kit import GIT_ENV, git, settings_for

RUNS = 15
ENV = {**os.environ, **GIT_ENV}
GITIGNORE = b"*\n!MEMORY*.md\n!PURSUITS.md\n!.gitignore\n"


def one_commit(base: Path, name: str, files: Iterable[tuple[str, bytes]]) -> Path:
    """A bare upstream `base/name` whose `main` is one commit holding `files` (fast-import)."""
    upstream = base / name
    git(base, "init", "-q", "--bare", "-b", "main", str(upstream))
    stream = bytearray(b"commit refs/heads/main\ncommitter Bench <b@e> 0 +0000\ndata 4\nbase\n")
    for path, data in files:
        stream += b"M 100644 inline " + path.encode() + b"\ndata %d\n" % len(data) + data + b"\n"
    git(upstream, "fast-import", "--quiet", input=bytes(stream))
    return upstream


def make_upstream(base: Path, files: int) -> Path:
    """A bare upstream whose one commit holds MEMORY.md, PURSUITS.md and `files` detail files."""
    return one_commit(
        base,
        "team.git",
        [
            ("MEMORY.md", b"# User Context\n"),
            ("PURSUITS.md", b"# Pursuits\n\n## Focus\n"),
            (".gitignore", GITIGNORE),
            *(
                (f"MEMORY_note{i:05d}.md", f"# Note {i}\n\nsome remembered fact {i}\n".encode())
                for i in range(files - 3)
            ),
        ],
    )


def clone(upstream: Path, path: Path) -> Path:
    git(path.parent, "clone", "-q", str(upstream), str(path))
    return path


def settings(path: Path) -> RootSettings:
    return settings_for("bench", path, timeout=timedelta(seconds=120))


def timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return (time.perf_counter() - started) * 1000


def b2(base: Path) -> dict[str, Any]:
    upstream = make_upstream(base, 100)
    root = clone(upstream, base / "root")
    raw = clone(upstream, base / "raw")
    state = base / "state"
    cfg = settings(root)
    assert sync_root(cfg, state, SyncOptions()).status == "current"
    ours, theirs = [], []
    for _ in range(RUNS):
        ours.append(timed(lambda: _expect(sync_root(cfg, state, SyncOptions()), "current")))
        theirs.append(timed(lambda: git(raw, "fetch", "-q", "origin")))
    cli = _cli_ms(base, root, state)
    return row("B2 sync-now, nothing to do (vs git fetch)", ours, theirs, "<= 1.5x", cli_ms=cli)


def b3(base: Path, files: int) -> dict[str, Any]:
    upstream = make_upstream(base, files)
    writer = clone(upstream, base / "writer")
    root = clone(upstream, base / "root")
    raw = clone(upstream, base / "raw")
    state = base / "state"
    cfg = settings(root)
    sync_root(cfg, state, SyncOptions())
    ours, theirs = [], []
    for i in range(RUNS):
        (writer / "MEMORY_note00001.md").write_text(f"# Note 1\n\nrevision {i}\n")
        git(writer, "commit", "-qam", f"edit {i}")
        git(writer, "push", "-q", "origin", "main")
        ours.append(timed(lambda: _expect(sync_root(cfg, state, SyncOptions()), "synced")))
        theirs.append(
            timed(
                lambda: (
                    git(raw, "fetch", "-q", "origin"),
                    git(raw, "merge", "-q", "--ff-only", "origin/main"),
                )
            )
        )
    target = "<= 1.5x" if files >= 10_000 else "<= 2.5x"
    return row(
        f"B3 one incoming commit, {files} files (vs fetch+merge --ff-only)", ours, theirs, target
    )


def _expect(result: Any, status: str) -> None:
    if result.status != status:
        raise RuntimeError(f"expected {status}, got {result.status}: {result.message}")


def _cli_ms(base: Path, root: Path, state: Path) -> float:
    cfg = base / "config.yaml"
    cfg.write_text(f"version: 1\nstate_dir: {state}\nroots:\n  bench:\n    path: {root}\n")
    runs = []
    for _ in range(5):
        runs.append(
            timed(
                lambda: subprocess.run(
                    [sys.executable, "-m", "memsync", "--config", str(cfg), "sync-now"],
                    env=ENV,
                    capture_output=True,
                    check=True,
                )
            )
        )
    return statistics.median(runs)


def row(
    name: str, ours: list[float], theirs: list[float], target: str, **extra: Any
) -> dict[str, Any]:
    m, r = statistics.median(ours), statistics.median(theirs)
    return {
        "name": name,
        "memsync_ms": m,
        "raw_ms": r,
        "ratio": m / r,
        "target": target,
        "runs": len(ours),
        **extra,
    }


def run() -> list[dict[str, Any]]:
    rows = []
    with tempfile.TemporaryDirectory(prefix="memsync-bench-") as tmp:
        base = Path(tmp)
        for name, job in (
            ("b2", b2),
            ("b3-100", lambda p: b3(p, 100)),
            ("b3-10k", lambda p: b3(p, 10_000)),
        ):
            (base / name).mkdir()
            rows.append(job(base / name))
    small, large = rows[1]["memsync_ms"], rows[2]["memsync_ms"]
    raw_small, raw_large = rows[1]["raw_ms"], rows[2]["raw_ms"]
    raw_ratio = raw_large / raw_small
    rows.append(
        {
            "name": "B3 10k-file / 100-file root (memsync)",
            "memsync_ms": large,
            "raw_ms": small,
            "ratio": large / small,
            "target": f"<= {raw_ratio * 1.2:.2f} (raw git's ratio x 1.2)",
            "runs": RUNS,
        }
    )
    rows.append(
        {
            "name": "  the same scaling for raw git (context)",
            "memsync_ms": raw_large,
            "raw_ms": raw_small,
            "ratio": raw_ratio,
            "target": "-",
            "runs": RUNS,
        }
    )
    return rows
