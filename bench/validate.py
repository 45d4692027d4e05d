"""B1 (design/BENCHMARKS.md): validating synthetic RightMemory roots of 1k, 10k, 100k items.

Compared with the floor measured in the same run: listing, reading and UTF-8-decoding the
same files in Python. Reports the ratio to the floor and the 100k/10k time ratio
(linearity). The memsync side is the work `memsync validate PATH` does, in-process, with a
cold parse cache (a new one per run).

Warm rows: a 100k-item root in Git, validated once to fill the parse cache, then one file
changed and committed; the validator (graph and auxiliary files, as the gate runs it) on
the new commit's tree, against reading and decoding that one file. The tree listing
(`git ls-tree`, B3's business) is taken before the clock starts. The cross-file pass is
incremental there (the parse cache keeps the previous tree's lineage); the row records how
many runs took that step. Memory rows run in a child
process: the peak RSS of validating a 200k-item root, and the bytes the in-memory parse
cache holds for it (tracemalloc).
"""

from __future__ import annotations

import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

from memsync.roots.disktree import disk_tree_view
from memsync.transports.git import Git
from memsync.validators.cache import ParseCache
from memsync.validators.gate import validate_tree
from memsync.validators.policy import SyncPolicy
from memsync.validators.rightmemory import default_graph_validator
from tests.kit import git

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
    graph = default_graph_validator(cache=ParseCache())  # cold: nothing parsed before
    report = validate_tree(disk_tree_view(path), SyncPolicy(), graph)
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


def warm_rows(tmp: Path, runs: int = 7) -> list[dict[str, Any]]:
    """One changed file of a 100k-item root, re-validated with a warm parse cache."""
    root = tmp / "warm"
    made = make_root(root, 100_000)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    box = Git(root)
    cache = ParseCache()
    graph = default_graph_validator(cache=cache)
    graph.validate(box.tree_view("HEAD"))  # fill the cache
    mine, gate, raw = [], [], []
    for run in range(runs):
        changed = root / f"MEMORY_topic-{run * 37 % 100}.md"
        with changed.open("a", encoding="utf-8") as out:
            out.write(f"\n- `edit-{run}` a fact learned in run {run} → [dep:area-0]\n")
        git(root, "commit", "-q", "-a", "-m", f"edit {run}")
        tree = box.tree_view("HEAD")
        started = time.perf_counter()
        report = graph.validate(tree)
        mine.append((time.perf_counter() - started) * 1000)
        if not report.ok:
            raise RuntimeError(f"edited root invalid: {report.problems[:3]}")
        tree = box.tree_view("HEAD")
        started = time.perf_counter()
        validate_tree(tree, SyncPolicy(), graph, content_paths=[changed.name])
        gate.append((time.perf_counter() - started) * 1000)
        started = time.perf_counter()
        changed.read_bytes().decode("utf-8")
        raw.append((time.perf_counter() - started) * 1000)
    ms, floor_ms = statistics.median(mine), statistics.median(raw)
    limit = min(50.0, 3 * floor_ms + 10.0)
    return [
        {
            "name": f"B1 warm: one changed file of {made} items (vs read+decode that file)",
            "memsync_ms": ms,
            "raw_ms": floor_ms,
            "ratio": ms / floor_ms,
            "target": f"<= 50 ms and <= 3x raw + 10 ms (= {limit:.1f} ms): {ms <= limit}",
            "runs": runs,
            "incremental_joins": cache.steps,  # runs joined from the kept lineage
            "full_joins": cache.joins,
        },
        {
            "name": f"B1 warm, whole gate (names, modes, that file's bytes, graph), {made} items",
            "memsync_ms": statistics.median(gate),
            "raw_ms": floor_ms,
            "ratio": statistics.median(gate) / floor_ms,
            "target": "info (the gate's tree checks are O(entries))",
            "runs": runs,
        },
    ]


def child(root: str) -> None:
    """In a child process: validate a root as `memsync validate` does; print the peak RSS
    and the parse cache's size as JSON."""
    cache = ParseCache()
    report = validate_tree(
        disk_tree_view(Path(root)), SyncPolicy(), default_graph_validator(cache=cache)
    )
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # The cache's own size, measured by building it again under tracemalloc.
    gc.collect()
    tracemalloc.start()
    cache = ParseCache()
    default_graph_validator(cache=cache).validate(disk_tree_view(Path(root)))
    gc.collect()
    held = tracemalloc.get_traced_memory()[0]
    cache.clear()
    gc.collect()
    cache_mib = (held - tracemalloc.get_traced_memory()[0]) / 2**20
    print(json.dumps({"rss_mib": rss, "cache_mib": cache_mib, "items": report.items}))


def memory_rows(tmp: Path) -> list[dict[str, Any]]:
    root = tmp / "big"
    made = make_root(root, 200_000)
    code = f"from bench.validate import child; child({str(root)!r})"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=Path(__file__).parent.parent,
    ).stdout
    got = json.loads(out)
    return [
        {
            "name": f"B1 peak RSS validating {made} items (MiB, vs 150 MiB)",
            "memsync_ms": got["rss_mib"],
            "raw_ms": 150.0,
            "ratio": got["rss_mib"] / 150.0,
            "target": "<= 1",
            "unit": "MiB",
        },
        {
            "name": f"B1 in-memory parse cache for {made} items (MiB, vs 60 MiB)",
            "memsync_ms": got["cache_mib"],
            "raw_ms": 60.0,
            "ratio": got["cache_mib"] / 60.0,
            "target": "<= 1",
            "unit": "MiB",
        },
    ]


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
                    "target": "<= 25x",
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
    with tempfile.TemporaryDirectory(prefix="memsync-b1-warm-") as tmp:
        rows += warm_rows(Path(tmp))
        rows += memory_rows(Path(tmp))
    return rows
