"""Where the suite's CPU goes, test by test: a pytest plugin and its summary.

    PYTHONDONTWRITEBYTECODE= MEMSYNC_HYPOTHESIS=ci MEMSYNC_CPUPROF=/tmp/cpu \\
        .venv/bin/pytest -n 3 --dist worksteal -q -p tests.cpuprof
    .venv/bin/python -m tests.cpuprof /tmp/cpu          # by file, then the costliest tests

Each test (set-up, call and tear-down) is written as one JSON line to `$MEMSYNC_CPUPROF.<worker>`:
its wall time, the CPU of the test process itself (`self`) and of the processes it started
and reaped meanwhile (`kids`: memsync commands and daemons, git, servers; a process reaped by
a later test counts there). Session fixtures count in the first test that asks for them.
Without MEMSYNC_CPUPROF the plugin records nothing.
"""

from __future__ import annotations

import collections
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

_OUT: list[IO[str]] = []


def _out() -> IO[str] | None:
    base = os.environ.get("MEMSYNC_CPUPROF")
    if not base:
        return None
    if not _OUT:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _OUT.append(open(f"{base}.{worker}", "a", buffering=1, encoding="utf-8"))  # noqa: SIM115
    return _OUT[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    out = _out()
    before, started = os.times(), time.monotonic()
    yield
    if out is None:
        return
    after = os.times()
    record = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "wall": round(time.monotonic() - started, 4),
        "self": round(after.user - before.user + after.system - before.system, 4),
        "kids": round(
            after.children_user
            - before.children_user
            + after.children_system
            - before.children_system,
            4,
        ),
    }
    out.write(json.dumps(record) + "\n")


def summary(base: str, top: int = 40) -> str:
    """The records of `base.*`: totals, then by file and the costliest tests."""
    records: list[dict[str, Any]] = []
    for path in sorted(Path(base).parent.glob(Path(base).name + ".*")):
        records += [json.loads(line) for line in path.read_text().splitlines() if line]
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for r in records:
        row = files[r["test"].split("::")[0]]
        row[0] += r["self"]
        row[1] += r["kids"]
        row[2] += r["wall"]
        row[3] += 1
    cpu = sum(r["self"] + r["kids"] for r in records)
    lines = [
        f"{len(records)} tests: {cpu:.1f} s CPU "
        f"({sum(r['self'] for r in records):.1f} in the test processes, "
        f"{sum(r['kids'] for r in records):.1f} in what they started)",
        "",
        f"{'cpu':>7} {'self':>6} {'kids':>6} {'wall':>7} {'tests':>5}  file",
    ]
    for name, (own, kids, wall, n) in sorted(files.items(), key=lambda f: -f[1][0] - f[1][1])[:top]:
        lines.append(f"{own + kids:7.1f} {own:6.1f} {kids:6.1f} {wall:7.1f} {n:5d}  {name}")
    lines += ["", f"{'cpu':>7} {'wall':>7}  test"]
    for r in sorted(records, key=lambda r: -r["self"] - r["kids"])[:top]:
        lines.append(f"{r['self'] + r['kids']:7.2f} {r['wall']:7.2f}  {r['test']}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.cpuprof BASE  (the MEMSYNC_CPUPROF of the run)")
    print(summary(sys.argv[1]))
