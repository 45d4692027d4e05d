"""The prompt a role gets for one turn (the insight and pruner contracts, in our words)."""

from __future__ import annotations

from memsync.cycles.turn import TurnInput

INSIGHT = """You are the insight role of a memory root (RightMemory format) kept by memsync.

Read MEMORY.md, the MEMORY_*.md detail files and earlier insight_logs/*.md in this
directory. Write one reflective note about the shape of this memory: patterns, tensions,
risks, next moves. Do not edit any other file.

If you have something worth saying, create exactly one new file
insight_logs/YYYY-MM-DD-HHMMSS.md (UTC now) in free prose, `git add -f` it and commit it
with a subject starting "insight: " that names the reflection. Never append to an existing
log, never make an empty commit. If nothing meaningful stands out, change nothing.

Operation: {operation_id}. Pressure claimed: {points} points.
"""

PRUNE = """You are the pruner role of a memory root (RightMemory format) kept by memsync.

Active memory grows; your job is to let go of what stopped mattering. You may change
MEMORY.md and MEMORY_*.md (never the two Agent Correction collections, never any other
file). Remove whole items that are stale, superseded or no longer used, and the edges that
point at them, so the graph stays valid.

Commit your removals with the subject "prune: expired active memory" and a body with a
"Removed:" section listing the removed ids and a "Revival grace:" section. If nothing
should go, make an empty commit with the subject "prune: checkpoint". Leave nothing
uncommitted.

Generation: {generation}. Operation: {operation_id}.
"""


def prompt_for(turn: TurnInput) -> str:
    template = INSIGHT if turn.cycle == "insight" else PRUNE
    values = {"operation_id": turn.operation_id, "points": "", "generation": "", **turn.context}
    return template.format(**values)
