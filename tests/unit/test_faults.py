"""The fault registry lists every point the code can stop at, and nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import memsync
from memsync.roots.faults import CYCLE_POINTS, POINTS, SYNC_POINTS, VIEW_POINTS

CALL = re.compile(r"""\bfault\(\s*["']([^"']+)["']\s*\)""")


def test_every_fault_call_names_a_registered_point() -> None:
    package = Path(memsync.__file__).parent
    used = {
        point
        for source in package.rglob("*.py")
        for point in CALL.findall(source.read_text(encoding="utf-8"))
    }
    assert used == set(POINTS)
    assert len(POINTS) == len(set(POINTS))
    assert not set(SYNC_POINTS) & set(VIEW_POINTS)
    assert not set(CYCLE_POINTS) & (set(SYNC_POINTS) | set(VIEW_POINTS))
