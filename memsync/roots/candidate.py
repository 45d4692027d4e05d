"""Candidate merges: the exact upstream commit merged into a worktree at the start commit.

The worktree lives under the state dir, never inside the root; the active root is not
touched. When the only conflicted path is the guidance inbox, it is merged by entry id
(the deterministic three-way rule) and committed to complete the merge.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.errors import require
from memsync.roots.faults import fault
from memsync.transports.commitsign import sign_head
from memsync.transports.git import Git
from memsync.transports.gitparse import last_line
from memsync.validators.inbox import InboxConflict, merge_inbox
from memsync.values import value

if TYPE_CHECKING:
    from memsync.transports.rootkeys import CommitKey

INBOX = "AGENT_GUIDANCE_INBOX.md"


@value
class MergeFailed:
    """The merge did not produce a candidate; `files` are the conflicted paths (if any)."""

    message: str
    files: tuple[str, ...]

    @property
    def conflicted(self) -> bool:
        return bool(self.files)


def merge_candidate(
    git: Git,
    path: Path,
    start: str,
    upstream: str,
    *,
    checkout: Callable[[Path, str], Git] | None = None,
    signing: CommitKey | None = None,
) -> str | MergeFailed:
    """A merge commit of `upstream` into `start`, made in a new worktree at `path`.

    `checkout` makes that worktree at `start` and returns its git box: by default a linked
    worktree of `git`; a repair role's merge is made in a repository of its own.
    `signing`: the root's key; the merge is signed and the worktree's HEAD moved to it.
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    if checkout is None:
        git.worktree_add(path, start)
        wt = git.at(path)
    else:
        wt = checkout(path, start)
    fault("after-staging")
    identity = git.identity_config()
    merged = wt.merge(upstream, f"memsync: merge upstream {upstream[:12]}", identity)
    if merged.ok:
        return sign_head(wt, signing)
    conflicted = tuple(wt.unmerged_paths())
    if conflicted == (INBOX,):
        try:
            _merge_inbox(wt, path, identity)
            return sign_head(wt, signing)
        except InboxConflict as exc:
            return MergeFailed(f"{exc.message}; the root is unchanged", conflicted)
    if conflicted:
        return MergeFailed(
            "incoming and local edits conflict; the root is unchanged. Merge "
            "the upstream by hand (git merge) and commit, then sync again",
            conflicted,
        )
    return MergeFailed(f"the merge failed: {last_line(merged.detail)}", ())


def replay_candidate(
    git: Git, path: Path, upstream: str, commits: list[str], signing: CommitKey | None = None
) -> str | MergeFailed:
    """`commits` (oldest first, no merges) replayed onto `upstream` in a new worktree
    (each replayed commit signed with `signing`, when the root has a key).

    What `--accept-rewrite` publishes: the rewritten upstream as it is, plus this root's
    own commits that never reached the old upstream. A commit whose change the upstream
    already holds is dropped; a conflict stops the replay (the root is not touched).
    """
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    git.worktree_add(path, upstream)
    fault("after-staging")
    wt = git.at(path)
    identity = git.identity_config()
    for commit in commits:
        picked = wt.cherry_pick(commit, identity)
        if picked.ok:
            sign_head(wt, signing)
            continue
        conflicted = tuple(wt.unmerged_paths())
        if conflicted:
            return MergeFailed(
                f"replaying local commit {commit[:12]} onto the rewritten upstream conflicts; "
                "the root is unchanged. Replay it by hand (git cherry-pick), then sync again",
                conflicted,
            )
        if not wt.status():  # nothing left to change: the upstream already has it
            wt.skip_cherry_pick()
            continue
        return MergeFailed(f"replaying {commit[:12]} failed: {last_line(picked.detail)}", ())
    return require(wt.rev_parse("HEAD"), "the candidate's HEAD")


def _merge_inbox(wt: Git, path: Path, identity: list[tuple[str, str]]) -> None:
    """The guidance inbox is the only conflict: merge it by entry id, deterministically."""
    sides = [wt.read_stage(INBOX, stage) for stage in (1, 2, 3)]
    merged = merge_inbox(*(None if s is None else s.decode("utf-8") for s in sides))
    (path / INBOX).write_text(merged, encoding="utf-8")
    wt.add([INBOX])
    wt.conclude_merge(identity)
