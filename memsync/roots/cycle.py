"""One sync cycle for one root: preflight, fetch, plan, admit, publish, push.

Runs under the root lock after start-of-cycle recovery. Every refusal returns a result
and leaves the active root exactly as it was; only `publish.publish` moves the branch.
A cycle with nothing to do costs two git processes: status and fetch (refs are read from files).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

from memsync.config.model import RootSettings
from memsync.errors import GitError, GitTimeout, LockBusy, require
from memsync.roots import journal as J
from memsync.roots import recovery
from memsync.roots import result as R
from memsync.roots.admit import (
    Admission,
    Admitter,
    AlreadyDone,
    DryRun,
    Fenced,
    Invalid,
    Outcome,
    Unstaged,
)
from memsync.roots.candidate import MergeFailed, merge_candidate, replay_candidate
from memsync.roots.faults import fault
from memsync.roots.layout import RootLayout, rescue_ref
from memsync.roots.lock import RootLock
from memsync.roots.plan import Action, Facts, Plan, decide, questions
from memsync.roots.publish import blocking_changes
from memsync.roots.state import RootState
from memsync.transports.git import FetchOutcome, Git, GitBlobs, PushOutcome, cause
from memsync.transports.gitparse import fsck_findings, last_line
from memsync.transports.process import Deadline
from memsync.validators.gate import validate_changes, validate_tree
from memsync.validators.graph import GraphValidator, default_graph_validator
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem

log = logging.getLogger(__name__)

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree (SHA-1 repos)
RETRY = "retry"  # internal: the push was rejected; sync once more, then push once more


@dataclass(frozen=True)
class SyncOptions:
    accept_rewrite: bool = False
    no_push: bool = False
    dry_run: bool = False
    wait: float | None = None  # seconds to wait for the root lock; 0 answers `busy` at once


def sync_root(
    settings: RootSettings,
    state_dir: Path,
    options: SyncOptions,
    graph: GraphValidator | None = None,
) -> R.SyncResult:
    """Run one cycle and record its outcome in the root's state file."""
    started = time.monotonic()
    if not settings.sync_enabled:
        return R.SyncResult(
            settings.name, R.DISABLED, f"sync is off (roots.{settings.name}.sync.enabled: false)"
        )
    layout = RootLayout.for_root(state_dir, settings.name)
    try:
        with RootLock(layout.lock_file, wait=options.wait, label=f"root {settings.name}"):
            cycle = _Cycle(settings, layout, options, graph or default_graph_validator())
            result = cycle.run()
            if not options.dry_run:
                cycle.record(result)
    except LockBusy as exc:
        result = R.SyncResult(settings.name, R.BUSY, exc.message)
    return replace(result, duration_ms=int((time.monotonic() - started) * 1000))


class _Cycle:
    def __init__(
        self,
        settings: RootSettings,
        layout: RootLayout,
        options: SyncOptions,
        graph: GraphValidator,
    ) -> None:
        self.s = settings
        self.layout = layout
        self.options = options
        self.graph = graph
        self.policy = SyncPolicy(max_file_size=settings.max_file_size)
        self.timeout = settings.timeout.total_seconds()
        # One deadline for the whole cycle (`sync.timeout`): each git process gets what is left.
        self.git = Git(settings.path, timeout=self.timeout, deadline=Deadline.after(self.timeout))
        self.journal = J.Journal(layout.journal_dir)
        self.state = RootState.load(layout.state_file)
        self.trusted = self.state.trusted_upstream
        self.branch = ""
        self.upstream_branch = ""
        self.tracking = ""
        self.start = ""

    def result(self, status: str, message: str, **fields: object) -> R.SyncResult:
        return R.SyncResult(self.s.name, status, message, dry_run=self.options.dry_run, **fields)  # type: ignore[arg-type]

    def record(self, result: R.SyncResult) -> None:
        if result.status in (R.BUSY, R.DISABLED):
            return
        updated = self.state.recorded(
            result.status, result.message, result.files, result.head, result.upstream, self.trusted
        )
        # Only the trusted upstream guards safety; the rest is reporting and may skip fsync.
        durable = updated.trusted_upstream != self.state.trusted_upstream
        updated.save(self.layout.state_file, durable=durable)

    # -- the cycle ---------------------------------------------------------------------------

    def run(self) -> R.SyncResult:
        try:
            early = self._preflight()
            if early is not None:
                return early
            return self._round(self.start, retry_push=True)
        except GitTimeout as exc:
            return self.result(R.OFFLINE, exc.message)
        except GitError as exc:
            return self.result(R.ERROR, exc.message)

    def _preflight(self) -> R.SyncResult | None:
        path, remote = self.s.path, self.s.remote
        if not path.is_dir():
            return self.result(R.UNCONFIGURED, f"the root path {path} does not exist")
        if self.git.git_dir() is None:
            return self.result(
                R.UNCONFIGURED, f"{path} is not the top level of its own Git work tree"
            )
        if recovery.needed(self.journal, self.layout) and not self.options.dry_run:
            recovery.recover(self.git, self.journal, self.layout, self.policy)
        state = self.git.work_state(refresh=True)
        self.branch = self.s.branch or state.branch or ""
        if not self.branch:
            return self.result(R.ERROR, "HEAD is detached; check out the root's branch")
        if state.branch != self.branch:
            return self.result(
                R.ERROR,
                f"branch {self.branch} is configured but "
                f"{state.branch or 'a detached HEAD'} is checked out",
            )
        if state.head is None:
            return self.result(R.ERROR, f"branch {self.branch} has no commits yet")
        self.start = state.head
        upstream = state.upstream or ""
        self.upstream_branch = (
            upstream.removeprefix(f"{remote}/")
            if upstream.startswith(f"{remote}/")
            else self.branch
        )
        self.tracking = f"refs/remotes/{remote}/{self.upstream_branch}"
        unmerged = tuple(sorted(e.path for e in state.entries if e.unmerged))
        if unmerged or self.git.merge_in_progress():
            return self.result(
                R.CONFLICT,
                "the root has an unfinished merge; finish or abort it with git",
                files=unmerged,
                head=state.head,
            )
        dirty = blocking_changes(state.entries, self.policy)
        if dirty:
            return self.result(
                R.DIRTY,
                f"{len(dirty)} synchronized file(s) have uncommitted "
                "edits; commit them (or enable autocommit) to sync",
                files=dirty,
                head=state.head,
            )
        return None

    def _fetch(self, local: str) -> tuple[str | None, R.SyncResult | None]:
        outcome, detail = self.git.fetch(self.s.remote, self.upstream_branch, self.tracking)
        if outcome is FetchOutcome.UNREACHABLE:
            if self.git.remote_url(self.s.remote) is None:
                return None, self.result(
                    R.UNCONFIGURED, f"the root has no remote '{self.s.remote}'", head=local
                )
            return None, self.result(
                R.OFFLINE, f"the upstream could not be reached: {cause(detail)}", head=local
            )
        if outcome is FetchOutcome.BAD_OBJECTS:
            findings = fsck_findings(detail)
            if not findings:
                return None, self.result(
                    R.ERROR,
                    "the upstream sent objects that failed git's "
                    f"object check: {last_line(detail)}",
                    head=local,
                )
            problems = tuple(Problem(code, None, None, msg) for code, msg in findings)
            return None, self.result(
                R.REJECTED,
                "refused: the upstream sent trees with "
                "forbidden names; nothing was fetched and "
                "the root is unchanged",
                head=local,
                problems=problems,
            )
        if outcome is FetchOutcome.MISSING_BRANCH:
            self.git.delete_ref(self.tracking)
            return None, None
        fault("after-fetch")
        return self.git.ref_value(self.tracking), None

    def _round(self, local: str, *, retry_push: bool) -> R.SyncResult:
        upstream, failed = self._fetch(local)
        if failed is not None:
            return failed
        plan = decide(self._facts(local, upstream), accept_rewrite=self.options.accept_rewrite)
        log.debug("root %s: %s", self.s.name, plan.describe())

        if plan.action is Action.REWOUND:
            ref = None
            if upstream is not None and not self.options.dry_run:
                ref = rescue_ref("rewound", upstream)
                self.git.update_ref(ref, upstream, reason="memsync: refused rewound upstream")
            return self.result(
                R.REWOUND,
                f"refused: {plan.reason}; the root is unchanged. "
                "Inspect the upstream, then rerun with "
                "--accept-rewrite to proceed",
                head=local,
                upstream=upstream,
                rescue_ref=ref,
            )
        if plan.action is Action.CURRENT:
            self.trusted = upstream
            return self.result(R.CURRENT, "already up to date", head=local, upstream=upstream)

        admitted: R.SyncResult | None = None
        head = local
        if plan.incoming:
            admitted = self._admit(plan)
            if admitted.status != R.SYNCED:
                return admitted
            head = admitted.head or local
        elif plan.action is Action.AHEAD:
            self.trusted = upstream

        if not plan.outgoing or head == upstream:  # an adopted rewrite may leave none
            return require(admitted, "the admitted result")
        if not self.s.push or self.options.no_push:
            ahead = len(self.git.rev_list(head, upstream))
            base = admitted or self.result(R.CURRENT, "", head=head, upstream=upstream)
            note = f"{ahead} local commit(s) not pushed (push is off)"
            return replace(base, message=f"{base.message}; {note}" if base.message else note)
        pushed = self._push(head, upstream if plan.action is not Action.CREATE else None)
        if pushed.status == RETRY:
            if not retry_push:
                return replace(
                    pushed,
                    status=R.ERROR,
                    message="the upstream rejected the push twice; it is moving fast, try again",
                )
            again = self._round(head, retry_push=False)
            if admitted is None:
                return replace(again, message=f"{again.message} (after a rejected push)")
            # The first round already published: say so, whatever the retry found.
            return replace(
                again,
                message=f"{admitted.message}; then the push was rejected and the retry "
                f"found: {again.message}",
                files=tuple(sorted({*admitted.files, *again.files})),
                operation_id=again.operation_id or admitted.operation_id,
                head=again.head or admitted.head,
            )
        if admitted is not None and pushed.status == R.PUSHED:
            return replace(
                pushed,
                files=tuple(sorted({*admitted.files, *pushed.files})),
                operation_id=admitted.operation_id,
                message=f"{admitted.message}; {pushed.message}",
            )
        return pushed

    def _facts(self, local: str, upstream: str | None) -> Facts:
        need = questions(local, upstream, self.trusted)
        if upstream is None or not need:
            return Facts(local, upstream, self.trusted)
        git = self.git
        local_in = git.is_ancestor(local, upstream)
        upstream_in = not local_in and git.is_ancestor(upstream, local)
        related = local_in or upstream_in or git.merge_base(local, upstream) is not None
        trusted_in = None
        if "trusted_in_upstream" in need and self.trusted is not None:
            trusted_in = git.is_ancestor(self.trusted, upstream)
        return Facts(
            local,
            upstream,
            self.trusted,
            local_in_upstream=local_in,
            upstream_in_local=upstream_in,
            trusted_in_upstream=trusted_in,
            related=related,
        )

    # -- incoming ----------------------------------------------------------------------------

    def _admit(self, plan: Plan) -> R.SyncResult:
        git, local = self.git, plan.local
        upstream = require(plan.upstream, "the upstream commit")
        count, changes = git.changes(upstream, local)
        report = validate_changes(changes, GitBlobs(git), self.policy)
        if not report.ok:
            return self._refuse(
                report.problems, upstream, local, f"{count} incoming commit(s) break the path rules"
            )
        kept = rescue_ref("rewound", local) if plan.action is Action.ADOPT else None

        def keep_previous_head() -> None:
            if kept is not None:
                git.update_ref(kept, local, reason="memsync: head before an accepted rewrite")

        outcome = Admitter(git, self.journal, self.layout, self.policy).admit(
            Admission("sync", self.branch, local, upstream),
            lambda _op, worktree: self._stage(plan, worktree),
            lambda candidate, files: validate_tree(
                git.tree_view(candidate), self.policy, self.graph, content_paths=files
            ),
            dry_run=self.options.dry_run,
            before_publish=keep_previous_head,
        )
        return self._admitted(plan, outcome, kept)

    def _admitted(self, plan: Plan, outcome: Outcome, kept: str | None) -> R.SyncResult:
        """The sync verdict for an admission outcome."""
        local = plan.local
        upstream = require(plan.upstream, "the upstream commit")
        if isinstance(outcome, Unstaged):
            merged = outcome.failure
            return self.result(
                R.CONFLICT if merged.conflicted else R.ERROR,
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
                # sides): a conflict for a person (or, later, a repair role) to settle.
                codes = ", ".join(sorted({p.code for p in problems}))
                return self.result(
                    R.CONFLICT,
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
                R.SYNCED,
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
        if isinstance(outcome, AlreadyDone):  # sync admissions are never `once`
            return self.result(R.ERROR, "internal: a sync was answered as already done")
        candidate = outcome.candidate
        self.trusted = upstream
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
            R.SYNCED,
            message,
            head=candidate,
            upstream=upstream,
            files=outcome.files,
            operation_id=outcome.operation_id,
            rescue_ref=kept,
        )

    def _stage(self, plan: Plan, worktree: Path) -> str | MergeFailed:
        """The candidate commit: the upstream itself, a merge, or own commits replayed onto it."""
        upstream = require(plan.upstream, "the upstream commit")
        if plan.action is Action.BEHIND:
            fault("after-staging")
            return upstream
        if plan.action is Action.ADOPT:
            # Only this root's own commits that never reached the old trusted upstream: what
            # the rewrite dropped stays dropped (and is kept locally under a rescue ref).
            own = self.git.rev_list(plan.local, self.trusted, upstream, no_merges=True)
            return replay_candidate(self.git, worktree, upstream, own)
        return merge_candidate(self.git, worktree, plan.local, upstream)

    def _valid(self, commit: str) -> bool:
        return validate_tree(self.git.tree_view(commit), self.policy, self.graph).ok

    def _refuse(
        self,
        problems: tuple[Problem, ...],
        upstream: str,
        local: str,
        summary: str,
        operation_id: str | None = None,
    ) -> R.SyncResult:
        ref = None
        if not self.options.dry_run:
            ref = rescue_ref("rejected", upstream)
            self.git.update_ref(ref, upstream, reason="memsync: refused upstream")
        codes = ", ".join(sorted({p.code for p in problems}))
        return self.result(
            R.REJECTED,
            f"refused: {summary} ({codes}); the root is unchanged",
            head=local,
            upstream=upstream,
            problems=problems,
            files=tuple(sorted({p.path for p in problems if p.path})),
            rescue_ref=ref,
            operation_id=operation_id,
        )

    # -- outgoing ----------------------------------------------------------------------------

    def _push(self, head: str, upstream: str | None) -> R.SyncResult:
        git = self.git
        count, changes = git.changes(head, upstream)
        report = validate_changes(changes, GitBlobs(git), self.policy)
        files = tuple(sorted({c.path for c in changes}))
        if report.ok:
            # What is pushed must be a valid root too (the graph and auxiliary files): a
            # dangling edge pushed upstream would leave every other machine `rejected`.
            base = upstream or EMPTY_TREE
            report = validate_tree(
                git.tree_view(head),
                self.policy,
                self.graph,
                content_paths=git.changed_paths(base, head),
            )
        if not report.ok:
            codes = ", ".join(sorted(report.codes()))
            return self.result(
                R.REJECTED,
                f"refused to push: {count} local commit(s) break "
                f"the memory rules ({codes}); nothing was pushed",
                head=head,
                upstream=upstream,
                problems=report.problems,
                files=tuple(sorted({p.path for p in report.problems if p.path})),
            )
        if self.options.dry_run:
            return self.result(
                R.PUSHED,
                f"dry run: {count} local commit(s) validated; nothing pushed",
                head=head,
                upstream=upstream,
                files=files,
            )
        op = self.journal.begin("push", self.branch, head, upstream)
        fault("before-push")
        outcome, detail = git.push(self.s.remote, head, self.upstream_branch)
        fault("after-push")
        if outcome is PushOutcome.OK:
            self.journal.advance(op, J.COMMITTED, message="pushed", files=files)
            self.trusted = head
            git.update_ref(self.tracking, head, reason="memsync: pushed")
            return self.result(
                R.PUSHED,
                f"pushed {count} validated commit(s)",
                head=head,
                upstream=head,
                files=files,
            )
        self.journal.advance(op, J.FAILED, message=last_line(detail))
        if outcome is PushOutcome.REJECTED:
            return self.result(RETRY, "the upstream rejected the push", head=head)
        return self.result(
            R.OFFLINE,
            f"the push did not reach the upstream: {cause(detail)}",
            head=head,
            upstream=upstream,
        )
