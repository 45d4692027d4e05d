"""B1 (design/BENCHMARKS.md): validating synthetic RightMemory roots of 1k, 10k, 100k items.

Compared with the floor measured in the same run: listing, reading and UTF-8-decoding the
same files in Python. Reports the ratio to the floor and the 100k/10k time ratio
(linearity). The memsync side is the work `memsync validate PATH` does, in-process.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from memsync.roots.disktree import disk_tree_view
from memsync.validators.gate import validate_tree
from memsync.validators.policy import SyncPolicy
from memsync.validators.rightmemory import default_graph_validator

GROUPS_PER_FILE = 10
NODES_PER_GROUP = 9
ITEMS_PER_FILE = GROUPS_PER_FILE * (1 + NODES_PER_GROUP)


def make_root(path: Path, items: int) -> int:
    """A valid root: MEMORY.md with F# topics, each detail file holding 100 items with edges."""
    path.mkdir(parents=True)
    files = max(1, items // ITEMS_PER_FILE)
    memory = ["# User Context", ""]
    for f in range(files):
        if f % 50 == 0:
            memory += [f"# Area {f // 50} {{#area-{f // 50}}}", ""]
        memory += [f"## Topic {f} {{F#topic-{f}}}", "", f"Notes about topic {f}.", ""]
        detail: list[str] = []
        for g in range(GROUPS_PER_FILE):
            group = f"g-{f}-{g}"
            detail += [f"## Group {g} {{#{group}}} → [dep:area-{f // 50}]", ""]
            for n in range(NODES_PER_GROUP):
                node = f"n-{f}-{g}-{n}"
                target = f"n-{f}-{g}-{(n + 1) % NODES_PER_GROUP}"
                other = f"g-{f}-{(g + 1) % GROUPS_PER_FILE}"
                detail.append(
                    f"- `{node}` remembered fact {n} about group {g} of topic {f} "
                    f"→ [dep:{target}, ext:{other}]"
                )
            detail.append("")
        (path / f"MEMORY_topic-{f}.md").write_text("\n".join(detail), encoding="utf-8")
    (path / "MEMORY.md").write_text("\n".join(memory) + "\n", encoding="utf-8")
    (path / "PURSUITS.md").write_text("# Pursuits\n\n## Focus\n", encoding="utf-8")
    return files * ITEMS_PER_FILE


def floor(path: Path) -> None:
    for dirpath, _dirs, names in os.walk(path):
        for name in names:
            (Path(dirpath) / name).read_bytes().decode("utf-8")


def ours(path: Path) -> Any:
    report = validate_tree(disk_tree_view(path), SyncPolicy(), default_graph_validator())
    if not report.ok:
        raise RuntimeError(f"synthetic root invalid: {report.problems[:3]}")
    return report


def _median_ms(fn: Any, path: Path, runs: int) -> float:
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        fn(path)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def run() -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    by_size: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="memsync-b1-") as tmp:
        for items in (1_000, 10_000, 100_000):
            root = Path(tmp) / f"root-{items}"
            made = make_root(root, items)
            runs = 3 if items >= 100_000 else 7
            ours(root)  # warm the page cache for both sides
            mine = _median_ms(ours, root, runs)
            raw = _median_ms(floor, root, runs)
            by_size[items] = mine
            rows.append(
                {
                    "name": f"B1 validate {made} items (vs read+decode)",
                    "memsync_ms": mine,
                    "raw_ms": raw,
                    "ratio": mine / raw,
                    "target": "<= 3x",
                    "runs": runs,
                    "items": made,
                }
            )
    rows.append(
        {
            "name": "B1 linearity: 100k / 10k items",
            "memsync_ms": by_size[100_000],
            "raw_ms": by_size[10_000],
            "ratio": by_size[100_000] / by_size[10_000],
            "target": "<= 12",
            "runs": 3,
        }
    )
    rows.append(
        {
            "name": "B1 10k items absolute (target < 500 ms)",
            "memsync_ms": by_size[10_000],
            "raw_ms": 500.0,
            "ratio": by_size[10_000] / 500.0,
            "target": "<= 1",
        }
    )
    return rows
