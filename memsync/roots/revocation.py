"""Revocation: one commit that removes the items a leaked key introduced, through the gate.

    root lock -> recovery -> clean work tree? -> journal record (kind `revert`) ->
    candidate worktree at HEAD -> the graph editor removes the items (their subtrees,
    backing files, and every edge and Focus reference naming them) -> one commit with a
    `Removed:` ledger and a `Memsync-Operation:` trailer -> (signed, when memsync has a
    key) -> the full gate -> prepared -> fenced publish

The commit starts from the HEAD the list was made at: if the root moved since, the fence
refuses and nothing lands (run the listing again). The push follows with the next sync,
like every local commit. Nothing is removed but what the editor derives from the ids.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.config.model import RootSettings
from memsync.roots import journal, recovery
from memsync.roots.admit import Admission, Admitter, Published
from memsync.roots.checks import Checks
from memsync.roots.edits import blocking_changes
from memsync.roots.layout import RootLayout
from memsync.roots.lock import RootLock
from memsync.roots.provenance import TRAILER, OpenRoot, SignerItems, signed_items
from memsync.roots.refused import Fenced, Invalid, NoChange
from memsync.transports.commitsign import sign_commit
from memsync.transports.git import Git
from memsync.validators.assembly import build_graph
from memsync.validators.editor import remove_items
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem
from memsync.values import field, value

if TYPE_CHECKING:  # pydantic loads for the command's output only
    from memsync.wire.provenance import RevertModel

KIND = "revert"
LANDED, REFUSED, FAILED, NOOP = "landed", "refused", "failed", "noop"

# Signs a commit memsync made: (the root's git box, the commit) -> the signed commit's id.
CommitSigner = Callable[[Git, str], str]


def commit_signer(root: RootSettings) -> CommitSigner | None:
    """How memsync signs the commits it makes for `root` (`roots.<name>.signing.key`, in
    process: `transports/commitsign.py`); None: it has no key and a commit stays as made.
    The revert commit passes through it before the gate sees it."""
    key = root.signing
    if key is None:
        return None

    def sign(git: Git, oid: str) -> str:
        return sign_commit(git, oid, key)

    return sign


@value
class Reverted:
    status: str  # landed | refused | failed | noop
    message: str
    operation_id: str | None = None
    commit: str | None = None
    files: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()  # every id the commit removes (subtrees included)
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    def model(self) -> RevertModel:
        """The outcome as `memsync provenance --revert --json` prints it."""
        from memsync.wire.cli import ProblemModel  # noqa: PLC0415 - pydantic
        from memsync.wire.provenance import RevertModel  # noqa: PLC0415

        return RevertModel(
            status=self.status,
            message=self.message,
            operation_id=self.operation_id,
            commit=self.commit,
            files=list(self.files),
            removed=list(self.removed),
            problems=[ProblemModel.of(p) for p in self.problems],
        )


def revert_items(
    root: RootSettings,
    state_dir: Path,
    start: str,
    ids: Collection[str],
    reason: str,
    *,
    wait: float | None = 60.0,
) -> Reverted:
    """Remove `ids` (items at `start`, the root's HEAD when they were listed) in one commit
    admitted like every memsync write. `reason` is the commit's subject after `revert: `."""
    if not ids:
        return Reverted(NOOP, "nothing to remove")
    layout = RootLayout.for_root(state_dir, root.name)
    with RootLock(layout.lock_file, wait=wait, label=f"root {root.name}"):
        return _Revert(root, layout, commit_signer(root)).run(start, sorted(ids), reason)


class _Revert:
    def __init__(self, root: RootSettings, layout: RootLayout, sign: CommitSigner | None) -> None:
        self.root, self.layout, self.sign = root, layout, sign
        self.git = Git(root.path, timeout=root.timeout.total_seconds())
        self.policy = SyncPolicy(max_file_size=root.max_file_size)
        self.records = journal.Journal(layout.journal_dir)
        self.removed: tuple[str, ...] = ()

    def run(self, start: str, ids: list[str], reason: str) -> Reverted:
        git = self.git
        if recovery.needed(self.records, self.layout):
            recovery.recover(git, self.records, self.layout, self.policy)
        state = git.work_state()
        if state.head is None or state.branch is None:
            return Reverted(FAILED, "the root has no checked-out branch with commits")
        if state.head != start:
            return Reverted(
                FAILED,
                f"the root moved since the list was made ({start[:12]} is no longer "
                "HEAD); list the items again",
            )
        blocking = blocking_changes(state.entries, self.policy)
        if blocking:
            return Reverted(
                FAILED,
                f"the root has uncommitted edits ({', '.join(blocking[:3])}); sync them first",
            )
        key = journal.operation_key(KIND, start, None, *ids)
        outcome = Admitter(git, self.records, self.layout, self.policy).admit(
            Admission(KIND, state.branch, start, key=key),
            lambda op, worktree: self._stage(op, worktree, start, ids, reason),
            Checks(),  # a person's revert: no role's grants
        )
        if isinstance(outcome, Published):
            return Reverted(
                LANDED,
                f"removed {len(self.removed)} item(s) in {outcome.candidate[:12]}; "
                "the next sync pushes it",
                outcome.operation_id,
                outcome.candidate,
                outcome.files,
                self.removed,
            )
        if isinstance(outcome, Invalid):
            codes = ", ".join(sorted({p.code for p in outcome.report.problems}))
            return Reverted(
                REFUSED,
                f"the removal was refused by the gate ({codes}); the root is unchanged",
                outcome.operation_id,
                outcome.candidate,
                outcome.files,
                self.removed,
                outcome.report.problems,
            )
        if isinstance(outcome, NoChange):
            return Reverted(NOOP, "nothing to remove", outcome.operation_id)
        if isinstance(outcome, Fenced):
            return Reverted(
                FAILED, f"nothing landed: {outcome.fence.message}", outcome.operation_id
            )
        return Reverted(FAILED, f"nothing landed: {type(outcome).__name__}")

    def _stage(
        self, op: journal.Operation, worktree: Path, start: str, ids: list[str], reason: str
    ) -> str | None:
        git = self.git
        before = git.tree_view(start)
        changes = remove_items(before, ids)
        if not changes:
            return None
        worktree.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        git.worktree_add(worktree, start)
        box = git.at(worktree)
        for path, data in changes.items():
            target = worktree / path
            if data is None:
                target.unlink(missing_ok=True)
            else:
                target.write_bytes(data)
        box.add(list(changes), every=True)
        tree = box.write_tree()
        graph_before, _ = build_graph(before)
        graph_after, _ = build_graph(git.tree_view(tree))
        self.removed = tuple(sorted(set(graph_before.items) - set(graph_after.items)))
        message = _message(reason, ids, self.removed, op.id)
        made = box.commit_tree(tree, [start], message, git.identity_config())
        return self.sign(box, made) if self.sign is not None else made


def _message(reason: str, ids: list[str], removed: tuple[str, ...], operation_id: str) -> str:
    asked = set(ids)
    lines = [f"revert: {reason}", "", "Removed:"]
    lines += [f"- `{i}`" + ("" if i in asked else " (inside a removed item)") for i in removed]
    return "\n".join(lines) + f"\n\n{TRAILER}: {operation_id}\n"


@value
class SignerRevocation:
    """`memsync provenance --signer`: the live items that key introduced and, with
    `--revert`, what removing them did (None: not asked)."""

    found: SignerItems
    reverted: Reverted | None


def signer_revocation(
    opened: OpenRoot,
    signer: str,
    since: str | None,
    *,
    revert: tuple[RootSettings, Path] | None,
) -> SignerRevocation:
    """Every live item of `opened` whose introducing commit `signer` signed (since `since`);
    with `revert` (the root's settings and the state dir), removed in one commit."""
    found = signed_items(opened.git, opened.layout, opened.head, signer, since)
    if revert is None:
        return SignerRevocation(found, None)
    root, state_dir = revert
    reason = f"remove {len(found.items)} item(s) introduced by {signer}"
    ids = [p.item for p in found.items]
    return SignerRevocation(found, revert_items(root, state_dir, opened.head, ids, reason))
