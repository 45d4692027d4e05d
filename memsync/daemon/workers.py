"""One root's and one view's job in the daemon: what a run does and what follows it.

A `RootWorker` runs a sync cycle in the daemon's thread pool, then records metrics, tells
the hub when it pushed (`notify_hub`) and republishes the root's views when its HEAD moved
(`publish_views`, team server mode). A `ViewWorker` pulls one view. Each owns the `Trigger`
that coalesces every request for it, its interval jobs and (a root) its file watch, and
sees the daemon only through a `context.WorkerContext`. `app.Daemon` decides which workers
to `start`, `retime` (new settings: only the jobs whose interval changed are moved) or
`stop`; the workers do it.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memsync import timefmt
from memsync.config.model import RootSettings
from memsync.config.sections import ViewSettings
from memsync.cycles.repairer import make_repairer
from memsync.daemon import hostkeys
from memsync.daemon.context import Jobs, WorkerContext
from memsync.daemon.triggers import Backoff, Trigger
from memsync.errors import ConfigError, MemsyncError
from memsync.redaction import redact
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.roots.result import SyncResult, SyncStatus
from memsync.roots.statusmemo import StatusMemo
from memsync.secrets import SecretRef, resolve_header
from memsync.tlstrust import no_trust_store
from memsync.transports.git import Git

# What a daemon needs at rest is imported here; the maintenance cycles (`cycles.*`), view
# pulls (`views.*`, with cryptography) and the HTTP client load when a root or view first
# uses them, so an idle daemon without them does not hold their memory (issue 18).
if TYPE_CHECKING:
    from memsync.cycles.turn import CycleResult
    from memsync.daemon.watch import RootWatcher
    from memsync.views.pull import ViewResult

log = logging.getLogger("memsync.daemon")

# What timers, watches and events ask for: these may reuse a quiet root's last status
# (`roots.statusmemo`); a person's `sync-now` asks for other options, so always a full one.
AUTOMATIC = SyncOptions(wait=60.0, reuse_status=True, repair=make_repairer)
# Back off after these; the others wait for a person.
FAILING = frozenset(
    {SyncStatus.OFFLINE, SyncStatus.ERROR, SyncStatus.AUTH_FAILED, SyncStatus.HOST_KEY_CHANGED}
)
VIEW_FAILING = frozenset({"stale", "unavailable"})
CYCLES = ("insight", "prune")
NOTIFY_TIMEOUT = 10.0  # seconds for the whole notification


@dataclass(frozen=True)
class PullOptions:
    """A view pull has no options; one value so requests coalesce."""


PULL = PullOptions()


class RootWorker:
    """One root: its sync trigger and job, its maintenance cycles' triggers and jobs, its
    file watch."""

    def __init__(self, context: WorkerContext, settings: RootSettings) -> None:
        self.context = context
        self.settings = settings
        self.jobs = Jobs(context.scheduler)
        self.trigger: Trigger[SyncOptions, SyncResult] = Trigger(
            f"root {settings.name}", self._run, lambda r: r.status in FAILING, held=self._held
        )
        # After `host-key-changed`: the settings and known_hosts stamp it was seen with.
        self.hold: tuple[RootSettings, hostkeys.Stamp] | None = None
        self.watcher: RootWatcher | None = None
        self.memo = StatusMemo()  # the last settled status, for quiet automatic cycles
        self._memo_for = settings  # a new configuration starts a new memo
        self.task: asyncio.Task[None] | None = None
        self.event_at: float | None = None  # when a hub event last asked for a sync
        # One trigger per maintenance cycle; the request's value is `force`.
        self.cycles: dict[str, Trigger[bool, CycleResult]] = {
            kind: Trigger(
                f"{kind} {settings.name}",
                functools.partial(self._cycle, kind),
                # A refused turn (its write broke a grant or the gate) backs off like a
                # failed one: asking the model again at once would get the same answer.
                _cycle_failing,
                backoff=Backoff(base=60.0, cap=3600.0),
            )
            for kind in CYCLES
        }

    # -- life cycle ------------------------------------------------------------------------

    def start(self) -> None:
        """Serve the triggers, catch up at once, then keep time and watch."""
        spawn, name = self.context.spawn, self.settings.name
        self.task = spawn(self.trigger.serve(), f"root-{name}")
        for kind, cycle in self.cycles.items():
            spawn(cycle.serve(), f"{kind}-{name}")
        self.trigger.request(AUTOMATIC)  # catch up at start
        self._keep_time()

    def retime(self, settings: RootSettings) -> None:
        """Run with `settings` from now on: jobs whose interval changed are moved, the watch
        follows `watch` and the path (and is tried again when the path was not a directory)."""
        if settings != self.settings:
            if self.watcher is not None and self.settings.path != settings.path:
                self.watcher.stop()
                self.watcher = None
            self.settings = settings
        self._keep_time()

    def stop(self) -> None:
        """No more runs (a running one finishes), no job, no watch."""
        self.trigger.close()
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        for cycle in self.cycles.values():
            cycle.close()
        self.jobs.drop_all()

    def _keep_time(self) -> None:
        root, name = self.settings, self.settings.name
        for kind, cycle in self.cycles.items():
            every = root.insight_check_every if kind == "insight" else root.prune_check_every
            if self.enabled(kind):
                self.jobs.every(f"{kind}:{name}", every.total_seconds(), cycle, False)
            else:
                self.jobs.drop(f"{kind}:{name}")
        if root.sync_enabled:
            self.jobs.every(f"sync:{name}", root.interval.total_seconds(), self.trigger, AUTOMATIC)
        else:
            self.jobs.drop(f"sync:{name}")
        if root.watch and self.watcher is None and root.path.is_dir():
            from memsync.daemon.watch import RootWatcher  # noqa: PLC0415 - watched roots only

            self.watcher = RootWatcher(
                root.path,
                self.context.watches(),
                _requester(self.trigger),
                asyncio.get_running_loop(),
            )
            self.watcher.start()
        elif not root.watch and self.watcher is not None:
            self.watcher.stop()
            self.watcher = None

    # -- runs ------------------------------------------------------------------------------

    def _held(self) -> bool:
        """Automatic syncs wait after `host-key-changed` until the root's configuration or
        a known_hosts file changes."""
        if self.hold is not None and self.hold != (self.settings, hostkeys.stamp(self.settings)):
            self.hold = None
        return self.hold is not None

    def enabled(self, kind: str) -> bool:
        return self.settings.insight_enabled if kind == "insight" else self.settings.prune_enabled

    async def _cycle(self, kind: str, force: bool) -> CycleResult:
        from memsync.cycles.runner import cycle_now  # noqa: PLC0415 - cycles load when used
        from memsync.cycles.turn import LANDED, NOT_DUE  # noqa: PLC0415

        loop = asyncio.get_running_loop()
        context = self.context
        run = functools.partial(
            cycle_now, context.settings(), self.settings.name, kind, force=force, push=False
        )
        result = await loop.run_in_executor(context.pool, run)
        context.metrics.cycle_total.labels(self.settings.name, kind, result.status).inc()
        if result.status != NOT_DUE:
            level = logging.INFO if result.ok else logging.WARNING
            log.log(level, "root %s: %s", self.settings.name, result.message)
        if result.status == LANDED:
            self.trigger.request(AUTOMATIC, explicit=True)  # validate, push and notify it
        return result

    async def _run(self, options: SyncOptions) -> SyncResult:
        loop = asyncio.get_running_loop()
        context = self.context
        settings, state_dir = self.settings, context.settings().state_dir
        if self._memo_for is not settings:
            self.memo, self._memo_for = StatusMemo(), settings
        seen = (settings, hostkeys.stamp(settings))  # before: a fix made meanwhile counts
        # Read on the loop, where the watcher counts its events, before the cycle's status.
        watch = self.watcher.token() if self.watcher is not None else None
        run = functools.partial(
            sync_root, settings, state_dir, options, memo=self.memo, watch=watch
        )
        result = await loop.run_in_executor(context.pool, run)
        self.hold = seen if result.status == SyncStatus.HOST_KEY_CHANGED else None
        context.synced(result)
        metrics = context.metrics
        if result.status == SyncStatus.SYNCED and self.event_at is not None:
            metrics.propagation.observe(time.monotonic() - self.event_at)
            self.event_at = None
        behind = 0
        far = result.head and result.upstream and result.head != result.upstream
        if metrics.served and not result.ok and far:  # a git process for the gauge only
            behind = await loop.run_in_executor(context.pool, _behind, settings, result)
        metrics.behind.labels(settings.name).set(behind)
        if result.status == SyncStatus.PUSHED and settings.notify_hub and result.head:
            await notify_hub(settings, result.head)
        moved = result.status in (SyncStatus.SYNCED, SyncStatus.PUSHED) and not result.dry_run
        if moved and settings.publish:
            await publish_views(settings)
        if moved:  # new commits may make a maintenance cycle due
            for kind, cycle in self.cycles.items():
                if self.enabled(kind):
                    cycle.request(False)
        return result


def _requester(trigger: Trigger[SyncOptions, SyncResult]) -> Callable[[], None]:
    def request() -> None:
        trigger.request(AUTOMATIC)

    return request


def _cycle_failing(result: CycleResult) -> bool:
    from memsync.cycles.turn import FAILED, REFUSED  # noqa: PLC0415 - loaded by the cycle

    return result.status in (FAILED, REFUSED)


async def publish_views(settings: RootSettings) -> None:
    """Team server mode: the root's HEAD moved, so its views are rebuilt and published
    (nothing new when the content is unchanged); a failure is logged, never fatal."""
    with no_trust_store():  # (aiohttp's context for ssl=False: see tlstrust.py)
        from memsync.views.keys import load_private_key  # noqa: PLC0415 - only providers
        from memsync.views.publish import publish_view  # noqa: PLC0415

    for index, entry in enumerate(settings.publish):
        try:
            key = load_private_key(_key_path(entry.key))
            done = await publish_view(
                settings.path,
                entry.view,
                entry.hub,
                resolve_header(entry.token, where=f"roots.{settings.name}.publish[{index}].token"),
                [key],
            )
            log.info("root %s: view %s: %s", settings.name, entry.view, done.message)
        except MemsyncError as exc:
            log.warning(
                "root %s: publishing view %s failed: %s", settings.name, entry.view, exc.message
            )
        except (OSError, ValueError) as exc:
            log.warning(
                "root %s: publishing view %s failed: %s",
                settings.name,
                entry.view,
                redact(str(exc)),
            )


def _key_path(ref: SecretRef) -> Path:
    if ref.kind == "file":
        return Path(ref.ref).expanduser()
    if ref.kind == "credential":
        return Path(os.environ.get("CREDENTIALS_DIRECTORY", "")) / ref.ref
    raise ConfigError(
        f"a publish key must be {{file: PATH}} or {{credential: NAME}}, not {ref.describe()}"
    )


async def notify_hub(settings: RootSettings, commit: str) -> None:
    """Tell the hub the upstream moved, so its subscribers sync at once; never fails a cycle.

    Through the hub client: the token only over https (or loopback http), no redirect."""
    where = f"roots.{settings.name}.sync.notify.token"
    token = resolve_token(settings.notify_token, where)
    if settings.notify_token is not None and token is None:
        return  # logged: a notification without its token would only be refused
    with no_trust_store():  # (aiohttp's context for ssl=False: see tlstrust.py)
        from memsync.transports.http import HttpError  # noqa: PLC0415 - used rarely
        from memsync.transports.hubclient import HubClient  # noqa: PLC0415

    deadline = asyncio.get_running_loop().time() + NOTIFY_TIMEOUT
    root = settings.notify_root or settings.name
    try:
        async with HubClient() as hub:
            status = await hub.notify(
                settings.notify_hub or "", root, commit, token=token, deadline=deadline
            )
    except HttpError as exc:
        log.warning("root %s: could not notify the hub: %s", settings.name, exc.message)
        return
    if status >= 300:
        log.warning("root %s: the hub refused the notification (%d)", settings.name, status)


class ViewWorker:
    """One view: its pull trigger and its refresh job."""

    def __init__(self, context: WorkerContext, settings: ViewSettings) -> None:
        self.context = context
        self.settings = settings
        self.jobs = Jobs(context.scheduler)
        self.trigger: Trigger[PullOptions, ViewResult] = Trigger(
            f"view {settings.name}",
            self._run,
            lambda r: r.status in VIEW_FAILING,
            backoff=Backoff(base=5.0, cap=600.0),
        )
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Serve the trigger, pull at once, then keep time."""
        self.task = self.context.spawn(self.trigger.serve(), f"view-{self.settings.name}")
        self.trigger.request(PULL)
        self._keep_time()

    def retime(self, settings: ViewSettings) -> None:
        """Pull with `settings` from now on; the job moves only when `refresh` changed."""
        self.settings = settings
        self._keep_time()

    def stop(self) -> None:
        self.trigger.close()
        self.jobs.drop_all()

    def _keep_time(self) -> None:
        view = self.settings
        self.jobs.every(f"view:{view.name}", view.refresh.total_seconds(), self.trigger, PULL)

    async def _run(self, options: PullOptions) -> ViewResult:
        with no_trust_store():  # (aiohttp's context for ssl=False: see tlstrust.py)
            from memsync.views.pull import pull_views  # noqa: PLC0415 - views load when used
            from memsync.views.trust import TrustState, trust_path  # noqa: PLC0415

        context = self.context
        state_dir = context.settings().state_dir
        (result,) = await pull_views([self.settings], state_dir)
        context.pulled(result)
        metrics = context.metrics
        metrics.observe_view(result)
        if result.revision is not None:
            metrics.view_revision.labels(self.settings.name).set(result.revision)
        fetched = timefmt.parse(
            TrustState.load(trust_path(state_dir, self.settings.name)).fetched_at
        )
        if fetched is not None:
            stamp = fetched.timestamp()
            metrics.view_age.labels(self.settings.name).set_function(lambda: time.time() - stamp)
        return result


def _behind(settings: RootSettings, result: SyncResult) -> int:
    """Upstream commits not published in the root (only asked when a cycle was not ok)."""
    try:
        git = Git(settings.path, timeout=10)
        return len(git.rev_list(result.upstream or "", result.head))
    except MemsyncError:
        return 0


def resolve_token(ref: SecretRef | None, where: str = "a hub token") -> str | None:
    """A token for a hub request, read now (`resolve_header`: one line of printable ASCII);
    None, with a warning naming `where` (the config key, never the value), when it cannot be
    read or could not go in a header."""
    if ref is None:
        return None
    try:
        return resolve_header(ref, where=where)
    except ConfigError as exc:
        message = exc.message if exc.message.startswith(where) else f"{where}: {exc.message}"
        log.warning("cannot use a hub token: %s", message)
        return None
