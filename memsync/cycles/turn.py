"""One maintenance turn (prune or insight) for one root, landed by the admission transaction.

    recovery -> due? -> claim -> journal record (deterministic key) -> candidate worktree
    at HEAD -> the role runs there -> its commits collapse into one commit with a
    `Memsync-Operation:` trailer (for prune, the ledger of what went and what revival
    grace kept) -> grants and grace -> the full gate -> prepared -> fenced publish

A turn starts by settling what a killed process left (journal recovery): a turn killed
after `prepared` is finished and its key remembered, so a key that settled is never run
again (the model is not asked twice after a crash);
a role that changes nothing settles `no_change` and consumes the claimed pressure; a
failure keeps the pressure. The push follows through the ordinary sync cycle.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from memsync.config.model import RootSettings
from memsync.cycles import sandbox
from memsync.cycles.ledger import DEFAULT_REVIVAL_GRACE
from memsync.cycles.pressure import count_new, prune_due
from memsync.cycles.prunefacts import (
    PruneFacts,
    grace_problems,
    ledger_message,
    prune_facts,
    removed_items,
)
from memsync.cycles.records import Pressure, PruneState
from memsync.cycles.sandbox import ROLE_ESCAPED, RoleEscaped, RootGuard
from memsync.errors import LockBusy, ProblemError
from memsync.roots import journal, recovery
from memsync.roots.admit import Admission, Admitter, Published
from memsync.roots.candidate import MergeFailed
from memsync.roots.checks import Checks
from memsync.roots.edits import blocking_changes
from memsync.roots.faults import fault
from memsync.roots.layout import RootLayout, candidate_ref
from memsync.roots.lock import RootLock
from memsync.roots.refused import AlreadyDone, DryRun, Fenced, Invalid, NoChange, Unstaged
from memsync.transports.commitsign import SigningKeyError, sign_commit, sign_head, signer
from memsync.transports.git import Git
from memsync.transports.process import Deadline
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem
from memsync.validators.rightmemory import default_graph_validator

log = logging.getLogger(__name__)

LANDED, NOOP, NOT_DUE, REFUSED, FAILED = "landed", "noop", "not-due", "refused", "failed"
OK_STATUSES = frozenset({LANDED, NOOP, NOT_DUE})

if TYPE_CHECKING:
    from typing import Any

    from memsync.roots.admit import Outcome
    from memsync.wire.cli import CycleReport


@dataclass(frozen=True)
class CycleResult:
    """`memsync cycle prune|insight --json` (CONTRACT §2)."""

    root: str
    cycle: str
    status: str
    message: str
    operation_id: str | None = None
    commit: str | None = None
    files: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    duration_ms: int = 0

    @property
    def ok(self) -> bool:
        return self.status in OK_STATUSES

    def document(self) -> dict[str, Any]:
        """The `cycle --json` document as plain JSON values, keys in the wire model's order
        (`cycles.report` checks its shape; no pydantic)."""
        return {
            "root": self.root,
            "cycle": self.cycle,
            "status": self.status,
            "operation_id": self.operation_id,
            "commit": self.commit,
            "files": list(self.files),
            "problems": [p.document() for p in self.problems],
            "message": self.message,
            "duration_ms": self.duration_ms,
        }

    def model(self) -> CycleReport:
        """The `cycle --json` document as its wire model (the daemon's control socket)."""
        from memsync.wire.cli import CycleReport, ProblemModel  # noqa: PLC0415 - pydantic

        return CycleReport(
            root=self.root,
            cycle=self.cycle,
            status=self.status,
            operation_id=self.operation_id,
            commit=self.commit,
            files=list(self.files),
            problems=[ProblemModel.of(p) for p in self.problems],
            message=self.message,
            duration_ms=self.duration_ms,
        )


class RoleFailed(ProblemError):
    """The role's executor failed or timed out; nothing lands and pressure is kept."""

    exit_code = 3
    needs_problems = False
    error_code = "failed"


@dataclass(frozen=True)
class TurnInput:
    """What a role is told: which cycle, for which root, and the context to work from."""

    cycle: str
    root: str
    operation_id: str
    worktree: Path
    context: dict[str, str] = field(default_factory=dict)
    prune: PruneFacts | None = None  # a prune turn's history facts (boundary, ledger, grace)


class Role(Protocol):
    """Runs one turn in `turn.worktree` and leaves its work as commits on its HEAD (or
    none: a no-op). Raises RoleFailed when it could not finish."""

    def __call__(self, turn: TurnInput, deadline: Deadline) -> None: ...


@dataclass(frozen=True)
class CycleSettings:
    kind: str  # insight | prune
    enabled: bool
    threshold: int  # insight: trigger points; prune: generation commits
    points_per_commit: int = 1
    timeout: float = 900.0
    revival_grace: int = DEFAULT_REVIVAL_GRACE  # prune: generations a revived item is kept


def run_cycle(
    root: RootSettings,
    cycle: CycleSettings,
    role: Role,
    state_dir: Path,
    *,
    force: bool = False,
    wait: float | None = 60.0,
    resident: bool = True,
) -> CycleResult:
    """One turn now (or `not-due`), under the root lock; never raises for the role's failures.
    `resident`: this process lives on (the daemon's git box, `Git.resident`)."""
    started = time.monotonic()
    layout = RootLayout.for_root(state_dir, root.name)
    try:
        with RootLock(layout.lock_file, wait=wait, label=f"root {root.name}"):
            result = _Turn(root, cycle, role, layout, resident).run(force)
    except LockBusy as exc:
        result = CycleResult(root.name, cycle.kind, FAILED, exc.message)
    duration = int((time.monotonic() - started) * 1000)
    return CycleResult(**{**result.__dict__, "duration_ms": duration})


class _Turn:
    def __init__(
        self,
        root: RootSettings,
        cycle: CycleSettings,
        role: Role,
        layout: RootLayout,
        resident: bool = True,
    ) -> None:
        self.root, self.cycle, self.role, self.layout = root, cycle, role, layout
        self.git = Git(root.path, timeout=cycle.timeout, resident=resident)
        self.policy = SyncPolicy(max_file_size=root.max_file_size)
        self.records = journal.Journal(layout.journal_dir)
        self.pressure_path = layout.base / "insight.json"
        self.prune_path = layout.base / "prune.json"
        self._facts: dict[str, PruneFacts] = {}

    def result(self, status: str, message: str, **fields: object) -> CycleResult:
        return CycleResult(self.root.name, self.cycle.kind, status, message, **fields)  # type: ignore[arg-type]

    def run(self, force: bool) -> CycleResult:
        git = self.git
        if not self.root.path.is_dir() or git.git_dir() is None:
            return self.result(FAILED, f"{self.root.path} is not the top level of a Git work tree")
        if recovery.needed(self.records, self.layout):
            # A turn killed after `prepared` is finished here (and its key remembered), so
            # the model is not asked again; one killed before is failed and its leftovers go.
            recovery.recover(git, self.records, self.layout, self.policy)
        state = git.work_state()
        if state.head is None or state.branch is None:
            return self.result(FAILED, "the root has no checked-out branch with commits")
        if blocking_changes(state.entries, self.policy):
            return self.result(
                FAILED, "the root has uncommitted edits to synchronized files; sync them first"
            )
        head, branch = state.head, state.branch
        if self.root.signing is not None:  # before a claim or a role: its commit must be signed
            try:
                signer(self.root.signing)
            except SigningKeyError as exc:
                return self.result(FAILED, f"{self.cycle.kind}: {exc.message}")
        if self.cycle.kind == "insight":
            pressure = count_new(git, self.pressure_path, head, self.cycle.points_per_commit)
            claimed, claim = pressure.claim(self.cycle.threshold, force=force)
            if claim is None:
                return self.result(
                    NOT_DUE, f"insight pressure {pressure.points}/{self.cycle.threshold} points"
                )
            claimed.save(self.pressure_path)
            basis, context = claim, {"points": str(claimed.active_points)}
        else:
            due = prune_due(git, head, self.cycle.threshold)
            PruneState.load(self.prune_path).counted(due).save(self.prune_path)
            if not due.due and not force:
                return self.result(NOT_DUE, f"prune not due: {due.reason}")
            basis = due.boundary or "root"
            facts = self.facts(head)
            context = {
                "generation": due.reason,
                "generation_number": str(facts.generation),
                "boundary": due.boundary or "",
                "count": str(due.count),
                "generation_commits": str(due.generation_commits),
                "revival_grace": str(self.cycle.revival_grace),
            }
        # Insight: the claim names the turn, whatever HEAD became (a landing moved it);
        # prune: the generation's boundary and the head it counted to.
        if self.cycle.kind == "insight":
            key = journal.operation_key("insight", basis, None)
        else:
            key = journal.operation_key("prune", head, None, basis)
        replayed = self.records.done(f"{key}-replay")
        if replayed is not None:  # this turn landed by replay (see `_replay`): settled
            return self._finish(AlreadyDone(replayed))
        try:
            outcome = Admitter(git, self.records, self.layout, self.policy).admit(
                Admission(self.cycle.kind, branch, head, key=key, once=True),
                lambda op, worktree: self._stage(op, worktree, head, context),
                self._checks(),
            )
            if isinstance(outcome, Fenced) and outcome.candidate is not None:
                outcome = self._replay(outcome, head, branch, key)
        except (RoleFailed, RoleEscaped) as exc:  # the record settled `failed`; claim kept
            self._completed("failed")
            codes = ", ".join(sorted({p.code for p in exc.problems}))
            escaped = any(p.code == ROLE_ESCAPED for p in exc.problems)
            return self.result(
                REFUSED if exc.problems and not escaped else FAILED,
                f"{self.cycle.kind}: {exc.message}" + (f" ({codes})" if codes else ""),
                problems=exc.problems,
            )
        return self._finish(outcome)

    def _stage(
        self, op: journal.Operation, worktree: Path, head: str, context: dict[str, str]
    ) -> str | MergeFailed | None:
        git = self.git
        worktree.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        # The role works in a repository of its own, never a linked worktree of the root;
        # the guard proves it left the root's refs, config and hooks alone.
        identity = git.identity_config()  # the role's repository's, and the turn's commit's
        box = sandbox.create(git, worktree, head, identity)
        facts = self.facts(head) if self.cycle.kind == "prune" else None
        turn = TurnInput(self.cycle.kind, self.root.name, op.id, worktree, context, facts)
        who = f"the {self.cycle.kind} role"
        guard = RootGuard.take(git)
        try:
            self.role(turn, Deadline.after(self.cycle.timeout))
        finally:
            guard.check(git, who, worktree)  # a role that wrote the root: restored, role-escaped
        leftovers = box.work_state().entries
        if leftovers:
            raise RoleFailed(
                f"the role left {len(leftovers)} uncommitted change(s)",
                tuple(
                    Problem("uncommitted-changes", e.path, None, f"'{e.path}' was left uncommitted")
                    for e in leftovers
                ),
            )
        top = box.rev_parse("HEAD")
        commits = box.rev_list(top or head, head)
        if not commits:
            return None
        tree = box.tree_of("HEAD")
        if tree == git.tree_of(head) and self.cycle.kind != "prune":
            return None  # commits that change nothing: a no-op
        message = box.commit_message("HEAD")
        if facts is not None:  # the ledger records what went and what grace kept
            message = ledger_message(message, facts, removed_items(box, facts, top or head))
        message = owned_subject(self.cycle.kind, message)
        message = f"{message}\n\nMemsync-Operation: {op.id}\n"
        collapsed = box.commit_tree(tree, [head], message, identity)
        collapsed = sign_commit(box, collapsed, self.root.signing)
        fault("cycle-after-role-commit")
        guard.check(git, who, worktree)  # nothing it left running wrote the root meanwhile
        sandbox.fetch_result(git, worktree, collapsed, candidate_ref(op.id))
        return collapsed

    def _replay(self, fenced: Fenced, start: str, branch: str, key: str) -> Outcome:
        """HEAD moved during the turn (a person committed): the turn's commit is replayed
        onto the new HEAD when none of its paths changed there, and validated again;
        otherwise the fenced outcome stands and the turn is retried later."""
        git = self.git
        candidate = fenced.candidate or ""
        now = git.work_state()
        if now.head is None or now.head == start or now.branch != branch:
            return fenced
        if not git.is_ancestor(start, now.head):
            return fenced
        mine = {path for _status, path in git.tree_diff(start, candidate)}
        theirs = set(git.changed_paths(start, now.head))
        if mine & theirs or blocking_changes(now.entries, self.policy):
            return fenced
        new_head = now.head

        def stage(op: journal.Operation, worktree: Path) -> str | None:
            worktree.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            git.worktree_add(worktree, new_head)
            box = git.at(worktree)
            box.cherry_pick_kept(candidate, git.identity_config())
            return sign_head(box, self.root.signing)

        log.info(
            "root %s: HEAD moved during the %s turn; replaying it", self.root.name, self.cycle.kind
        )
        return Admitter(git, self.records, self.layout, self.policy).admit(
            Admission(self.cycle.kind, branch, new_head, key=f"{key}-replay", once=True),
            stage,
            self._checks(),
        )

    def _checks(self) -> Checks:
        """A landing passes the role's grants, prune's revival grace and the whole gate."""
        also = self._grace if self.cycle.kind == "prune" else None
        return Checks(default_graph_validator(), grants=self.cycle.kind, also=also)

    def _grace(self, head: str, candidate: str) -> list[Problem]:
        facts = self.facts(head)
        return grace_problems(facts, removed_items(self.git, facts, candidate))

    def facts(self, head: str) -> PruneFacts:
        """The prune facts at `head` (computed once per head a turn meets)."""
        if head not in self._facts:
            self._facts[head] = prune_facts(
                self.git, head, self.cycle.threshold, self.cycle.revival_grace
            )
        return self._facts[head]

    def _finish(self, outcome: object) -> CycleResult:
        kind = self.cycle.kind
        if isinstance(outcome, Published):
            self._completed("artifact")
            return self.result(
                LANDED,
                f"{kind}: landed {outcome.candidate[:12]} ({len(outcome.files)} file(s))",
                operation_id=outcome.operation_id,
                commit=outcome.candidate,
                files=outcome.files,
            )
        if isinstance(outcome, NoChange):
            self._completed("noop")
            return self.result(
                NOOP, f"{kind}: the role changed nothing", operation_id=outcome.operation_id
            )
        if isinstance(outcome, AlreadyDone):
            settled = self.records.load(outcome.operation_id)
            landed = settled is not None and settled.phase == journal.COMMITTED
            self._completed("artifact" if landed else "noop")
            return self.result(
                NOOP,
                f"{kind}: this turn settled before ({outcome.operation_id}); not run again",
                operation_id=outcome.operation_id,
            )
        if isinstance(outcome, Invalid):
            self._completed("failed")
            problems = outcome.report.problems
            codes = ", ".join(sorted({p.code for p in problems}))
            return self.result(
                REFUSED,
                f"{kind}: the role's commit was refused ({codes}); the root is unchanged",
                operation_id=outcome.operation_id,
                files=outcome.files,
                problems=problems,
            )
        if isinstance(outcome, Fenced):
            self._completed("failed")
            return self.result(
                FAILED,
                f"{kind}: nothing landed: {outcome.fence.message}; the turn is retried later",
                operation_id=outcome.operation_id,
            )
        self._completed("failed")
        message = outcome.failure.message if isinstance(outcome, Unstaged) else str(outcome)
        if isinstance(outcome, DryRun):
            message = "dry run"
        return self.result(FAILED, f"{kind}: {message}")

    def _completed(self, result: str) -> None:
        if self.cycle.kind == "insight":
            Pressure.load(self.pressure_path).completed(result).save(self.pressure_path)
        else:
            PruneState.load(self.prune_path).completed(result).save(self.prune_path)


def owned_subject(kind: str, message: str) -> str:
    """`message` with a subject that says which cycle made it (`prune: …`, `insight: …`):
    prune generations are counted from `prune:` subjects, so an insight turn never writes
    one, and a prune turn always does, whatever the role wrote."""
    subject, newline, rest = message.partition("\n")
    prefix = f"{kind}:"
    if not subject.startswith(prefix):
        subject = f"{prefix} {subject.strip()}" if subject.strip() else f"{prefix} checkpoint"
    return subject + newline + rest
