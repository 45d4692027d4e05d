"""Start-of-cycle recovery: settle every unsettled journal record, then sweep leftovers.

A `running` record never touched the active root: its candidate is removed and the record
fails. A `prepared` record may have stopped anywhere inside publication; recovery works out
where from the branch, and finishes the publication through the live publication's own
fence and move (`publish.publish` with `Target.resumed`): what differs from the start on
the candidate's paths may only be the candidate's own bytes (memsync's half-written move).
If anything else is found (a local edit, a file in the way, a staged version, a moved
branch), it changes nothing, fails the record and says so: nothing of the person's is
lost, and the next cycle reports it (`dirty`, `local-file-in-the-way`) as a live
publication would, and succeeds once it is moved away.
Finally, candidate worktrees and refs that no unsettled record owns are removed.

The cycle keeps one invariant that makes this cheap: a candidate ref or worktree exists
only while its operation's record is unsettled (candidates are removed before a record
settles). So when no record is open and no worktree is left, there is nothing to do.
"""

from __future__ import annotations

from pathlib import Path

from memsync import lazylog
from memsync.roots import journal
from memsync.roots.layout import CANDIDATE_REFS, RootLayout, candidate_ref

TYPE_CHECKING = False  # `typing` loads after a cycle's first git processes start (issue 18)
if TYPE_CHECKING:  # `needed` is asked before every cycle's first git: it loads neither
    from memsync.transports.git import Git
    from memsync.validators.policy import SyncPolicy

log = lazylog.logger(__name__)


class Recovered:
    """An operation that start-of-cycle recovery settled, and how. A plain class: only a
    cycle that recovers makes one, and every cycle loads this module (issue 18)."""

    __slots__ = ("message", "operation_id", "outcome")

    def __init__(self, operation_id: str, outcome: str, message: str) -> None:
        self.operation_id = operation_id
        self.outcome = outcome  # committed | failed
        self.message = message


def needed(records: journal.Journal, layout: RootLayout, git_dir: Path | None = None) -> bool:
    """Whether anything is left to settle or sweep. With the root's `git_dir`, a loose
    candidate ref no record owns counts too (a `running` record is not fsynced: a power
    cut may lose it and keep the ref it had pinned)."""
    wt = layout.worktrees_dir
    if records.unsettled() or (wt.is_dir() and any(wt.iterdir())):
        return True
    if git_dir is None:
        return False
    try:
        return any((git_dir / CANDIDATE_REFS).iterdir())
    except OSError:
        return False


def recover(
    git: Git, records: journal.Journal, layout: RootLayout, policy: SyncPolicy
) -> list[Recovered]:
    done: list[Recovered] = []
    for op in records.unsettled():
        if op.phase == journal.RUNNING:
            remove_candidate(git, layout, op.id)
            message = (
                "interrupted before publication; the root was not touched"
                if op.kind != "push"
                else "interrupted; the next cycle checks the upstream"
            )
            records.advance(op, journal.FAILED, message=message)
            done.append(Recovered(op.id, journal.FAILED, message))
        else:
            outcome, message = _finish_prepared(git, op, policy)
            remove_candidate(git, layout, op.id)
            records.advance(op, outcome, message=message)
            done.append(Recovered(op.id, outcome, message))
    sweep(git, records, layout)
    for item in done:
        log.warning(
            "recovered operation %s: %s (%s)", item.operation_id, item.outcome, item.message
        )
    return done


def _finish_prepared(git: Git, op: journal.Operation, policy: SyncPolicy) -> tuple[str, str]:
    candidate = op.candidate
    if candidate is None:
        return journal.FAILED, "prepared record without a candidate"
    head = git.rev_parse(f"refs/heads/{op.branch}")
    if head == candidate or (
        head is not None and head != op.start and git.is_ancestor(candidate, head)
    ):
        return journal.COMMITTED, "publication had completed before an interruption"
    if head != op.start:
        return journal.FAILED, "the branch moved after an interrupted publication; nothing changed"
    if git.rev_parse(candidate) is None:  # a power cut can lose a loose object git wrote
        return journal.FAILED, "the prepared commit is gone (lost in a power cut?); nothing changed"
    if git.current_branch() != op.branch:
        return journal.FAILED, f"{op.branch} is no longer checked out; nothing changed"
    if git.rev_parse(candidate_ref(op.id)) != candidate:
        git.update_ref(candidate_ref(op.id), candidate, reason="memsync: recovery")
    from memsync.roots.publish import FenceBroken, Target, publish  # noqa: PLC0415 - a prepared record only

    try:
        publish(git, Target(op.branch, op.start, candidate, op.id, resumed=True), policy)
    except FenceBroken as fence:
        return journal.FAILED, (
            f"an interrupted publication was not finished: {fence.message}; nothing changed"
        )
    return journal.COMMITTED, "an interrupted publication was completed"


def remove_candidate(git: Git, layout: RootLayout, operation_id: str, *, ref: bool = True) -> None:
    """Remove an operation's candidate worktree and (unless already gone) its ref."""
    path = layout.worktree(operation_id)
    if path.exists():
        import shutil  # noqa: PLC0415 - bz2, lzma: only when there is a worktree to remove

        git.worktree_remove(path)
        shutil.rmtree(path, ignore_errors=True)
        git.worktree_prune()
    if ref:
        git.delete_ref(candidate_ref(operation_id))


def sweep(git: Git, records: journal.Journal, layout: RootLayout) -> None:
    """Remove candidate worktrees and refs that no unsettled record owns."""
    owned = {op.id for op in records.unsettled()}
    if layout.worktrees_dir.is_dir():
        for path in layout.worktrees_dir.iterdir():
            if path.name not in owned:
                import shutil  # noqa: PLC0415 - only when there is a worktree to remove

                git.worktree_remove(path)
                shutil.rmtree(path, ignore_errors=True)
    git.worktree_prune()
    for ref in git.refs(CANDIDATE_REFS.rstrip("/")):
        if ref.removeprefix(CANDIDATE_REFS) not in owned:
            git.delete_ref(ref)
