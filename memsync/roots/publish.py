"""The publisher: the only code that moves a root's branch.

A fenced fast-forward. Publication proceeds only while the branch is checked out and
still at the start commit, no merge is in progress, the work tree is clean, and the
candidate ref still names the validated candidate. It then moves index and work tree from
start to candidate (only the changed files: O(diff)), and finally moves the branch with a
compare-and-swap on its old value, dropping the candidate ref in the same transaction.
Sync, cycles and autocommit all publish through `publish`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from memsync.roots.faults import fault
from memsync.roots.layout import candidate_ref
from memsync.transports.git import Git, StatusEntry
from memsync.validators.paths import check_name
from memsync.validators.policy import SyncPolicy


class FenceBroken(Exception):
    """The active root changed under us; nothing was published. `status` says how to report."""

    def __init__(self, status: str, message: str, files: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.files = files


@dataclass(frozen=True)
class Target:
    branch: str
    start: str
    candidate: str
    operation_id: str


def blocking_changes(entries: Iterable[StatusEntry], policy: SyncPolicy) -> tuple[str, ...]:
    """Local edits that block publication: tracked changes and synchronized untracked files."""
    paths = {e.path for e in entries if not e.untracked or check_name(e.path, policy) is None}
    return tuple(sorted(paths))


def check_fence(git: Git, target: Target, policy: SyncPolicy) -> None:
    """Raise FenceBroken unless the active root is exactly as the candidate expects."""
    state = git.work_state()
    if state.branch != target.branch:
        raise FenceBroken("error", f"HEAD is no longer on branch {target.branch}")
    if state.head != target.start:
        raise FenceBroken(
            "error",
            f"the branch moved during the cycle (now {str(state.head)[:12]}, "
            f"expected {target.start[:12]})",
        )
    unmerged = tuple(sorted(e.path for e in state.entries if e.unmerged))
    if unmerged or git.merge_in_progress():
        raise FenceBroken("conflict", "a merge is in progress in the root", unmerged)
    dirty = blocking_changes(state.entries, policy)
    if dirty:
        raise FenceBroken("dirty", "uncommitted edits to synchronized files appeared", dirty)
    if git.rev_parse(candidate_ref(target.operation_id)) != target.candidate:
        raise FenceBroken("error", "the validated candidate is missing or moved")


def publish(git: Git, target: Target, policy: SyncPolicy) -> None:
    """Move the root from `target.start` to `target.candidate`, or raise FenceBroken."""
    check_fence(git, target, policy)
    git.read_tree_update(target.start, target.candidate)
    fault("after-worktree-update")
    move_branch(git, target)


def move_branch(git: Git, target: Target) -> None:
    """The last step: the branch moves only if it still points at the start commit."""
    git.move_refs(
        [(f"refs/heads/{target.branch}", target.candidate, target.start)],
        [candidate_ref(target.operation_id)],
        reason=f"memsync: publish {target.operation_id}",
    )
    fault("after-ref-update")
