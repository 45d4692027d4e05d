"""What a root's maintenance cycles record between runs, and `status` shows: the insight
pressure (`<state_dir>/roots/<root>/insight.json`) and the prune generation
(`<state_dir>/roots/<root>/prune.json`). Records only: when a cycle is due is decided in
`pressure` (which counts commits through the git box); a cold `memsync status` reads these
without loading it.

The pressure record holds the points, the head it last counted from (so each commit counts
once, whatever triggers the count), the active claim (kept across a crash: the same
operation resumes), and the last result. Corrupt state restarts at zero points and says so;
it never blocks a root.
"""

from __future__ import annotations

from pathlib import Path

from memsync import lazylog, timefmt
from memsync.atomicfile import read_json, write_json
from memsync.values import as_dict, field, replace, value

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from memsync.cycles.pressure import PruneDue

log = lazylog.logger("memsync.cycles.pressure")  # the name its warnings always had


@value
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
        data = as_dict(self)
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
        import uuid  # noqa: PLC0415 - uuid imports platform: only a claim needs it

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


@value
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
        write_json(path, as_dict(self))

    def counted(self, due: PruneDue) -> PruneState:
        return replace(self, commits=due.count, boundary=due.boundary)

    def completed(self, result: str) -> PruneState:
        """A landed prune starts a new generation: its count restarts at 0."""
        stamp = timefmt.rfc3339(timefmt.now())
        commits = 0 if result == "artifact" else self.commits
        return replace(self, commits=commits, last_result=result, last_run_at=stamp)
