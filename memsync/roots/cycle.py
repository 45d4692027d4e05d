"""One sync cycle for one root: preflight, fetch, plan, admit, publish, push.

Runs under the root lock after start-of-cycle recovery. Every refusal returns a result
and leaves the active root exactly as it was; only `publish.publish` moves the branch.
A cycle with nothing to do costs two git processes: status and fetch (refs are read from files);
a daemon cycle on a watched, quiet root reuses its last status (`statusmemo`): the fetch only.
"""

from __future__ import annotations

import contextlib
import functools
import threading
import time
from collections.abc import Callable, Hashable
from pathlib import Path

from memsync import lazylog
from memsync.config.model import RootSettings
from memsync.errors import GitError, GitTimeout, LockBusy, SecretError, UnsafeRepoConfig, require
from memsync.progress import NO_PROGRESS, Progress
from memsync.roots import journal, pause, recovery
from memsync.roots.faults import fault
from memsync.roots.layout import RootLayout, rescue_ref
from memsync.roots.lock import RootLock
from memsync.roots.prefetch import Beside, Prefetch
from memsync.roots.result import OK, SyncResult, SyncStatus
from memsync.roots.state import RootState
from memsync.transports.gitenv import FetchOutcome
from memsync.transports.gitfetch import Fetches
from memsync.transports.process import Deadline
from memsync.transports.workstate import WorkState
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem
from memsync.values import replace, value

TYPE_CHECKING = False  # `typing` loads after the cycle's first git processes start (issue 18)
if TYPE_CHECKING:
    from memsync.roots.admission import SignedAdmission
    from memsync.roots.incoming import Incoming
    from memsync.roots.plan import Facts
    from memsync.roots.push import Outgoing
    from memsync.roots.repairing import RepairMaker, Settler
    from memsync.roots.statusmemo import Seen, StatusMemo
    from memsync.transports.git import Git
    from memsync.validators.graph import GraphValidator

# A one-shot cycle imports what a clean fast-forward uses; the push, the words for a failed
# fetch, the repository-config report and the views' layout load when first needed
# (tests/e2e/test_cold_cycle.py lists what a cold `sync-now` must not import). The gate
# (admission, checks, validators) and the git box's readers (`transports.git`: trees,
# commits, history) load after the cycle's first git processes started, which run on the
# runner and its status and fetch alone (`gitfetch.Fetches`): in a one-shot process, while
# they run (`_Cycle._status_loading_gate`). What the cycle uses only once git has answered
# (the preflight's judgement of the status, the trust anchor, the index's stat data) is
# imported where it is used: nothing the first git processes do not need loads before them.

log = lazylog.logger(__name__)


@value
class SyncOptions:
    """How one cycle runs: what the caller allows (a rewrite, no push, a dry run), how long it
    waits for the root lock, and what it may reuse or show."""

    accept_rewrite: bool = False
    no_push: bool = False
    dry_run: bool = False
    wait: float | None = None  # seconds to wait for the root lock; 0 answers `busy` at once
    # The daemon's automatic cycles: the preflight may reuse the last status (`statusmemo`).
    reuse_status: bool = False
    # Where a cycle run from a terminal shows its fetch and validation (`sync-now`).
    progress: Progress = NO_PROGRESS
    # Makes the root's repair role when a merge conflicts (`cycles.repairer.make_repairer`);
    # every caller that syncs a root with `repair.role` passes it.
    repair: RepairMaker | None = None
    # A one-shot command that exits after its cycles (`sync-now` without a daemon): the
    # pack fold, upkeep, runs in a detached child holding the root lock (`packs.fold_behind`).
    upkeep_behind: bool = False


def sync_root(
    settings: RootSettings,
    state_dir: Path,
    options: SyncOptions,
    graph: Callable[[], GraphValidator] | None = None,
    memo: StatusMemo | None = None,
    watch: Hashable | None = None,
) -> SyncResult:
    """Run one cycle and record its outcome in the root's state file.

    `graph` makes the graph validator (`default_graph_validator` when None), called once
    the cycle's first git processes run, if the cycle needs one. `memo` and `watch` (the
    daemon's: its root's last settled status and its watcher's token, None without one)
    let an automatic cycle reuse that status (`statusmemo`)."""
    started = time.monotonic()
    if not settings.sync_enabled:
        return SyncResult(
            settings.name,
            SyncStatus.DISABLED,
            f"sync is off (roots.{settings.name}.sync.enabled: false)",
        )
    held = pause.holding(state_dir, "root", settings.name)
    if held is not None:  # `memsync pause`: nothing runs, not even a fetch
        return SyncResult(settings.name, SyncStatus.PAUSED, held.describe())
    layout = RootLayout.for_root(state_dir, settings.name)
    try:
        with RootLock(layout.lock_file, wait=options.wait, label=f"root {settings.name}") as lock:
            # Only the daemon hands its memo: a process that lives on, where GitPython's
            # handle and in-process object reads pay for themselves (`GitCore.resident`).
            resident = memo is not None
            cycle = _Cycle(settings, layout, options, graph, resident)
            cycle.memo, cycle.watch = memo, watch
            result = cycle.run()
            if not options.dry_run:
                cycle.record(result)
                cycle.upkeep(result, lock)
    except LockBusy as exc:
        result = SyncResult(settings.name, SyncStatus.BUSY, exc.message)
    return replace(result, duration_ms=int((time.monotonic() - started) * 1000))


class _Cycle:
    def __init__(
        self,
        settings: RootSettings,
        layout: RootLayout,
        options: SyncOptions,
        graph: Callable[[], GraphValidator] | None = None,
        resident: bool = True,
    ) -> None:
        self.settings = settings
        self.layout = layout
        self.options = options
        self.make_graph = graph
        self.policy = SyncPolicy(max_file_size=settings.max_file_size)
        self.timeout = settings.timeout.total_seconds()
        # One deadline for the whole cycle (`sync.timeout`): each git process gets what is left.
        # The fetch and the preflight status run on this box; the rest on `git`, made like it.
        self.box = Fetches(
            settings.path,
            timeout=self.timeout,
            deadline=Deadline.after(self.timeout),
            credentials=settings.git_credentials,  # read at each fetch and push
            resident=resident,
        )
        if not resident:  # a one-shot process: what the config guard read last time, if it holds
            self.box.config_record = layout.config_record
        # What `run` closes: the object session of `git`, entered when it is made.
        self.sessions = contextlib.ExitStack()
        self.journal = journal.Journal(layout.journal_dir)
        self.state = RootState.load(layout.state_file)
        self.trusted = self.state.trusted_upstream
        self.branch = ""
        self.upstream_branch = ""
        self.tracking = ""
        self.start = ""
        self.autocommitted: tuple[str, ...] = ()
        self.repairer: Settler | None = None  # made when a repair role is configured
        self.prefetch: Prefetch | None = None  # the first fetch, beside the preflight status
        # The start tree's shape record, when read while the fetch ran (`_read_start_ahead`).
        self.shape_ahead: str | None = None
        self.reading: threading.Thread | None = None
        # Without a trusted upstream: remote-tracking heads as they were before this cycle
        # fetched (the planner's `seen`); read only when there is no trusted upstream.
        self.before_fetch: dict[str, str | None] = {}
        self.memo: StatusMemo | None = None  # the daemon's, for a status to reuse
        self.watch: Hashable | None = None  # its watcher's token (None: cannot vouch)
        self.seen: Seen | None = None  # this cycle's status, kept when the root is settled

    @functools.cached_property
    def git(self) -> Git:
        """The whole git box, `like` the first one (the same deadline, credentials,
        environment and config record), in one object session for the cycle's reads (one
        `cat-file --batch`) until `run` ends. Made when first needed: in a one-shot cycle,
        once its fetch and status run (`_status_loading_gate`)."""
        from memsync.transports.git import Git  # noqa: PLC0415 - see the note on imports

        git = Git.like(self.box)
        self.sessions.enter_context(git.object_session())
        return git

    @functools.cached_property
    def graph(self) -> GraphValidator:
        """The graph validator, made when first needed (`sync_root`'s `graph`)."""
        if self.make_graph is not None:
            return self.make_graph()
        from memsync.validators.rightmemory import default_graph_validator  # noqa: PLC0415

        return default_graph_validator()

    def result(self, status: SyncStatus, message: str, **fields: object) -> SyncResult:
        name, dry_run = self.settings.name, self.options.dry_run
        return SyncResult(name, status, message, dry_run=dry_run, **fields)  # type: ignore[arg-type]

    def record(self, result: SyncResult) -> None:
        if result.status in (SyncStatus.BUSY, SyncStatus.DISABLED):
            return
        updated = self.state.recorded(
            result.status, result.message, result.files, result.head, result.upstream, self.trusted
        )
        if self.upstream_branch:
            updated = replace(updated, fetch_branch=self.upstream_branch)
        # Only the trusted upstream guards safety; the rest is reporting and may skip fsync.
        durable = updated.trusted_upstream != self.state.trusted_upstream
        updated.save(self.layout.state_file, durable=durable)
        from memsync.roots import anchor  # noqa: PLC0415 - after the cycle (see the note on imports)

        anchor.remember(self.layout.base, self.settings.admission, updated.trusted_upstream)

    # -- the cycle ---------------------------------------------------------------------------

    def run(self) -> SyncResult:
        try:
            with self.sessions:  # `git`'s object session, when it was made
                result = self._run()
        finally:
            if self.prefetch is not None:
                self.prefetch.wait()  # never a fetch running past the cycle (and its lock)
            if self.reading is not None:
                self.reading.join()  # nor a record read
        return result

    def upkeep(self, result: SyncResult, lock: RootLock) -> None:
        """After the cycle and its record, still under the root lock and outside the cycle's
        deadline: fresh stat data for a cheap status when due, and the fold of the packs
        fetches left once there are many (two directory listings otherwise), which a
        one-shot command leaves to a detached child holding the lock (`upkeep_behind`)."""
        if not self.start:  # the root was not a repository with a head
            return
        from memsync.roots import indexstat, packs  # noqa: PLC0415 - after the cycle
        from memsync.transports.git import Git  # noqa: PLC0415 - loaded by now

        after = Git(self.settings.path, timeout=self.timeout, resident=self.box.resident)
        if result.status in OK:  # a refused or dirty root keeps every byte, index too
            indexstat.refresh_when_due(after, self.layout)  # fresh stat data: cheap status
        if self.options.upkeep_behind:
            packs.fold_behind(after, self.timeout, lock)
        else:
            packs.keep_small(after, self.timeout)

    def _run(self) -> SyncResult:
        try:
            early = self._preflight()
            if early is not None:
                return early
            result = self._round(self.start, retry_push=True)
            if self.autocommitted:
                result = replace(
                    result,
                    message=f"autocommitted {len(self.autocommitted)} file(s); {result.message}",
                    files=tuple(sorted({*result.files, *self.autocommitted})),
                )
            return result
        except GitTimeout as exc:
            return self.result(SyncStatus.OFFLINE, exc.message)
        except UnsafeRepoConfig as exc:  # git never ran on the root: nothing changed
            from memsync.transports.repoconfig import CODE  # noqa: PLC0415 - on a refusal only

            problems = tuple(Problem(CODE, where, None, text) for where, text in exc.findings)
            return self.result(SyncStatus.ERROR, exc.message, problems=problems)
        except GitError as exc:
            return self.result(SyncStatus.ERROR, exc.message)
        except SecretError as exc:  # admission.signers unreadable: nothing is admitted
            return self.result(SyncStatus.ERROR, exc.message)

    def _preflight(self) -> SyncResult | None:
        path, remote = self.settings.path, self.settings.remote
        if not path.is_dir():
            return self.result(SyncStatus.UNCONFIGURED, f"the root path {path} does not exist")
        git_dir = self.box.git_dir()
        if git_dir is None:
            return self.result(
                SyncStatus.UNCONFIGURED, f"{path} is not the top level of its own Git work tree"
            )
        if recovery.needed(self.journal, self.layout, git_dir) and not self.options.dry_run:
            recovery.recover(self.git, self.journal, self.layout, self.policy)
        guess = self.state.fetch_branch
        if guess:  # the branch the last cycle fetched: fetch it while git status runs
            self._remember_tracking(f"refs/remotes/{remote}/{guess}")
            self.prefetch = Prefetch(
                self.box,
                remote,
                guess,
                f"refs/remotes/{remote}/{guess}",
                self.options.progress,
                heard=not self.box.resident,  # see `_read_start_ahead`
            )
        # No optional locks: a background cycle must never make a person's `git commit` fail
        # on index.lock (git status with refresh would take it to store stat data).
        # A one-shot cycle needs the whole status too: the branch, its head and upstream, an
        # unfinished merge, and every uncommitted edit anywhere, untracked synchronized
        # files included (`dirty` refuses the sync, autocommit commits them): no cheaper
        # git call answers all of it (`--untracked-files=no` misses new files, `diff-index`
        # the untracked ones, `normal` names only their directories).
        state = self._status(git_dir) if self.box.resident else self._status_loading_gate(git_dir)
        self.branch = self.settings.branch or state.branch or ""
        if not self.branch:
            return self.result(SyncStatus.ERROR, "HEAD is detached; check out the root's branch")
        if state.branch != self.branch:
            return self.result(
                SyncStatus.ERROR,
                f"branch {self.branch} is configured but "
                f"{state.branch or 'a detached HEAD'} is checked out",
            )
        if state.head is None:
            return self.result(SyncStatus.ERROR, f"branch {self.branch} has no commits yet")
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
                SyncStatus.CONFLICT,
                "the root has an unfinished merge; finish or abort it with git",
                files=unmerged,
                head=state.head,
            )
        from memsync.roots.edits import blocking_changes, foreign_staged  # noqa: PLC0415

        dirty = blocking_changes(state.entries, self.policy)
        if dirty and self.settings.autocommit and not self.options.dry_run:
            staged = foreign_staged(state.entries)
            if staged:  # the person's staged version, which committing the work tree would drop
                return self.result(
                    SyncStatus.DIRTY,
                    f"autocommit: nothing committed: {_staged_refusal(staged)}",
                    files=staged,
                    head=state.head,
                )
            return self._autocommit(dirty)
        if dirty:
            return self.result(
                SyncStatus.DIRTY,
                f"{len(dirty)} synchronized file(s) have uncommitted "
                "edits; commit them (or enable autocommit) to sync",
                files=dirty,
                head=state.head,
            )
        if self.memo is not None and self.seen is not None and not self._runtime_tracked():
            self.memo.last = self.seen  # settled: a later quiet cycle may reuse it
        return None

    def _status_loading_gate(self, git_dir: Path) -> WorkState:
        """The preflight's status, run on a thread; once it and the prefetch (when the branch
        is known) run, this thread loads the rest of the git box and the gate's modules and
        makes the whole box (`git`) and the graph validator.
        In a one-shot process those imports cost about what the fetch and the status take,
        and the other core runs git meanwhile. Whatever the loading does, the status is
        waited for before this returns or raises (the prefetch, as always, before `run`
        returns)."""
        status = Beside(lambda told: self._status(git_dir, told), "memsync-status")
        try:
            status.running()  # git runs before the imports take this core
            if self.prefetch is not None:
                self.prefetch.running()
            _ = self.git  # the box's readers, see the note on imports
            from memsync.roots import incoming  # noqa: F401, PLC0415 - the gate, see above

            _ = self.graph
        finally:
            status.wait()
        return status.answer()

    def _runtime_tracked(self) -> bool:
        """Whether the views' runtime directory, which no watch covers, holds a tracked file
        (an edit to it would go unheard): then the status is never reused. Asked only when
        a watcher vouches and the directory exists, after a full status."""
        from memsync.validators.paths import RUNTIME_DIR  # noqa: PLC0415 - the daemon's cycles

        if self.watch is None or not (self.settings.path / RUNTIME_DIR).is_dir():
            return False
        return self.git.tracks_under(RUNTIME_DIR)

    def _status(self, git_dir: Path, on_start: Callable[[int], None] | None = None) -> WorkState:
        """The preflight's status: the memo's when nothing it read can have changed since
        (`statusmemo.may_reuse`), else git's. Only an automatic daemon cycle may reuse one;
        the publication fence always asks git (`publish.check_fence`)."""
        memo = self.memo
        if memo is None or not self.options.reuse_status or self.options.dry_run:
            return self.box.work_state(on_start=on_start)
        from memsync.roots import statusmemo  # noqa: PLC0415 - the daemon's cycles only

        now = statusmemo.marks(git_dir, self.watch)  # before the status: a change during it
        last, memo.last = memo.last, None  # counts as after it
        if last is not None and statusmemo.may_reuse(last, now, time.monotonic()):
            memo.reused += 1
            memo.last = last
            return last.state
        at = time.monotonic()
        state = self.box.work_state(on_start=on_start)
        self.seen = statusmemo.Seen(now, state, at)
        return state

    def _autocommit(self, dirty: tuple[str, ...]) -> SyncResult | None:
        """`sync.autocommit`: the edits become one validated commit through the admission
        transaction (the work tree is not touched; the index only moves from start to the
        commit, and the caller made sure it holds no staged version of its own), then the
        cycle goes on from it.
        None when it landed; else the verdict (edits kept: `dirty` with the problems)."""
        git, start = self.git, self.start

        def stage(op: journal.Operation, worktree: Path) -> str:
            worktree.mkdir(parents=True, exist_ok=True, mode=0o700)
            message = f"memsync: autocommit {len(dirty)} file(s)\n\n" + "\n".join(dirty)
            made = git.commit_paths(start, dirty, message, worktree / "index")
            from memsync.transports.commitsign import sign_commit  # noqa: PLC0415 - autocommit

            return sign_commit(git, made, self.settings.signing)

        from memsync.roots.admit import (  # noqa: PLC0415 - the gate: loaded after the first git
            Admission,
            Admitter,
            Published,
        )
        from memsync.roots.checks import Checks  # noqa: PLC0415 - the same
        from memsync.roots.refused import Fenced, Invalid, Unstaged  # noqa: PLC0415 - the same

        outcome = Admitter(git, self.journal, self.layout, self.policy).admit(
            Admission("autocommit", self.branch, start, in_place=True),
            stage,
            Checks(graph=self.graph),  # a person's edits: no role's grants
        )
        if isinstance(outcome, Published):
            log.info("root %s: autocommitted %d file(s)", self.settings.name, len(outcome.files))
            self.start = outcome.candidate
            self.autocommitted = outcome.files
            return None
        if isinstance(outcome, Invalid):
            problems = outcome.report.problems
            codes = ", ".join(sorted({p.code for p in problems}))
            return self.result(
                SyncStatus.DIRTY,
                f"autocommit refused: the edits break the memory rules ({codes}); they are "
                "kept as they are. Fix them, then sync again",
                files=dirty,
                problems=problems,
                head=start,
                operation_id=outcome.operation_id,
            )
        if isinstance(outcome, Fenced):
            return self.result(
                outcome.fence.status,
                f"autocommit: nothing committed: {outcome.fence.message}",
                files=outcome.fence.files,
                head=start,
            )
        message = outcome.failure.message if isinstance(outcome, Unstaged) else str(outcome)
        return self.result(SyncStatus.ERROR, f"autocommit failed: {message}", head=start)

    def _remember_tracking(self, ref: str) -> None:
        """Keep `ref`'s value from before this cycle's first fetch of it (no trusted state)."""
        if self.trusted is None and ref not in self.before_fetch:
            self.before_fetch[ref] = self.git.ref_value(ref)

    def _fetch(self, local: str) -> tuple[str | None, SyncResult | None]:
        self._remember_tracking(self.tracking)
        prefetched, self.prefetch = self.prefetch, None  # a second round fetches again
        if prefetched is not None and prefetched.branch == self.upstream_branch:
            if prefetched.bringing():
                self._read_start_ahead(local)
            outcome, detail = prefetched.answer()
        else:
            if prefetched is not None:
                prefetched.wait()  # the guess was wrong: it fetched another branch
            outcome, detail = self.git.fetch(
                self.settings.remote,
                self.upstream_branch,
                self.tracking,
                progress=self.options.progress,
            )
        if outcome is FetchOutcome.UNREACHABLE:
            if self.git.remote_url(self.settings.remote) is None:
                return None, self.result(
                    SyncStatus.UNCONFIGURED,
                    f"the root has no remote '{self.settings.remote}'",
                    head=local,
                )
            from memsync.roots.reach import unreachable  # noqa: PLC0415 - on a failure only

            status, message = unreachable(detail, "the upstream could not be reached")
            return None, self.result(status, message, head=local)
        if outcome is FetchOutcome.BAD_OBJECTS:
            # Every object-check refusal carries a code (a name rule, or malformed-object);
            # nothing was fetched, so there is no head to keep under a rescue ref.
            from memsync.transports.gitparse import fsck_findings  # noqa: PLC0415 - a refusal

            problems = tuple(Problem(code, None, None, msg) for code, msg in fsck_findings(detail))
            codes = ", ".join(sorted({p.code for p in problems}))
            return None, self.result(
                SyncStatus.REJECTED,
                f"refused: the upstream sent objects git's object check refuses ({codes}); "
                "nothing was fetched and the root is unchanged",
                head=local,
                problems=problems,
            )
        if outcome is FetchOutcome.MISSING_BRANCH:
            self.git.delete_ref(self.tracking)
            return None, None
        fault("after-fetch")
        return self.git.ref_value(self.tracking), None

    def _read_start_ahead(self, local: str) -> None:
        """A one-shot cycle whose fetch brings objects (git said so, and still runs): the
        start tree's listing and shape records, which an incoming fast-forward's checks
        derive from, are read now, on threads, beside git; read after the fetch they held
        the interpreter while the log was started and the history checked. A fetch that
        brings nothing (a `current` sync) reads none."""
        from memsync.roots.incoming import read_start_ahead  # noqa: PLC0415 - loaded with the gate

        started = read_start_ahead(self.git, local, self.policy)
        if started is not None:
            self.shape_ahead, self.reading = started

    def _round(self, local: str, *, retry_push: bool) -> SyncResult:
        upstream, failed = self._fetch(local)
        if failed is not None:
            return failed
        from memsync.roots.plan import Action, decide  # noqa: PLC0415 - loaded with the gate

        plan = decide(self._facts(local, upstream), accept_rewrite=self.options.accept_rewrite)
        log.debug("root %s: %s", self.settings.name, plan.describe())
        if self.trusted is None and plan.trusted is not None:
            # No trusted state: what the remote-tracking ref held and this root contains is
            # trusted from now on (a refusal holds next cycle; a replay leaves it dropped).
            self.trusted = plan.trusted

        if plan.action is Action.REWOUND:
            ref = None
            if upstream is not None and not self.options.dry_run:
                ref = rescue_ref("rewound", upstream)
                self.git.update_ref(ref, upstream, reason="memsync: refused rewound upstream")
            return self.result(
                SyncStatus.REWOUND,
                f"refused: {plan.reason}; the root is unchanged. "
                "Inspect the upstream, then rerun with "
                "--accept-rewrite to proceed",
                head=local,
                upstream=upstream,
                rescue_ref=ref,
            )
        if plan.action is Action.CURRENT:
            self.trusted = upstream
            return self.result(
                SyncStatus.CURRENT, "already up to date", head=local, upstream=upstream
            )

        admitted: SyncResult | None = None
        head = local
        if plan.incoming:
            admitted = self.incoming.admit(plan)
            if self.repairer is not None and self.repairer.ran:
                # The role had its own time; what follows (the push) gets a cycle's worth.
                self.git.deadline = Deadline.after(self.timeout)
            if admitted.status != SyncStatus.SYNCED:
                return admitted
            if not self.options.dry_run:
                self.trusted = plan.upstream
            head = admitted.head or local
        elif plan.action is Action.AHEAD:
            self.trusted = upstream

        if not plan.outgoing or head == upstream:  # an adopted rewrite may leave none
            return require(admitted, "the admitted result")
        if not self.settings.push or self.options.no_push:
            ahead = len(self.git.rev_list(head, upstream))
            base = admitted or self.result(SyncStatus.CURRENT, "", head=head, upstream=upstream)
            note = f"{ahead} local commit(s) not pushed (push is off)"
            return replace(base, message=f"{base.message}; {note}" if base.message else note)
        pushed = self._push(head, upstream if plan.action is not Action.CREATE else None)
        if pushed is None:  # the upstream moved since the fetch: sync once more, push once more
            if not retry_push:
                return self.result(
                    SyncStatus.ERROR,
                    "the upstream rejected the push twice; it is moving fast, try again",
                    head=head,
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
        if admitted is not None and pushed.status == SyncStatus.PUSHED:
            return replace(
                pushed,
                files=tuple(sorted({*admitted.files, *pushed.files})),
                operation_id=admitted.operation_id,
                message=f"{admitted.message}; {pushed.message}",
            )
        return pushed

    def _facts(self, local: str, upstream: str | None) -> Facts:
        from memsync.roots.plan import Facts, anchor, asks_seen, questions  # noqa: PLC0415

        git = self.git
        seen = None
        previous = self.before_fetch.get(self.tracking)
        if asks_seen(self.trusted, previous) and previous is not None:
            seen = self._seen(local, previous)
        trusted = anchor(self.trusted, seen)
        need = questions(local, upstream, trusted)
        if upstream is None or not need:
            return Facts(local, upstream, self.trusted, seen=seen)
        local_in = git.is_ancestor(local, upstream)
        upstream_in = not local_in and git.is_ancestor(upstream, local)
        related = local_in or upstream_in or git.merge_base(local, upstream) is not None
        trusted_in = None
        if "trusted_in_upstream" in need and trusted is not None:
            # In the steady state the trusted commit is the local head: no second process.
            trusted_in = local_in if trusted == local else git.is_ancestor(trusted, upstream)
        return Facts(
            local,
            upstream,
            self.trusted,
            local_in_upstream=local_in,
            upstream_in_local=upstream_in,
            trusted_in_upstream=trusted_in,
            related=related,
            seen=seen,
        )

    def _seen(self, local: str, previous: str) -> str | None:
        """What `local` shares with the remote-tracking head it had before this fetch: their
        merge base; `previous` itself when there are several (a criss-cross: one base would
        not cover them all, and the upstream must then still hold all of `previous`)."""
        if previous == local:
            return local
        if self.git.rev_parse(previous) is None:  # a ref to an object a power cut lost
            return None
        bases = self.git.merge_bases(local, previous)
        if len(bases) > 1:
            return previous
        return bases[0] if bases else None

    # -- incoming ----------------------------------------------------------------------------

    def _repairer(self) -> Settler:
        """The repair role's runner, made (by the caller's `SyncOptions.repair`, which
        imports the role) when a merge conflicts: a cycle that admits cleanly never loads it."""
        if self.repairer is None:
            make = require(self.options.repair, "SyncOptions.repair for a root with a repair role")
            self.repairer = make(self.settings, self.layout, self.policy, self.graph, self.branch)
        return self.repairer

    @property
    def incoming(self) -> Incoming:
        from memsync.roots.incoming import Incoming  # noqa: PLC0415 - the gate (see above)

        return Incoming(
            self.git,
            self.journal,
            self.layout,
            self.policy,
            self.graph,
            self.branch,
            self.trusted,
            self.options.dry_run,
            self.result,
            self._repairer if self.settings.repair_role is not None else None,
            self.options.progress,
            signing=self.settings.signing,
            admission=self.signed,
            shape_ahead=self.shape_ahead,
        )

    @functools.cached_property
    def signed(self) -> SignedAdmission | None:
        """`admission.require: signed`: the pinned signers, read once per cycle."""
        if self.settings.admission.require != "signed":
            return None  # what `SignedAdmission.of` says, without loading the checks
        from memsync.roots.admission import SignedAdmission  # noqa: PLC0415 - signed roots

        return SignedAdmission.of(self.settings.name, self.settings.admission)

    @property
    def outgoing(self) -> Outgoing:
        from memsync.roots.push import Outgoing  # noqa: PLC0415 - when there is something to push

        return Outgoing(
            self.git,
            self.journal,
            self.policy,
            self.graph,
            self.settings.remote,
            self.branch,
            self.upstream_branch,
            self.signed,
        )

    def _push(self, head: str, upstream: str | None) -> SyncResult | None:
        """The push verdict; None when the upstream rejected it (it moved: retry)."""
        pushed = self.outgoing.push(head, upstream, dry_run=self.options.dry_run)
        if pushed.outcome == "rejected-by-upstream":
            return None
        if pushed.outcome == "pushed":
            self.trusted = head
            self.git.update_ref(self.tracking, head, reason="memsync: pushed")
            return self.result(
                SyncStatus.PUSHED, pushed.message, head=head, upstream=head, files=pushed.files
            )
        status = {
            "refused": SyncStatus.REJECTED,
            "dry-run": SyncStatus.PUSHED,
            "auth-failed": SyncStatus.AUTH_FAILED,
            "host-key-changed": SyncStatus.HOST_KEY_CHANGED,
        }.get(pushed.outcome, SyncStatus.OFFLINE)
        return self.result(
            status,
            pushed.message,
            head=head,
            upstream=upstream,
            files=pushed.files,
            problems=pushed.problems,
        )


def _staged_refusal(staged: tuple[str, ...]) -> str:
    """Why autocommit commits nothing over a person's staged versions (the fence's words)."""
    from memsync.roots.publish import staged_refusal  # noqa: PLC0415 - a refusal only

    return staged_refusal(staged).message
