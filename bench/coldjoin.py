"""A fresh process pays for what changed (issue 18, item 3): 100k items against 1k items.

A timer unit, a cron job or a person running `memsync sync-now` (no daemon) or `memsync
validate` starts a new process each time. Each row times whole processes (wall clock,
median of RUNS, interleaved) admitting or checking a one-file change of a synthetic
RightMemory root (`bench.validate.make_root`: MEMORY.md with F# topics, a detail file per
100 items) of 100k items against the same work on a 1k-item root, in one run:

- `memsync sync-now` admitting one incoming commit that changes one detail file;
- `memsync validate PATH` of the work tree after one detail file changed on disk.

Target: the 100k-item process costs <= 1.5x the 1k-item one. Before the lineage records
(`validators/lineagestore.py`), a fresh process parsed (sync-now) or reloaded (validate)
every graph file's summary and joined them all. With MEMSYNC_PEER_BASELINE (a directory
holding another tree's `memsync` package) the same rows run that code too, interleaved.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.startup import memsync_command
from bench.sync import ENV, git
from bench.validate import make_root

RUNS = int(os.environ.get("MEMSYNC_BENCH_RUNS", "7"))
WARMUP = 2
SIZES = (1_000, int(os.environ.get("MEMSYNC_COLD_ITEMS", "100000")))
BASELINE = os.environ.get("MEMSYNC_PEER_BASELINE", "")
TARGET = 1.5


def _run(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall-clock and CPU (user + system, the process and its git children) milliseconds:
    CPU time is what a loaded machine inflates least."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    took = (time.perf_counter() - started) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{argv} exited {done.returncode}: {done.stderr.decode()[-800:]}")
    cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000
    return took, cpu


def _root(base: Path, items: int) -> Path:
    """A bare upstream of a synthetic root and a writer clone."""
    source = base / "source"
    make_root(source, items)
    git(source, "init", "-q", "-b", "main")
    git(source, "add", "-A")
    git(source, "commit", "-q", "-m", "base")
    git(base, "clone", "-q", "--bare", str(source), str(base / "team.git"))
    git(base, "clone", "-q", str(base / "team.git"), str(base / "writer"))
    return base / "team.git"


class _Case:
    """One variant (this checkout or the baseline) on one root size."""

    def __init__(self, base: Path, upstream: Path, cli: list[str], env: dict[str, str]) -> None:
        base.mkdir()
        self.root = base / "root"
        git(base, "clone", "-q", str(upstream), str(self.root))
        config = base / "config.yaml"
        config.write_text(
            "version: 1\n"
            f"state_dir: {base / 'state'}\n"
            f"control: {{socket: {base / 'run' / 'memsync.sock'}}}\n"
            f"roots:\n  bench:\n    path: {self.root}\n    watch: false\n"
        )
        self.cwd = base
        self.env = {**env, "XDG_STATE_HOME": str(base / "xdg")}
        self.sync = [*cli, "--config", str(config), "sync-now"]
        self.validate = [*cli, "validate", str(self.root)]


def run() -> list[dict[str, Any]]:
    env = {k: v for k, v in ENV.items() if k != "PYTHONDONTWRITEBYTECODE"}
    variants = {"": (memsync_command(), env)}
    if BASELINE:
        variants[" (baseline)"] = (
            [sys.executable, "-m", "memsync"],
            {**env, "PYTHONPATH": BASELINE},
        )
    times: dict[tuple[str, str, int], list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="memsync-coldjoin-") as tmp:
        base = Path(tmp)
        cases: dict[tuple[str, int], _Case] = {}
        writers: dict[int, Path] = {}
        for items in SIZES:
            (base / str(items)).mkdir()
            upstream = _root(base / str(items), items)
            writers[items] = base / str(items) / "writer"
            for n, (label, (cli, cli_env)) in enumerate(variants.items()):
                case = _Case(base / str(items) / f"v{n}", upstream, cli, cli_env)
                _run(case.sync, case.env, case.cwd)  # the first cycle: a full pass, a record
                _run(case.validate, case.env, case.cwd)
                cases[(label, items)] = case
        for i in range(WARMUP + RUNS):
            for items in SIZES:
                writer = writers[items]
                with (writer / "MEMORY_topic-3.md").open("a", encoding="utf-8") as out:
                    out.write(f"\n- `edit-{i}` a fact learned in run {i} → [dep:area-0]\n")
                git(writer, "commit", "-qam", f"edit {i}")
                git(writer, "push", "-q", "origin", "main")
                for label in variants:
                    case = cases[(label, items)]
                    took = _run(case.sync, case.env, case.cwd)
                    # The work tree (now at the new commit) changes one file on disk.
                    with (case.root / "MEMORY_topic-5.md").open("a", encoding="utf-8") as out:
                        out.write(f"\n- `local-{i}` noted here → [dep:area-0]\n")
                    checked = _run(case.validate, case.env, case.cwd)
                    git(case.root, "checkout", "-q", "--", "MEMORY_topic-5.md")
                    if i >= WARMUP:
                        times.setdefault(("sync", label, items), []).append(took)
                        times.setdefault(("validate", label, items), []).append(checked)
    rows = []
    small, big = SIZES
    what = {
        "sync": "sync-now, one incoming one-file commit",
        "validate": "validate PATH, one file changed on disk",
    }
    for kind, text in what.items():
        for label in variants:
            m = statistics.median(wall for wall, _ in times[(kind, label, big)])
            r = statistics.median(wall for wall, _ in times[(kind, label, small)])
            m_cpu = statistics.median(cpu for _, cpu in times[(kind, label, big)])
            r_cpu = statistics.median(cpu for _, cpu in times[(kind, label, small)])
            rows.append(
                {
                    "name": f"cold: {text}, {big // 1000}k items (vs {small // 1000}k){label}",
                    "memsync_ms": m,
                    "raw_ms": r,
                    "ratio": m / r,
                    "target": f"<= {TARGET:g}x (CPU {m_cpu:.0f} vs {r_cpu:.0f} ms: "
                    f"{m_cpu / r_cpu:.2f}x)",
                    "runs": RUNS,
                    "cpu_ms": m_cpu,
                    "raw_cpu_ms": r_cpu,
                }
            )
    return rows


if __name__ == "__main__":
    for r in run():
        print(
            f"{r['name']:<78} {r['memsync_ms']:7.1f} ms vs {r['raw_ms']:6.1f} ms  "
            f"ratio {r['ratio']:5.2f}  {r['target']}"
        )
