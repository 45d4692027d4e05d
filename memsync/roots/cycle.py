"""One sync cycle for one root: preflight, fetch, plan, admit, publish, push.

Runs under the root lock after start-of-cycle recovery. Every refusal returns a result
and leaves the active root exactly as it was; only `publish.publish` moves the branch.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from pathlib import Path

from memsync.config.model import RootSettings
from memsync.errors import GitError, GitTimeout, LockBusy
from memsync.roots import journal as J
from memsync.roots import result as R
from memsync.roots.faults import fault
from memsync.roots.layout import RootLayout, candidate_ref, rescue_ref
from memsync.roots.lock import RootLock
from memsync.roots.plan import Action, Facts, Plan, decide, questions
from memsync.roots.publish import FenceBroken, Target, blocking_changes, publish
from memsync.roots.recovery import recover, remove_candidate
from memsync.roots.state import RootState
from memsync.transports.git import (
    FetchOutcome,
    Git,
    GitBlobs,
    PushOutcome,
    fsck_findings,
    last_line,
)
from memsync.validators.gate import validate_changes, validate_tree
from memsync.validators.graph import GraphValidator, default_graph_validator
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SyncOptions:
    accept_rewrite: bool = False
    no_push: bool = False
    dry_run: bool = False
    wait: float | None = None  # seconds to wait for the root lock; 0 answers `busy` at once


def sync_root(settings: RootSettings, state_dir: Path, options: SyncOptions,
              graph: GraphValidator | None = None) -> R.SyncResult:
    """Run one cycle and record its outcome in the root's state file."""
    started = time.monotonic()
    if not settings.sync_enabled:
        result = R.SyncResult(settings.name, R.DISABLED,
                              f"sync is off (roots.{settings.name}.sync.enabled: false)")
        return result
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
    def __init__(self, settings: RootSettings, layout: RootLayout, options: SyncOptions,
                 graph: GraphValidator) -> None:
        self.s = settings
        self.layout = layout
        self.options = options
        self.graph = graph
        self.policy = SyncPolicy(max_file_size=settings.max_file_size)
        self.timeout = settings.timeout.total_seconds()
        self.git = Git(settings.path, timeout=self.timeout)
        self.journal = J.Journal(layout.journal_dir)
        self.state = RootState.load(layout.state_file)
        self.trusted = self.state.trusted_upstream
        self.branch = ""
        self.upstream_branch = ""
        self.tracking = ""
        self.published = False

    def result(self, status: str, message: str, **fields: object) -> R.SyncResult:
        return R.SyncResult(self.s.name, status, message, dry_run=self.options.dry_run,
                            **fields)  # type: ignore[arg-type]

    def record(self, result: R.SyncResult) -> None:
        if result.status in (R.BUSY, R.DISABLED):
            return
        updated = self.state.recorded(result.status, result.message, result.files,
                                      result.head, result.upstream, self.trusted)
        updated.save(self.layout.state_file)

    # -- the cycle ---------------------------------------------------------------------------

    def run(self) -> R.SyncResult:
        try:
            early = self._preflight()
            if early is not None:
                return early
            return self._round(retry_push=True)
        except GitTimeout as exc:
            return self.result(R.OFFLINE, exc.message)
        except GitError as exc:
            return self.result(R.ERROR, exc.message)

    def _preflight(self) -> R.SyncResult | None:
        path = self.s.path
        if not path.is_dir():
            return self.result(R.UNCONFIGURED, f"the root path {path} does not exist")
        top = self.git.toplevel()
        if top is None or top.resolve() != path.resolve():
            return self.result(R.UNCONFIGURED,
                               f"{path} is not the top level of its own Git work tree")
        recover(self.git, self.journal, self.layout, self.policy)
        current = self.git.current_branch()
        self.branch = self.s.branch or current or ""
        if not self.branch:
            return self.result(R.ERROR, "HEAD is detached; check out the root's branch")
        if current != self.branch:
            return self.result(R.ERROR, f"branch {self.branch} is configured but "
                                        f"{current or 'a detached HEAD'} is checked out")
        if self.git.remote_url(self.s.remote) is None:
            return self.result(R.UNCONFIGURED, f"the root has no remote '{self.s.remote}'")
        self.upstream_branch = self.git.upstream_branch(self.branch, self.s.remote)
        self.tracking = f"refs/remotes/{self.s.remote}/{self.upstream_branch}"
        if self.git.rev_parse(f"refs/heads/{self.branch}") is None:
            return self.result(R.ERROR, f"branch {self.branch} has no commits yet")
        entries = self.git.status()
        unmerged = tuple(sorted(e.path for e in entries if e.unmerged))
        if unmerged or self.git.merge_in_progress():
            return self.result(R.CONFLICT, "the root has an unfinished merge; finish or abort "
                                           "it with git", files=unmerged)
        dirty = blocking_changes(entries, self.policy)
        if dirty:
            return self.result(R.DIRTY, f"{len(dirty)} synchronized file(s) have uncommitted "
                                        "edits; commit them (or enable autocommit) to sync",
                               files=dirty)
        return None

    def _round(self, *, retry_push: bool) -> R.SyncResult:
        local = self.git.rev_parse(f"refs/heads/{self.branch}")
        assert local is not None
        outcome, detail = self.git.fetch(self.s.remote, self.upstream_branch, self.tracking,
                                         timeout=self.timeout)
        if outcome is FetchOutcome.UNREACHABLE:
            return self.result(R.OFFLINE, "the upstream could not be reached: "
                                          f"{last_line(detail)}", head=local)
        if outcome is FetchOutcome.BAD_OBJECTS:
            findings = fsck_findings(detail)
            if not findings:
                return self.result(R.ERROR, "the upstream sent objects that failed git's "
                                            f"object check: {last_line(detail)}", head=local)
            problems = tuple(Problem(code, None, None, msg) for code, msg in findings)
            return self.result(R.REJECTED, "refused: the upstream sent trees with forbidden "
                                           "names; nothing was fetched and the root is unchanged",
                               head=local, problems=problems)
        if outcome is FetchOutcome.MISSING_BRANCH:
            self.git.delete_ref(self.tracking)
        fault("after-fetch")
        upstream = self.git.rev_parse(self.tracking) if outcome is FetchOutcome.OK else None
        plan = decide(self._facts(local, upstream), accept_rewrite=self.options.accept_rewrite)
        log.debug("root %s: %s", self.s.name, plan.describe())

        if plan.action is Action.REWOUND:
            ref = None
            if upstream is not None:
                ref = rescue_ref("rewound", upstream)
                self.git.update_ref(ref, upstream, reason="memsync: refused rewound upstream")
            return self.result(R.REWOUND, f"refused: {plan.reason}; the root is unchanged. "
                                          "Inspect the upstream, then rerun with "
                                          "--accept-rewrite to proceed",
                               head=local, upstream=upstream, rescue_ref=ref,
                               plan=plan.describe())
        if plan.action is Action.CURRENT:
            self.trusted = upstream
            return self.result(R.CURRENT, "already up to date", head=local, upstream=upstream,
                               plan=plan.describe())

        admitted: R.SyncResult | None = None
        head = local
        if plan.incoming:
            admitted = self._admit(plan)
            if admitted.status != R.SYNCED:
                return admitted
            head = admitted.head or local
        elif plan.action is Action.AHEAD:
            self.trusted = upstream

        if not plan.outgoing:
            assert admitted is not None
            return admitted
        if not self.s.push or self.options.no_push:
            ahead = len(self.git.rev_list(head, upstream))
            base = admitted or self.result(R.CURRENT, "", head=head, upstream=upstream,
                                           plan=plan.describe())
            note = f"{ahead} local commit(s) not pushed (push is off)"
            return replace(base, message=f"{base.message}; {note}" if base.message else note)
        pushed = self._push(head, upstream if plan.action is not Action.CREATE else None,
                            plan)
        if pushed.status == "retry" and retry_push:
            again = self._round(retry_push=False)
            if again.status == "retry":
                return self.result(R.ERROR, "the upstream rejected the push twice; "
                                            "it is moving fast, try again", head=head)
            return replace(again, message=f"{again.message} (after a rejected push)")
        if pushed.status == "retry":
            return replace(pushed, status=R.ERROR)
        if admitted is not None and pushed.status == R.PUSHED:
            return replace(pushed, files=tuple(sorted({*admitted.files, *pushed.files})),
                           operation_id=admitted.operation_id,
                           message=f"{admitted.message}; {pushed.message}")
        return pushed

    def _facts(self, local: str, upstream: str | None) -> Facts:
        need = questions(local, upstream, self.trusted)
        git = self.git
        if upstream is None or not need:
            return Facts(local, upstream, self.trusted)
        related = git.merge_base(local, upstream) is not None
        return Facts(
            local, upstream, self.trusted,
            local_in_upstream=related and git.is_ancestor(local, upstream),
            upstream_in_local=related and git.is_ancestor(upstream, local),
            trusted_in_upstream=(git.is_ancestor(self.trusted, upstream)
                                 if "trusted_in_upstream" in need and self.trusted else None),
            related=related,
        )

    # -- incoming ----------------------------------------------------------------------------

    def _admit(self, plan: Plan) -> R.SyncResult:
        git, local, upstream = self.git, plan.local, plan.upstream
        assert upstream is not None
        commits = git.rev_list(upstream, local)
        report = validate_changes(git.commit_changes(commits), GitBlobs(git), self.policy)
        if not report.ok:
            return self._refuse(report.problems, upstream, local,
                                f"{len(commits)} incoming commit(s) break the path rules")

        op = self.journal.begin("sync", self.branch, local, upstream)
        try:
            staged = self._stage(op, plan)
            if isinstance(staged, R.SyncResult):
                return staged
            candidate = staged
            git.update_ref(candidate_ref(op.id), candidate, reason="memsync: candidate")
            fault("after-merge")
            tree_report = validate_tree(git.tree_view(candidate), self.policy, self.graph)
            fault("after-validation")
            if not tree_report.ok:
                self.journal.advance(op, J.FAILED, message="candidate failed validation")
                return self._refuse(tree_report.problems, upstream, local,
                                    "the merged candidate breaks the memory rules",
                                    operation_id=op.id)
            files = self._changed(local, candidate)
            if self.options.dry_run:
                self.journal.advance(op, J.NO_CHANGE, message="dry run", files=files)
                return self.result(R.SYNCED, f"dry run: {plan.action.value} to "
                                             f"{candidate[:12]} validated; nothing published",
                                   head=local, upstream=upstream, files=files,
                                   operation_id=op.id, plan=plan.describe())
            op = self.journal.advance(op, J.PREPARED, candidate=candidate, files=files)
            fault("after-prepared")
            try:
                publish(git, Target(self.branch, local, candidate, op.id), self.policy)
            except FenceBroken as fence:
                self.journal.advance(op, J.FAILED, message=fence.message)
                return self.result(fence.status, f"nothing published: {fence.message}",
                                   head=local, upstream=upstream, files=fence.files,
                                   operation_id=op.id)
            op = self.journal.advance(op, J.COMMITTED, message="published")
            fault("after-publish")
        except BaseException:
            # Leave the record for recovery only once publication may have begun.
            latest = self.journal.load(op.id)
            if latest is not None and latest.phase == J.RUNNING:
                self.journal.advance(latest, J.FAILED, message="the cycle failed while staging")
            raise
        finally:
            settled = self.journal.load(op.id)
            if settled is None or settled.phase not in J.UNSETTLED:
                remove_candidate(git, self.layout, op.id)
        self.trusted = upstream
        self.published = True
        how = "fast-forward" if candidate == upstream else "merge"
        return self.result(R.SYNCED, f"published validated upstream state ({how})",
                           head=candidate, upstream=upstream, files=files,
                           operation_id=op.id, plan=plan.describe())

    def _stage(self, op: J.Operation, plan: Plan) -> str | R.SyncResult:
        """The candidate commit: the upstream itself, or a merge made in a candidate worktree."""
        upstream = plan.upstream
        assert upstream is not None
        if plan.action is Action.BEHIND:
            fault("after-staging")
            return upstream
        path = self.layout.worktree(op.id)
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.git.worktree_add(path, plan.local)
        fault("after-staging")
        wt = self.git.at(path)
        args = ["merge", "--no-edit", "--no-ff", "-m",
                f"memsync: merge upstream {upstream[:12]}"]
        if plan.allow_unrelated:
            args.append("--allow-unrelated-histories")
        merged = wt.run(*args, upstream, check=False, config=self.git.identity_config())
        if merged.returncode != 0:
            conflicted = tuple(wt.unmerged_paths())
            message = ("incoming and local edits conflict; the root is unchanged. Resolve by "
                       "merging upstream by hand" if conflicted
                       else f"the merge failed: {merged.stderr.splitlines()[-1:]}")
            self.journal.advance(op, J.FAILED, message=message, files=conflicted)
            return self.result(R.CONFLICT if conflicted else R.ERROR, message,
                               head=plan.local, upstream=upstream, files=conflicted,
                               operation_id=op.id)
        head = wt.rev_parse("HEAD")
        assert head is not None
        return head

    def _refuse(self, problems: tuple, upstream: str, local: str, summary: str,  # type: ignore[type-arg]
                operation_id: str | None = None) -> R.SyncResult:
        ref = rescue_ref("rejected", upstream)
        self.git.update_ref(ref, upstream, reason="memsync: refused upstream")
        codes = ", ".join(sorted({p.code for p in problems}))
        return self.result(R.REJECTED, f"refused: {summary} ({codes}); the root is unchanged",
                           head=local, upstream=upstream, problems=tuple(problems),
                           files=tuple(sorted({p.path for p in problems if p.path})),
                           rescue_ref=ref, operation_id=operation_id)

    def _changed(self, old: str, new: str) -> tuple[str, ...]:
        raw = self.git.run("diff", "--name-only", "-z", "--no-renames", "--no-ext-diff",
                           old, new).stdout
        return tuple(sorted(p.decode("utf-8", "surrogateescape") for p in raw.split(b"\0") if p))

    # -- outgoing ----------------------------------------------------------------------------

    def _push(self, head: str, upstream: str | None, plan: Plan) -> R.SyncResult:
        git = self.git
        commits = git.rev_list(head, upstream)
        report = validate_changes(git.commit_changes(commits), GitBlobs(git), self.policy)
        files = self._changed(upstream, head) if upstream else tuple(
            sorted(git.ls_tree(head)))
        if not report.ok:
            codes = ", ".join(sorted(report.codes()))
            return self.result(R.REJECTED, f"refused to push: {len(commits)} local commit(s) "
                                           f"break the path rules ({codes}); nothing was pushed",
                               head=head, upstream=upstream, problems=report.problems,
                               files=tuple(sorted({p.path for p in report.problems if p.path})))
        if self.options.dry_run:
            return self.result(R.PUSHED, f"dry run: {len(commits)} local commit(s) validated; "
                                         "nothing pushed", head=head, upstream=upstream,
                               files=files, plan=plan.describe())
        op = self.journal.begin("push", self.branch, head, upstream)
        fault("before-push")
        outcome, detail = git.push(self.s.remote, head, self.upstream_branch,
                                   timeout=self.timeout)
        fault("after-push")
        if outcome is PushOutcome.OK:
            self.journal.advance(op, J.COMMITTED, message="pushed", files=files)
            self.trusted = head
            git.update_ref(self.tracking, head, reason="memsync: pushed")
            return self.result(R.PUSHED, f"pushed {len(commits)} validated commit(s)",
                               head=head, upstream=head, files=files, plan=plan.describe())
        self.journal.advance(op, J.FAILED, message=detail.splitlines()[-1] if detail else "")
        if outcome is PushOutcome.REJECTED:
            return self.result("retry", "the upstream rejected the push", head=head)
        return self.result(R.OFFLINE, f"the push did not reach the upstream: {last_line(detail)}",
                           head=head, upstream=upstream)
