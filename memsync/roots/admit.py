"""The admission transaction: the one way anything is published into a root.

    journal record (running) -> stage a candidate commit -> pin it under a candidate ref
    -> validate -> record `prepared` -> publish through the fence -> settle

Sync, autocommit, cycle landings, revocation and the repair role all come through
`admit`; only it calls `publish.publish`. The caller supplies how to stage the candidate
and which checks apply to it (`roots.checks.Checks`: its policy, never the steps: the
transaction runs the gate itself) and gets back one plain outcome; every path settles
its journal record, removes its candidate, and leaves the active root either untouched or
at the validated candidate. An exception while staging settles the record as failed; one
after `prepared` leaves it for the next cycle's recovery, which finishes or refuses the
publication.

Operation keys are the caller's (`journal.operation_key`): a key that already settled as
committed or no_change is answered `AlreadyDone` without staging anything again.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.roots import journal, recovery
from memsync.roots.checks import Checks
from memsync.roots.faults import fault
from memsync.roots.layout import RootLayout, candidate_ref
from memsync.roots.publish import FenceBroken, FenceLook, Target, publication_reason, publish
from memsync.transports.git import Git
from memsync.transports.gitrefsession import RefSession
from memsync.validators.policy import SyncPolicy
from memsync.values import replace, value

if TYPE_CHECKING:  # the merge and replay stages load it; a fast-forward never does
    from memsync.roots.candidate import MergeFailed


@value
class Admission:
    """What is being admitted: the kind, the branch and commit it starts from, its key."""

    kind: str
    branch: str
    start: str
    upstream: str | None = None
    key: str | None = None  # default: journal.operation_key(kind, start, upstream)
    once: bool = False  # True: a key already settled committed/no_change is not run again
    in_place: bool = False  # the candidate is what the work tree already holds (autocommit)


# Stage: given the open record and a worktree path it may use, the candidate commit, None
# when there is nothing to land (a role that chose to change nothing), or why none could
# be made.
Stage = Callable[[journal.Operation, Path], "str | MergeFailed | None"]


@value
class Published:
    """The candidate passed every check and the branch moved to it."""

    operation_id: str
    candidate: str
    files: tuple[str, ...]


if TYPE_CHECKING:  # an admission that publishes nothing answers one of `roots.refused`
    from memsync.roots.refused import Refused

    Outcome = Published | Refused


class Admitter:
    """The transaction for one root: its git box, journal, layout and policy."""

    def __init__(
        self, git: Git, records: journal.Journal, layout: RootLayout, policy: SyncPolicy
    ) -> None:
        self.git = git
        self.journal = records
        self.layout = layout
        self.policy = policy
        # Whether the admission being run is `once`: only then does anyone ask `done` for its
        # key, so only then must the key file be durable.
        self._durable_key = True

    def admit(
        self,
        admission: Admission,
        stage: Stage,
        checks: Checks,
        *,
        dry_run: bool = False,
        before_publish: Callable[[], None] | None = None,
        look: FenceLook | None = None,
    ) -> Outcome:
        """`look`: the fence's reads, started by the caller once it knew the candidate (the
        caller waits for it); used when the staged candidate is the one it looked at."""
        key = admission.key or journal.operation_key(
            admission.kind, admission.start, admission.upstream
        )
        settled = self.journal.done(key) if admission.once else None
        if settled is not None:
            from memsync.roots.refused import AlreadyDone  # noqa: PLC0415 - not a clean path

            return AlreadyDone(settled)
        self._durable_key = admission.once
        op = self.journal.begin(
            admission.kind, admission.branch, admission.start, admission.upstream, key=key
        )
        try:
            return self._run(op, stage, checks, dry_run, before_publish, admission.in_place, look)
        except BaseException:
            latest = self.journal.load(op.id)
            if latest is not None and latest.phase == journal.RUNNING:
                self._settle(latest, journal.FAILED, "failed while staging")
            raise  # a prepared record stays for the next cycle's recovery

    def _run(
        self,
        op: journal.Operation,
        stage: Stage,
        checks: Checks,
        dry_run: bool,
        before_publish: Callable[[], None] | None,
        in_place: bool,
        look: FenceLook | None,
    ) -> Outcome:
        git = self.git
        staged = stage(op, self.layout.worktree(op.id))
        if staged is None:
            self._settle(op, journal.NO_CHANGE, "nothing to land", remember=not dry_run)
            from memsync.roots.refused import NoChange  # noqa: PLC0415 - not a clean path

            return NoChange(op.id)
        if not isinstance(staged, str):  # MergeFailed: no candidate could be made
            self._settle(op, journal.FAILED, staged.message, files=staged.files)
            from memsync.roots.refused import Unstaged  # noqa: PLC0415 - not a clean path

            return Unstaged(op.id, staged)
        candidate = staged
        # The candidate ref and, at the end, the branch move through one `update-ref --stdin`
        # (two transactions, each committed when git says so; `gitrefsession`): the
        # publication's reflog message is both's.
        session = git.ref_session = RefSession(git, publication_reason(op.id))
        own = None  # the fence's reads, started here when the caller's do not fit
        if (
            not dry_run
            and not in_place
            and (look is None or look.start != op.start or look.candidate != candidate)
        ):
            look = own = FenceLook(git, op.start, candidate)
        try:
            return self._checked(op, candidate, checks, dry_run, before_publish, in_place, look)
        finally:
            if own is not None:
                own.wait()  # (no read of the fence's outlives the admission)
            git.ref_session = None
            session.close()

    def _checked(
        self,
        op: journal.Operation,
        candidate: str,
        checks: Checks,
        dry_run: bool,
        before_publish: Callable[[], None] | None,
        in_place: bool,
        look: FenceLook | None,
    ) -> Outcome:
        """Pin, validate and publish a staged candidate (the fence's reads, `look`, may run
        meanwhile: it judges them after the verdict)."""
        git = self.git
        # The candidate is pinned while it is checked: git starts and commits the pin
        # (`update_ref_ahead`, in the admission's ref session) while the checks run, and
        # its answer is waited for once they are done, before anything relies on the ref
        # (should the checks raise, the session's `close` waits for it: no lock is left).
        pinned = git.update_ref_ahead(
            candidate_ref(op.id), candidate, reason=publication_reason(op.id)
        )
        files = git.changed_paths(op.start, candidate)
        if checks.tree == "none":  # nothing is published without its tree checked
            checks = replace(checks, tree="changed")
        report = checks.check(git, self.policy, op.start, candidate, files)
        pinned()
        fault("after-merge")
        fault("after-validation")
        if not report.ok:
            self._settle(op, journal.FAILED, "the candidate failed validation", files=files)
            from memsync.roots.refused import Invalid  # noqa: PLC0415 - not a clean path

            return Invalid(op.id, candidate, files, report)
        if dry_run:
            self._settle(op, journal.NO_CHANGE, "dry run", files=files, remember=False)
            from memsync.roots.refused import DryRun  # noqa: PLC0415 - not a clean path

            return DryRun(op.id, candidate, files)
        op = self.journal.advance(op, journal.PREPARED, candidate=candidate, files=files)
        fault("after-prepared")
        if before_publish is not None:
            before_publish()
        try:
            target = Target(op.branch, op.start, candidate, op.id, in_place)
            publish(git, target, self.policy, look)
        except FenceBroken as fence:
            self._settle(op, journal.FAILED, fence.message)
            from memsync.roots.refused import Fenced  # noqa: PLC0415 - not a clean path

            return Fenced(op.id, fence, candidate)
        # Publication dropped the candidate ref in the same transaction as the branch move.
        self._settle(op, journal.COMMITTED, "published", ref=False)
        fault("after-publish")
        return Published(op.id, candidate, files)

    def _settle(
        self,
        op: journal.Operation,
        phase: str,
        message: str,
        *,
        ref: bool = True,
        files: tuple[str, ...] | None = None,
        remember: bool = True,
    ) -> None:
        """Remove the candidate first, then settle: no candidate outlives an open record."""
        recovery.remove_candidate(self.git, self.layout, op.id, ref=ref)
        if not remember:  # a dry run settles without claiming the key
            op = replace(op, key="")
        self.journal.advance(op, phase, message=message, files=files, durable_key=self._durable_key)
