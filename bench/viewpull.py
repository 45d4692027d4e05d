"""B5, one changed file (design/BENCHMARKS.md): pulling a new revision of a 30k-item view
that changes one of its files, against `curl` downloading the package plus `unzip`
(Python's zipfile) extracting it, measured in the same run.

The view is 30 detail files of 1,000 nodes each behind F# headings (about 3 MiB of
Markdown); each new revision appends one node to one file, so every other file keeps its
bytes. The pull is `pull_views` in-process, as `memsync views pull` runs it: conditional
manifest fetch, signature and claims check, package download and hash, safe extraction,
package and graph validation (through the parse cache, which the first pull fills) and the
atomic swap. The hub and the signing key are bench/views.py's.
"""

from __future__ import annotations

import asyncio
import hashlib
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.views import PACKAGE_META, Hub, publish
from memsync.views.pull import pull_views

PARTS = 30
NODES = 1_000
RUNS = 7


def view_files(revision: int) -> dict[str, bytes]:
    """Revision `revision` of the view: revision r > 1 added one node to part r % PARTS."""
    words = [hashlib.sha256(str(i).encode()).hexdigest()[:8] for i in range(4096)]
    memory = ["# Bench {#bench}", ""]
    files: dict[str, bytes] = {}
    for part in range(PARTS):
        rng = random.Random(part)
        lines = [
            f"- `p{part}-n{n}` {' '.join(rng.choice(words) for _ in range(10))} → []"
            for n in range(NODES)
        ]
        lines += [f"- `p{part}-r{r}` learned in revision {r} → []" for r in _edits(revision, part)]
        files[f"dist/MEMORY_part{part}.md"] = ("\n".join(lines) + "\n").encode()
        memory.append(f"## Part {part} {{F#part{part}}}")
    files["dist/MEMORY.md"] = ("\n".join(memory) + "\n").encode()
    return {**files, **PACKAGE_META}


def _edits(revision: int, part: int) -> list[int]:
    return [r for r in range(2, revision + 1) if r % PARTS == part]


def b5_one_file(base: Path) -> list[dict[str, Any]]:
    static = base / "static"
    publish(static, 1, view_files(1))
    hub = Hub(base, static)
    try:
        view = hub.view(base)
        state = base / "state"

        def pull() -> str:
            return asyncio.run(pull_views([view], state))[0].status

        started = time.perf_counter()
        if pull() != "pulled":
            raise RuntimeError("the first pull failed")
        first = (time.perf_counter() - started) * 1000
        pulls, raws = [], []
        for revision in range(2, 2 + RUNS):
            mine, raw = hub.pull_new(base, static, revision, view_files(revision), pull)
            pulls.append(mine)
            raws.append(raw)
    finally:
        hub.stop()
    size = (static / "v1" / "views" / "bench" / "package").stat().st_size / 2**20
    items = PARTS * NODES
    mine, raw = statistics.median(pulls), statistics.median(raws)
    return [
        {
            "name": f"B5 pull of a revision changing 1 file of a {items}-item "
            f"{size:.1f} MiB view (vs curl + unzip)",
            "memsync_ms": mine,
            "raw_ms": raw,
            "ratio": mine / raw,
            "target": "<= 1.5x",
            "runs": RUNS,
        },
        {
            "name": f"B5 first pull of that {items}-item view, parse cache cold (vs curl + unzip)",
            "memsync_ms": first,
            "raw_ms": raw,
            "ratio": first / raw,
            "target": "info",
            "runs": 1,
        },
    ]


def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="memsync-viewpull-bench-") as tmp:
        base = Path(tmp)
        (base / "nginx" / "tmp").mkdir(parents=True)
        return b5_one_file(base)
