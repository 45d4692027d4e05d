"""When a maintenance cycle is due: insight pressure (points per memory-touching commit,
claimed at a threshold) and the prune generation (memory-touching commits since the last
`prune:` commit). Reference: rightmemory-graph-and-cycles.md §3.2 and §4.2.

The pressure state lives in `<state_dir>/roots/<root>/insight.json`, written atomically:
points, the head it last counted from (so each commit counts once, whatever triggers the
count), the active claim (kept across a crash: the same operation resumes), and the last
result. Corrupt state restarts at zero points and says so; it never blocks a root.
"""

from __future__ import annotations

import logging
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from memsync import timefmt
from memsync.atomicfile import read_json, write_json
from memsync.transports.git import Git

log = logging.getLogger(__name__)

MEMORY_PATHS = ("MEMORY.md", "MEMORY_*.md")


@dataclass(frozen=True)
class Pressure:
    points: int = 0
    counted_head: str | None = None  # commits up to here have been counted
    active_operation: str | None = None
    active_points: int = 0
    last_result: str | None = None  # artifact | noop | failed
    last_run_at: str | None = None
    history: tuple[str, ...] = field(default=())  # recent results, newest last

    @classmethod
    def load(cls, path: Path) -> Pressure:
        raw = read_json(path)
        if raw is None:
            return cls()
        try:
            return cls(
                points=int(raw.get("points", 0)),
                counted_head=raw.get("counted_head"),
                active_operation=raw.get("active_operation"),
                active_points=int(raw.get("active_points", 0)),
                last_result=raw.get("last_result"),
                last_run_at=raw.get("last_run_at"),
                history=tuple(str(x) for x in raw.get("history") or ()),
            )
        except (AttributeError, TypeError, ValueError):
            log.warning("insight pressure at %s was unreadable; it restarts at 0", path)
            return cls()

    def save(self, path: Path) -> None:
        data = asdict(self)
        data["history"] = list(self.history[-20:])
        write_json(path, data)

    def counted(self, head: str, new_commits: int, points_per_commit: int) -> Pressure:
        """`new_commits` memory-touching commits up to `head` were not counted before."""
        return replace(
            self, points=self.points + new_commits * points_per_commit, counted_head=head
        )

    def claim(self, threshold: int, *, force: bool = False) -> tuple[Pressure, str | None]:
        """The operation to run (a resumed one first), or None when pressure is below."""
        if self.active_operation is not None:
            return self, self.active_operation
        if self.points < threshold and not force:
            return self, None
        op = f"insight-{uuid.uuid4().hex[:16]}"
        return replace(self, active_operation=op, active_points=min(self.points, threshold)), op

    def completed(self, result: str) -> Pressure:
        """An artifact or a no-op consumes the claimed points; a failure keeps them."""
        stamp = timefmt.rfc3339(timefmt.now())
        kept = self.points if result == "failed" else max(0, self.points - self.active_points)
        return replace(
            self,
            points=kept,
            active_operation=None if result != "failed" else self.active_operation,
            active_points=0 if result != "failed" else self.active_points,
            last_result=result,
            last_run_at=stamp,
            history=(*self.history, f"{stamp} {result}"),
        )


@dataclass(frozen=True)
class PruneState:
    """What `status` shows of pruning, in `<state_dir>/roots/<root>/prune.json`: the
    generation count at the last check (memory commits since the boundary) and the last
    turn's result. Only a record: prune_due recounts from git every time."""

    commits: int | None = None
    boundary: str | None = None
    last_result: str | None = None  # artifact | noop | failed
    last_run_at: str | None = None

    @classmethod
    def load(cls, path: Path) -> PruneState:
        raw = read_json(path)
        if not isinstance(raw, dict):
            return cls()
        commits, boundary = raw.get("commits"), raw.get("boundary")
        result, at = raw.get("last_result"), raw.get("last_run_at")
        return cls(
            commits=commits if type(commits) is int and commits >= 0 else None,
            boundary=boundary if isinstance(boundary, str) else None,
            last_result=result if isinstance(result, str) else None,
            last_run_at=at if isinstance(at, str) else None,
        )

    def save(self, path: Path) -> None:
        write_json(path, asdict(self))

    def counted(self, due: PruneDue) -> PruneState:
        return replace(self, commits=due.count, boundary=due.boundary)

    def completed(self, result: str) -> PruneState:
        """A landed prune starts a new generation: its count restarts at 0."""
        stamp = timefmt.rfc3339(timefmt.now())
        commits = 0 if result == "artifact" else self.commits
        return replace(self, commits=commits, last_result=result, last_run_at=stamp)


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
