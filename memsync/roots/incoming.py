"""Incoming: upstream commits checked, staged as a candidate and admitted into the root.

Every path of every incoming commit passes the path rules first; then the candidate (the
upstream itself, a merge made in a worktree, or, for an accepted rewrite, this root's own
commits replayed onto the upstream) goes through the admission transaction. The verdict
says what happened in the sync vocabulary: synced, conflict, rejected, dirty, error.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.errors import require
from memsync.progress import NO_PROGRESS, Progress
from memsync.roots import journal
from memsync.roots.admit import Admission, Admitter, Published
from memsync.roots.anchor import CODES as SIGNATURE_CODES
from memsync.roots.checks import Checks
from memsync.roots.faults import fault
from memsync.roots.layout import RootLayout, rescue_ref
from memsync.roots.plan import Action, Plan
from memsync.roots.publish import FenceLook
from memsync.roots.result import SyncResult, SyncStatus
from memsync.transports.git import Git
from memsync.transports.gittree import AHEAD_WAIT
from memsync.validators.gate import shape_reader
from memsync.validators.graph import GraphValidator
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem
from memsync.values import replace, value

if TYPE_CHECKING:
    from memsync.roots.admission import SignedAdmission
    from memsync.roots.admit import Outcome
    from memsync.roots.candidate import MergeFailed
    from memsync.roots.refused import Refused
    from memsync.roots.repairing import Settler
    from memsync.transports.rootkeys import CommitKey

# Conflicts in the update coordination state are never handed to a model (reference §2.4).
UNREPAIRABLE = ("update_queue/", "update_records/")


@value(frozen=False)
class Incoming:
    """What admitting upstream commits into one root needs."""

    git: Git
    records: journal.Journal
    layout: RootLayout
    policy: SyncPolicy
    graph: GraphValidator
    branch: str
    trusted: str | None
    dry_run: bool
    result: Callable[..., SyncResult]
    # roots.*.repair.role: makes the runner that settles a conflicting merge, when one does
    repair: Callable[[], Settler] | None = None
    progress: Progress = NO_PROGRESS  # a cycle run from a terminal shows its validation
    signing: CommitKey | None = None  # roots.*.signing.key: signs the merges made here
    admission: SignedAdmission | None = None  # roots.*.admission: signed (every commit)
    shape_ahead: str | None = None  # the tree whose shape record `read_start_ahead` reads

    def admit(self, plan: Plan) -> SyncResult:
        # The collector is paused while the history and the candidate are checked and
        # published (a 10k-file root builds tens of thousands of small acyclic objects: its
        # listing, its shape record, their copies; the collector would scan the whole heap
        # for them and find nothing), not while a repair role runs.
        from memsync.validators.gcpause import gc_paused  # noqa: PLC0415 - loaded by the gate

        with gc_paused():
            outcome, verdict = self._admit(plan)
        if outcome is not None and self._repairable(plan, outcome, verdict):
            from memsync.roots.refused import Unstaged  # noqa: PLC0415 - loaded by the refusal

            return self._repaired(verdict, isinstance(outcome, Unstaged))
        return verdict

    def _admit(self, plan: Plan) -> tuple[Outcome | None, SyncResult]:
        """The admission's outcome and verdict; no outcome when the history is refused."""
        reading: list[threading.Thread] = []
        try:
            return self._admitting(plan, reading)
        finally:
            for thread in reading:  # (no reading outlives the admission)
                thread.join()

    def _admitting(
        self, plan: Plan, reading: list[threading.Thread]
    ) -> tuple[Outcome | None, SyncResult]:
        git, local = self.git, plan.local
        upstream = require(plan.upstream, "the upstream commit")
        # What is read beside the log starts its work once the log's git has started (the
        # records are read in this interpreter: the log is started first), and goes on
        # while the history is checked and the candidate ref set: the candidate's check
        # waits for what it uses (the listing, the shape record's `load`).
        started = threading.Event()
        if plan.action is Action.BEHIND:  # the candidate's check derives from the start's
            git.list_ahead(local, after=started)  # listing, listed beside the log
            shape = self._read_shape_ahead(local, started)  # and its shape record
            reading.extend([shape] if shape is not None else [])
        looks: list[FenceLook] = []

        def logged() -> None:
            # The candidate is the upstream: the fence's reads start as soon as the log's
            # diffs are known, beside the rest of the reading and the checks (they publish
            # nothing; the fence judges them after the verdict).
            if plan.action is Action.BEHIND and not self.dry_run and not looks:
                looks.append(FenceLook(git, local, upstream))
                reading.append(looks[0].thread)

        try:
            count, changes = git.changes(upstream, local, started=started, logged=logged)
        finally:
            started.set()
        look = looks[0] if looks else None
        checking = "Validating incoming changes"
        commits = f"{count} commit" if count == 1 else f"{count} commits"
        self.progress.show(checking, 0, len(changes), unit="changes", detail=commits)
        # The upstream's commits, each one, before anything is staged (the candidate's tree
        # is checked by the admission below).
        history = Checks(self.graph, signed=self.admission, tree="none")
        report = history.check(git, self.policy, local, upstream, changes=changes)
        self.progress.show(checking, len(changes), len(changes), unit="changes", detail=commits)
        if not report.ok:
            path_rules = not report.codes() <= SIGNATURE_CODES
            why = "break the path rules" if path_rules else "lack a pinned signer's signature"
            return None, self._refuse(
                report.problems, upstream, local, f"{count} incoming commit(s) {why}"
            )
        kept = rescue_ref("rewound", local) if plan.action is Action.ADOPT else None

        def keep_previous_head() -> None:
            if kept is not None:
                git.update_ref(kept, local, reason="memsync: head before an accepted rewrite")

        outcome = Admitter(git, self.records, self.layout, self.policy).admit(
            Admission("sync", self.branch, local, upstream),
            lambda _op, worktree: self._stage(plan, worktree),
            # The upstream's commits passed above; the staged merge or replay is checked
            # as a tree (the replayed commits are this root's own, checked when pushed).
            Checks(self.graph, history=False),
            dry_run=self.dry_run,
            before_publish=keep_previous_head,
            look=look,
        )
        return outcome, self._admitted(plan, outcome, kept)

    def _read_shape_ahead(self, start: str, after: threading.Event) -> threading.Thread | None:
        """In a fresh process, read the start tree's shape record on a thread while git
        logs and lists (the record is checked against the listing when the candidate's
        shape is derived from it); None when nothing is to be read (the start's tree id is
        not known yet, the shape is kept, or no records are kept)."""
        tree = self.git.known_tree(start)
        if tree is None or tree == self.shape_ahead:  # (read already: never twice)
            return None
        return _shape_thread(tree, self.policy, after)

    def _repairable(self, plan: Plan, outcome: Outcome, verdict: SyncResult) -> bool:
        """A merge (never a replay) that conflicted or is invalid, with a repair role set.
        Repair is never triggered just because both sides changed: a clean, valid merge is
        published as it is."""
        return (
            self.repair is not None
            and verdict.status is SyncStatus.CONFLICT
            and plan.action is Action.DIVERGED
            and _merge_refused(outcome)
            and not any(path.startswith(UNREPAIRABLE) for path in verdict.files)
        )

    def _repaired(self, verdict: SyncResult, conflicted: bool) -> SyncResult:
        """The repair role's answer to a conflict verdict (the root stays as it is unless
        the role's merge was validated and published)."""
        from memsync.roots.repairing import Conflict, Repaired  # noqa: PLC0415 - a conflict only

        make = require(self.repair, "the repair role")
        if self.dry_run:
            note = "dry run: the repair role is not run"
            return replace(verdict, message=f"{verdict.message}; {note}")
        conflict = Conflict(
            start=require(verdict.head, "the local head"),
            upstream=require(verdict.upstream, "the upstream commit"),
            conflicted=conflicted,
            message=verdict.message,
            files=verdict.files,
            problems=verdict.problems,
        )
        answer = make().settle(conflict)
        if isinstance(answer, Repaired):
            how = "published again" if answer.again else "validated and published"
            return self.result(
                SyncStatus.SYNCED,
                f"the merge conflicted and the repair role {answer.role} settled it: its merge "
                f"{answer.candidate[:12]} was {how} (operation {answer.operation_id})",
                head=answer.candidate,
                upstream=conflict.upstream,
                files=answer.files,
                operation_id=answer.operation_id,
            )
        return self.result(
            answer.status,
            answer.message,
            head=conflict.start,
            upstream=conflict.upstream,
            files=answer.files,
            problems=answer.problems,
            operation_id=answer.operation_id or verdict.operation_id,
        )

    def _admitted(self, plan: Plan, outcome: Outcome, kept: str | None) -> SyncResult:
        """The sync verdict for an admission outcome."""
        if not isinstance(outcome, Published):
            return self._refused(plan, outcome)
        upstream = require(plan.upstream, "the upstream commit")
        candidate = outcome.candidate
        if kept is not None:
            replayed = len(self.git.rev_list(candidate, upstream))
            message = (
                f"adopted the rewritten upstream and replayed {replayed} local commit(s) that "
                f"never reached it; the previous head is kept as {kept}"
            )
        else:
            how = "fast-forward" if candidate == upstream else "merge"
            message = f"published validated upstream state ({how})"
        return self.result(
            SyncStatus.SYNCED,
            message,
            head=candidate,
            upstream=upstream,
            files=outcome.files,
            operation_id=outcome.operation_id,
            rescue_ref=kept,
        )

    def _refused(self, plan: Plan, outcome: Refused) -> SyncResult:
        """The sync verdict for an admission that published nothing."""
        from memsync.roots.refused import DryRun, Fenced, Invalid, Unstaged  # noqa: PLC0415

        local = plan.local
        upstream = require(plan.upstream, "the upstream commit")
        if isinstance(outcome, Unstaged):
            merged = outcome.failure
            return self.result(
                SyncStatus.CONFLICT if merged.conflicted else SyncStatus.ERROR,
                merged.message,
                head=local,
                upstream=upstream,
                files=merged.files,
                operation_id=outcome.operation_id,
            )
        if isinstance(outcome, Invalid):
            problems = outcome.report.problems
            if outcome.candidate != upstream and self._valid(upstream):
                # Each side is valid but together they are not (say, one id added on both
                # sides): a conflict for a person (or the repair role) to settle.
                codes = ", ".join(sorted({p.code for p in problems}))
                return self.result(
                    SyncStatus.CONFLICT,
                    f"the merge of valid local and upstream states is invalid ({codes}); the "
                    "root is unchanged. Merge by hand and fix the problems, then sync again",
                    head=local,
                    upstream=upstream,
                    problems=problems,
                    files=tuple(sorted({p.path for p in problems if p.path})),
                    operation_id=outcome.operation_id,
                )
            return self._refuse(
                problems,
                upstream,
                local,
                "the merged candidate breaks the memory rules",
                operation_id=outcome.operation_id,
            )
        if isinstance(outcome, DryRun):
            return self.result(
                SyncStatus.SYNCED,
                f"dry run: {plan.action.value} to {outcome.candidate[:12]} validated; "
                "nothing published",
                head=local,
                upstream=upstream,
                files=outcome.files,
                operation_id=outcome.operation_id,
            )
        if isinstance(outcome, Fenced):
            fence = outcome.fence
            return self.result(
                fence.status,
                f"nothing published: {fence.message}",
                head=local,
                upstream=upstream,
                files=fence.files,
                problems=fence.problems,
                operation_id=outcome.operation_id,
            )
        # AlreadyDone or NoChange: sync stages always make a candidate
        return self.result(SyncStatus.ERROR, f"internal: a sync was answered {outcome}")

    def _stage(self, plan: Plan, worktree: Path) -> str | MergeFailed:
        """The candidate commit: the upstream itself, a merge, or own commits replayed onto it."""
        upstream = require(plan.upstream, "the upstream commit")
        if plan.action is Action.BEHIND:
            fault("after-staging")
            return upstream
        if plan.action is Action.ADOPT:
            # Only this root's own commits that never reached the old trusted upstream: what
            # the rewrite dropped stays dropped (and is kept locally under a rescue ref).
            from memsync.roots.candidate import replay_candidate  # noqa: PLC0415

            own = self.git.rev_list(plan.local, self.trusted, upstream, no_merges=True)
            return replay_candidate(self.git, worktree, upstream, own, self.signing)
        from memsync.roots.candidate import merge_candidate  # noqa: PLC0415 - merges only

        return merge_candidate(self.git, worktree, plan.local, upstream, signing=self.signing)

    def _valid(self, commit: str) -> bool:
        whole = Checks(self.graph, history=False, tree="whole")
        return whole.check(self.git, self.policy, None, commit).ok

    def _refuse(
        self,
        problems: tuple[Problem, ...],
        upstream: str,
        local: str,
        summary: str,
        operation_id: str | None = None,
    ) -> SyncResult:
        ref = None
        if not self.dry_run:
            ref = rescue_ref("rejected", upstream)
            self.git.update_ref(ref, upstream, reason="memsync: refused upstream")
        codes = ", ".join(sorted({p.code for p in problems}))
        return self.result(
            SyncStatus.REJECTED,
            f"refused: {summary} ({codes}); the root is unchanged",
            head=local,
            upstream=upstream,
            problems=problems,
            files=tuple(sorted({p.path for p in problems if p.path})),
            rescue_ref=ref,
            operation_id=operation_id,
        )

    # -- outgoing ----------------------------------------------------------------------------


def read_start_ahead(
    git: Git, start: str, policy: SyncPolicy
) -> tuple[str, threading.Thread | None] | None:
    """In a fresh process whose fetch still runs: learn commit `start`'s tree through the
    object session and start reading its listing and shape records on threads of their
    own, which the fetch leaves the interpreter to (an incoming fast-forward's candidate
    derives from them; the log that follows the fetch then starts with them read). The
    tree and the shape's thread (None when no shape record is read), or None when nothing
    was started (no listing records kept, or the session cannot say)."""
    tree = git.read_ahead(start)
    if tree is None:
        return None
    return tree, _shape_thread(tree, policy, None)


def _shape_thread(
    tree: str, policy: SyncPolicy, after: threading.Event | None
) -> threading.Thread | None:
    """Tree `tree`'s shape record read on a thread (once `after` is set, at most
    `AHEAD_WAIT` seconds on), or None when nothing is to be read (`shape_reader`)."""
    read = shape_reader(tree, policy)
    if read is None:
        return None

    def reading() -> None:
        if after is not None:
            after.wait(AHEAD_WAIT)
        read()

    thread = threading.Thread(target=reading, name="memsync-shape-ahead", daemon=True)
    thread.start()
    return thread


def _merge_refused(outcome: Outcome) -> bool:
    """Whether no candidate could be made or the candidate failed a check."""
    from memsync.roots.refused import Invalid, Unstaged  # noqa: PLC0415 - loaded by the refusal

    return isinstance(outcome, Unstaged | Invalid)
