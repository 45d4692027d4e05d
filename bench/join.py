"""B9: joining a 20k-file upstream, `memsync init PATH --upstream URL` (the CLI, piped: no
progress) against `git clone` of the same upstream, alternating, in the same run.

Both fetch the same objects and check out the same files (the same system calls: the
checkout is git's own in both); what memsync adds is its start-up, the history's and the
tree's validation (every blob is read once) and a stat refresh after the staging directory
is renamed into place. Wall time on a shared machine is dominated by the file system's
load, so the CPU time of each run (its own and its children's) is reported beside it.
"""

from __future__ import annotations

import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.sync import ENV, GITIGNORE, one_commit
from tests.kit import git

FILES = 20_000
RUNS = 5


def make_upstream(base: Path, files: int = FILES) -> Path:
    """A bare upstream of `files` small insight logs and the two root documents, packed."""
    upstream = one_commit(
        base,
        "big.git",
        [
            ("MEMORY.md", b"# User Context\n\nfact\n\n# Cross-Session Agent Behavior\n\nlesson\n"),
            ("PURSUITS.md", b"# Pursuits\n\n## Focus\n"),
            (".gitignore", GITIGNORE),
            *(
                (f"insight_logs/2026-01-01-{i:06d}.md", f"# log {i}\n{'x' * (i % 300)}\n".encode())
                for i in range(files)
            ),
        ],
    )
    git(upstream, "gc", "-q")
    return upstream


def _timed(argv: list[str], cwd: Path) -> tuple[float, float]:
    """(wall ms, CPU ms of the process and its children) of one run."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, env=ENV, capture_output=True, check=True)
    wall = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return wall, cpu


def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="memsync-bench-") as tmp:
        base = Path(tmp)
        url = make_upstream(base).as_uri()
        ours: list[tuple[float, float]] = []
        theirs: list[tuple[float, float]] = []
        init = [sys.executable, "-m", "memsync", "init", "joined", "--upstream", url]
        for i in range(RUNS):
            for kind in ("ours", "theirs") if i % 2 == 0 else ("theirs", "ours"):
                for leftover in ("joined", "cloned"):
                    shutil.rmtree(base / leftover, ignore_errors=True)
                if kind == "ours":
                    ours.append(_timed(init, base))
                else:
                    theirs.append(_timed(["git", "clone", "-q", url, "cloned"], base))
    wall = statistics.median(w for w, _ in ours), statistics.median(w for w, _ in theirs)
    cpu = statistics.median(c for _, c in ours), statistics.median(c for _, c in theirs)
    row = {"runs": RUNS, "target": "report (no budget yet)"}
    return [
        {
            "name": f"B9 init joining {FILES} files (vs git clone), wall",
            "memsync_ms": wall[0],
            "raw_ms": wall[1],
            "ratio": wall[0] / wall[1],
            **row,
        },
        {
            "name": f"B9 init joining {FILES} files (vs git clone), CPU",
            "memsync_ms": cpu[0],
            "raw_ms": cpu[1],
            "ratio": cpu[0] / cpu[1],
            **row,
        },
    ]
