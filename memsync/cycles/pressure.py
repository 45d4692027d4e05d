"""When a maintenance cycle is due: insight pressure (points per memory-touching commit,
claimed at a threshold) and the prune generation (memory-touching commits since the last
`prune:` commit). Reference: rightmemory-graph-and-cycles.md §3.2 and §4.2.

The records themselves (`Pressure` in `<state_dir>/roots/<root>/insight.json`, `PruneState`
in `prune.json`) are `records`': `status` reads them without this module's git box.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.cycles.records import Pressure

if TYPE_CHECKING:
    from memsync.transports.git import Git

MEMORY_PATHS = ("MEMORY.md", "MEMORY_*.md")


def memory_commits(git: Git, head: str, since: str | None) -> int:
    """Memory-touching commits reachable from `head` and not from `since`."""
    return git.count_touching(head, since, MEMORY_PATHS)


def count_new(git: Git, path: Path, head: str, points_per_commit: int) -> Pressure:
    """Add points for memory-touching commits between the last counted head and `head`.

    The first count only sets the mark: history from before memsync watched the root does
    not raise pressure at once.
    """
    state = Pressure.load(path)
    if state.counted_head == head:
        return state
    if state.counted_head is None or not git.is_ancestor(state.counted_head, head):
        fresh = replace(state, counted_head=head)
    else:
        fresh = state.counted(
            head, memory_commits(git, head, state.counted_head), points_per_commit
        )
    fresh.save(path)
    return fresh


@dataclass(frozen=True)
class PruneDue:
    due: bool
    count: int
    generation_commits: int
    boundary: str | None  # the latest `prune:` commit, or the generation's first commit
    reason: str


def prune_due(git: Git, head: str, generation_commits: int) -> PruneDue:
    """Reference §3.2: count memory-touching commits since the latest `prune:` subject."""
    latest = next(
        (oid for oid, subject in git.subjects(head) if subject.startswith("prune:")), None
    )
    count = memory_commits(git, head, latest)
    if latest is not None:
        reason = f"{count}/{generation_commits} commits since the latest prune {latest[:12]}"
        return PruneDue(count >= generation_commits, count, generation_commits, latest, reason)
    reason = f"{count}/{generation_commits} commits in the root's history"
    return PruneDue(
        count >= generation_commits,
        min(count, generation_commits),
        generation_commits,
        None,
        reason,
    )
