"""The repair role for sync: a merge that conflicts (or merges into invalid memory) settled
by a configured role, landed through the admission transaction like any other write.

    conflict -> operation key (start, upstream, diagnostic, prompt, role) -> settled before?
    -> given up / backing off? -> attempt recorded -> candidate worktree: the same merge
    again -> the role runs there -> exactly one commit (completing the merge, or on top of
    the clean merge) with a `Memsync-Operation:` trailer -> repair grants -> the full gate
    -> prepared -> fenced publish

The same conflict (same local head, same upstream commit, same diagnostic, same prompt,
same role) always gives the same key, so the model never settles one conflict twice: a key
that landed is answered by publishing that commit again, one that changed nothing is
answered `conflict` without asking again. Failures (the role failed or timed out, left
changes, wrote outside its grants, made an invalid or misshapen commit) are counted per key
in `<state_dir>/roots/<root>/repair.json` before the model runs (so a crash counts too),
back off exponentially, and stop after `repair_attempts`: the root then stays `conflict`
and the message says what to do. Only `command` roles can repair: the `openai` proposal
format (CONTRACT §7) has no repair action.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path

from memsync import timefmt
from memsync.atomicfile import read_json, write_json
from memsync.config.model import RootSettings
from memsync.config.sections import CommandRoleSettings
from memsync.cycles import sandbox
from memsync.cycles.command import run_command
from memsync.cycles.repairprompt import KIND, RepairInputs, repair_key, repair_prompt
from memsync.cycles.rolegroups import RoleGroups
from memsync.cycles.runrecord import ExecutorFailed
from memsync.cycles.sandbox import RoleEscaped, RootGuard, escaped_problems
from memsync.errors import ProblemError
from memsync.roots import journal
from memsync.roots.admit import Admission, Admitter, Published
from memsync.roots.candidate import MergeFailed, merge_candidate
from memsync.roots.checks import Checks
from memsync.roots.layout import RootLayout, candidate_ref
from memsync.roots.refused import Fenced, Invalid, NoChange, Unstaged
from memsync.roots.repairing import Conflict, NotRepaired, Repaired
from memsync.roots.result import SyncStatus
from memsync.transports.commitsign import sign_commit, signer
from memsync.transports.git import Git
from memsync.transports.process import Deadline
from memsync.validators.grants import REPAIR
from memsync.validators.graph import GraphValidator
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem

log = logging.getLogger(__name__)

KEEP_ATTEMPTS = 100  # conflicts remembered in repair.json at most (oldest dropped)


class RepairFailed(ProblemError):
    """The role did not produce a usable commit; nothing lands and the attempt counts."""

    exit_code = 3
    needs_problems = False
    error_code = "failed"


# -- the attempt ledger ------------------------------------------------------------------------


@dataclass(frozen=True)
class Attempts:
    """Failed (or interrupted) repairs of one conflict key."""

    count: int
    next_at: str  # RFC 3339: the role is not run again for this key before then
    message: str  # why the last attempt failed
    operation_id: str | None = None
    updated_at: str = ""


class Ledger:
    """`repair.json`: attempts per conflict key, written atomically (0600)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def _load(self) -> dict[str, Attempts]:
        raw = read_json(self.path)
        entries: dict[str, Attempts] = {}
        if not isinstance(raw, dict):
            return entries
        for key, value in raw.items():
            try:
                entries[str(key)] = Attempts(**value)
            except TypeError:
                continue  # an unreadable entry is dropped, never blocks a root
        return entries

    def get(self, key: str) -> Attempts | None:
        return self._load().get(key)

    def _save(self, entries: dict[str, Attempts]) -> None:
        kept = sorted(entries.items(), key=lambda item: item[1].updated_at)[-KEEP_ATTEMPTS:]
        write_json(self.path, {key: asdict(value) for key, value in kept})

    def start(self, key: str, now: datetime, backoff: timedelta) -> Attempts:
        """Count an attempt before the model runs: a crash during it counts as a failure."""
        entries = self._load()
        count = entries[key].count + 1 if key in entries else 1
        attempt = Attempts(
            count=count,
            next_at=timefmt.rfc3339(now + backoff * (2 ** (count - 1))),
            message="the attempt was interrupted before it finished",
            updated_at=timefmt.rfc3339(now),
        )
        entries[key] = attempt
        self._save(entries)
        return attempt

    def failed(self, key: str, message: str, operation_id: str | None) -> None:
        entries = self._load()
        entry = entries.get(key)
        if entry is None:
            return
        entries[key] = Attempts(entry.count, entry.next_at, message, operation_id, entry.updated_at)
        self._save(entries)

    def forget(self, key: str) -> None:
        entries = self._load()
        if entries.pop(key, None) is not None:
            self._save(entries)


# -- the repair ----------------------------------------------------------------------------------


class Repairer:
    """Settles one root's sync conflicts with its configured repair role."""

    def __init__(
        self,
        root: RootSettings,
        layout: RootLayout,
        policy: SyncPolicy,
        graph: GraphValidator,
        branch: str,
        *,
        clock: Callable[[], datetime] = timefmt.now,
        resident: bool = True,
    ) -> None:
        self.root = root
        self.resident = resident  # this process lives on (the daemon): `Git.resident`
        self.layout = layout
        self.policy = policy
        self.graph = graph
        # A repair passes the repair role's grants (the synchronized paths) and the gate.
        self._checks = Checks(graph, grants=REPAIR)
        self.branch = branch
        self.clock = clock
        self.records = journal.Journal(layout.journal_dir)
        self.ledger = Ledger(layout.base / "repair.json")
        self.ran = False  # the model was asked (the caller's own deadline may have passed)
        self._operation: str | None = None
        self.git = self._box()

    def settle(self, conflict: Conflict) -> Repaired | NotRepaired:
        """Run the repair role for `conflict` if it may run now; never raises for its failures."""
        name = self.root.repair_role or ""
        role = self.root.repair
        if role is None:
            return self._stays(
                conflict, f"the repair role {name!r} is not defined under `roles`; define it"
            )
        if not isinstance(role, CommandRoleSettings):
            return self._stays(
                conflict,
                f"the repair role {name!r} uses executor openai, whose answers can only be "
                "insight or prune proposals; a repair role must be an `executor: command` "
                "agent that edits and commits",
            )
        prompt = repair_prompt(
            RepairInputs(
                self.root.name,
                conflict.start,
                conflict.upstream,
                conflict.conflicted,
                conflict.files,
                conflict.problems,
            )
        )
        key = repair_key(conflict, prompt, role)
        self.git = self._box()
        settled = self.records.done(key)
        if settled is not None:
            return self._settled_before(conflict, settled, role)
        now = self.clock()
        previous = self.ledger.get(key)
        if previous is not None:
            waiting = self._waiting(conflict, previous, role, now)
            if waiting is not None:
                return waiting
        self.ledger.start(key, now, self.root.repair_backoff)
        self.ran = True
        log.info("root %s: running the repair role %s for a sync conflict", self.root.name, name)
        try:
            outcome = self._admitter().admit(
                Admission(KIND, self.branch, conflict.start, conflict.upstream, key=key, once=True),
                lambda op, worktree: self._stage(op, worktree, conflict, role, prompt),
                self._checks,
            )
        except RepairFailed as exc:
            return self._failed(conflict, key, exc.message, exc.problems)
        operation = outcome.operation_id
        if isinstance(outcome, Published):
            self.ledger.forget(key)
            return Repaired(operation, outcome.candidate, outcome.files, role.name)
        if isinstance(outcome, NoChange):
            self.ledger.forget(key)
            return self._stays(
                conflict,
                f"the repair role {role.name} changed nothing (operation {operation}); it is "
                "not run again for this conflict",
                operation,
            )
        if isinstance(outcome, Invalid):
            problems = outcome.report.problems
            codes = ", ".join(sorted({p.code for p in problems}))
            return self._failed(
                conflict, key, f"its commit was refused ({codes})", problems, operation
            )
        if isinstance(outcome, Fenced):
            self.ledger.failed(key, outcome.fence.message, operation)
            return NotRepaired(
                outcome.fence.status,
                f"the repair role's merge did not land: {outcome.fence.message}",
                operation,
                outcome.fence.files,
                outcome.fence.problems,
            )
        why = outcome.failure.message if isinstance(outcome, Unstaged) else str(outcome)
        return self._failed(conflict, key, why, (), operation)

    # -- the turn ----------------------------------------------------------------------------

    def _admitter(self) -> Admitter:
        return Admitter(self.git, self.records, self.layout, self.policy)

    def _box(self) -> Git:
        """A git box with its own deadline (the sync cycle's may run out while the role
        works): the role's time plus a sync cycle's, for what follows the role."""
        seconds = self.root.timeout.total_seconds()
        if self.root.repair is not None:
            seconds += self.root.repair.timeout.total_seconds()
        return Git(
            self.root.path,
            timeout=self.root.timeout.total_seconds(),
            deadline=Deadline.after(seconds),
            resident=self.resident,
        )

    def _stage(
        self,
        op: journal.Operation,
        worktree: Path,
        conflict: Conflict,
        role: CommandRoleSettings,
        prompt: str,
    ) -> str | MergeFailed | None:
        self._operation = op.id
        git = self.git
        if self.root.signing is not None:  # a key it cannot use stops it before the role runs
            signer(self.root.signing)
        # The merge and the role happen in a repository of the role's own, never a linked
        # worktree of the root; the guard proves the role left the root's refs alone.
        merged = merge_candidate(
            git,
            worktree,
            conflict.start,
            conflict.upstream,
            checkout=lambda path, start: sandbox.create(git, path, start),
            signing=self.root.signing,
        )
        if isinstance(merged, MergeFailed):
            again = conflict.conflicted and sorted(merged.files) == sorted(conflict.files)
            pre = conflict.start
        else:
            again = not conflict.conflicted
            pre = merged
        if not again:
            return MergeFailed(
                "the merge no longer gives the conflict the repair was asked about; "
                "nothing was run",
                tuple(sorted(conflict.files)),
            )
        who = f"the repair role {role.name}"
        guard = RootGuard.take(git)
        try:
            try:
                run_command(
                    role,
                    worktree=worktree,
                    prompt=prompt,
                    operation_id=op.id,
                    deadline=Deadline.after(role.timeout.total_seconds()),
                    scratch=self.layout.base / "prompts",
                    groups=RoleGroups(self.layout.base),
                )
            finally:
                guard.check(
                    git, who, worktree
                )  # a role that wrote the root: restored, role-escaped
        except ExecutorFailed as exc:
            raise RepairFailed(exc.message, escaped_problems(exc)) from exc
        except RoleEscaped as exc:
            raise RepairFailed(exc.message, exc.problems) from exc
        made = self._commit(sandbox.role_box(git, worktree), op.id, pre, conflict)
        if made is not None:
            try:
                guard.check(git, who, worktree)  # nothing it left running wrote the root meanwhile
            except RoleEscaped as exc:
                raise RepairFailed(exc.message, exc.problems) from exc
            sandbox.fetch_result(git, worktree, made, candidate_ref(op.id))
        return made

    def _commit(self, box: Git, operation: str, pre: str, conflict: Conflict) -> str | None:
        """The role's one commit with the operation trailer; None when it made none."""
        leftovers = box.work_state().entries
        if leftovers or box.merge_in_progress():
            problems = tuple(
                Problem("uncommitted-changes", e.path, None, f"'{e.path}' was left uncommitted")
                for e in leftovers
            )
            what = f"{len(leftovers)} uncommitted change(s)" if leftovers else "an unfinished merge"
            raise RepairFailed(f"the role left {what}", problems)
        top = box.rev_parse("HEAD")
        if top is None or top == pre:
            return None
        chain = box.first_parent_chain(pre, top)
        parents = box.parents_of(top)
        if len(chain) != 1:
            raise RepairFailed(
                f"the role made {len(chain)} commits; a repair is exactly one",
                (Problem("too-many-commits", None, None, "a repair is exactly one commit"),),
            )
        if conflict.conflicted:
            shaped = parents == [pre, conflict.upstream]  # no third parent brought along
            want = "a merge commit whose parents are the local head and the upstream commit"
        else:
            shaped = parents == [pre]
            want = "one commit on top of the merge"
        if not shaped:
            raise RepairFailed(f"the role's commit is not {want}")
        message = box.commit_message(top)
        message = message or f"memsync: repair the merge of upstream {conflict.upstream[:12]}"
        if message.startswith(("prune:", "insight:")):  # not a cycle's: prune counts from them
            message = f"repair: {message}"
        message = f"{message}\n\nMemsync-Operation: {operation}\n"
        made = box.commit_tree(box.tree_of(top), parents, message, box.identity_config())
        return sign_commit(box, made, self.root.signing)

    # -- answers without running the model ---------------------------------------------------

    def _settled_before(
        self, conflict: Conflict, operation: str, role: CommandRoleSettings
    ) -> Repaired | NotRepaired:
        """This conflict was settled by an earlier repair: publish its commit again (the
        root was moved back to the same state), or say that it changed nothing."""
        earlier = self.records.load(operation)
        candidate = earlier.candidate if earlier is not None else None
        if earlier is None or earlier.phase != journal.COMMITTED or candidate is None:
            return self._stays(
                conflict,
                f"the repair role settled this conflict before without a change (operation "
                f"{operation}); it is not run again for it",
                operation,
            )
        git = self.git
        if git.rev_parse(candidate) is None or not (
            git.is_ancestor(conflict.start, candidate)
            and git.is_ancestor(conflict.upstream, candidate)
        ):
            return self._stays(
                conflict,
                f"the repair role settled this conflict before (operation {operation}, commit "
                f"{candidate[:12]}), and that commit is gone; it is not run again for it",
                operation,
            )
        key = journal.operation_key(f"{KIND}-again", conflict.start, conflict.upstream, candidate)
        outcome = self._admitter().admit(
            Admission(KIND, self.branch, conflict.start, conflict.upstream, key=key),
            lambda _op, _worktree: candidate,
            self._checks,
        )
        if isinstance(outcome, Published):
            return Repaired(outcome.operation_id, candidate, outcome.files, role.name, again=True)
        why = str(outcome)
        if isinstance(outcome, Invalid):
            why = "it no longer passes the gate"
        elif isinstance(outcome, Fenced):
            why = outcome.fence.message
        return self._stays(
            conflict,
            f"the earlier repair of this conflict (operation {operation}) could not be "
            f"published again: {why}",
            outcome.operation_id,
        )

    def _waiting(
        self, conflict: Conflict, previous: Attempts, role: CommandRoleSettings, now: datetime
    ) -> NotRepaired | None:
        limit = max(1, self.root.repair_attempts)
        operation = previous.operation_id
        if previous.count >= limit:
            return self._stays(
                conflict,
                f"the repair role {role.name} failed {previous.count} time(s) for this conflict "
                f"(last: operation {operation or 'interrupted'}: {previous.message}); it is not "
                "run again for it (a changed role gets fresh attempts)",
                operation,
            )
        due = timefmt.parse(previous.next_at)
        if due is not None and now < due:
            return self._stays(
                conflict,
                f"the repair role {role.name} failed (attempt {previous.count} of {limit}: "
                f"{previous.message}); it is tried again after {previous.next_at}",
                operation,
            )
        return None

    def _failed(
        self,
        conflict: Conflict,
        key: str,
        why: str,
        problems: tuple[Problem, ...],
        operation: str | None = None,
    ) -> NotRepaired:
        operation = operation or self._operation
        self.ledger.failed(key, why, operation)
        attempts = self.ledger.get(key)
        count = attempts.count if attempts is not None else 1
        limit = max(1, self.root.repair_attempts)
        later = (
            f"it is tried again after {attempts.next_at}"
            if attempts is not None and count < limit
            else "it is not run again for this conflict"
        )
        log.warning("root %s: repair failed: %s", self.root.name, why)
        return NotRepaired(
            SyncStatus.CONFLICT,
            f"the repair role failed (attempt {count} of {limit}, operation {operation}): "
            f"{why}; {later}; {conflict.message}",
            operation,
            tuple(sorted({*conflict.files, *(p.path for p in problems if p.path)})),
            problems or conflict.problems,
        )

    def _stays(self, conflict: Conflict, why: str, operation: str | None = None) -> NotRepaired:
        return NotRepaired(
            SyncStatus.CONFLICT,
            f"{why}; {conflict.message}",
            operation,
            conflict.files,
            conflict.problems,
        )
