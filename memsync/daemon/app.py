"""The daemon (`memsync run`): one asyncio loop that keeps every root and view in step.

Start-up recovers every root's journal before `READY=1`. Each root and each view has one
`Trigger`: the schedule (APScheduler interval jobs, jittered, coalesced), watchdog events,
hub events and control-socket requests all feed it, and a burst runs at most one more job.
Sync cycles run in a small thread pool (the blocking `roots.cycle.sync_root`, under the
same cross-process root lock the CLI takes, bounded by `sync.timeout`); view pulls run on
the loop. A failing root or view backs off and never stops the others. `SIGTERM` lets the
running cycles finish, says `STOPPING=1` and exits 0; `SIGHUP` re-reads the config and keeps
the old one when the new one does not validate. Reloads run one at a time on their own
thread (a burst of SIGHUPs during a reload runs one more), never on the threads that answer
the control socket, so a config path that cannot be read never starves `status`.

Ready (`/readyz`, CONTRACT §6) means every configured root and view has finished (or
failed) its first cycle since it was configured, every root's last cycle was ok, and no
view is unavailable or past its `max_stale`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from memsync import __version__, timefmt
from memsync.config.model import RootSettings, Settings
from memsync.config.sections import HttpSourceSettings, ViewSettings
from memsync.config.statedir import ensure_state_dir
from memsync.cycles.repairer import make_repairer
from memsync.cycles.rolegroups import RoleGroups
from memsync.daemon import transitions
from memsync.daemon.context import WorkerContext
from memsync.daemon.control import Answer, ControlSocket, claim
from memsync.daemon.hooks import Hooks
from memsync.daemon.listen import listen_error
from memsync.daemon.metrics import Metrics, health_app
from memsync.daemon.notify import Notifier
from memsync.daemon.pause import PauseDesk
from memsync.daemon.transitions import Transitions
from memsync.daemon.triggers import Trigger
from memsync.daemon.workers import (
    AUTOMATIC,
    PullOptions,
    RootWorker,
    ViewWorker,
    resolve_token,
)
from memsync.errors import ConfigError, MemsyncError, UsageError, format_problem
from memsync.roots import recovery
from memsync.roots.cycle import SyncOptions
from memsync.roots.journal import Journal
from memsync.roots.layout import RootLayout
from memsync.roots.lock import RootLock
from memsync.roots.result import HELD, SyncResult
from memsync.status import config_name, status_document
from memsync.tlstrust import no_trust_store
from memsync.transports.git import Git
from memsync.transports.hubclient import events_name_root, view_events_url
from memsync.validators.policy import SyncPolicy
from memsync.wire import documents
from memsync.wire.requests import CycleRequest, PullRequest, SyncRequest

if TYPE_CHECKING:  # the event stream, view pulls, aiohttp, pydantic: when used (issue 18)
    from aiohttp import web

    from memsync.daemon.events import Event
    from memsync.daemon.watch import Watches
    from memsync.views.pull import ViewResult
    from memsync.wire.pause import PauseRequest, ResumeRequest

log = logging.getLogger("memsync.daemon")

MAX_WORKERS = 4
# `asyncio.to_thread` (start-up recovery, view pulls, pauses): a fixed bound, not the
# machine's (Python's default grows with the cores) nor the number of roots.
IO_WORKERS = 8


class Daemon:
    """The long-running process. `load` re-reads and validates the config (SIGHUP)."""

    def __init__(self, settings: Settings, load: Callable[[], Settings]) -> None:
        self.settings = settings
        self._load = load
        self.pool = ThreadPoolExecutor(
            max_workers=max(2, min(MAX_WORKERS, len(settings.roots))),
            thread_name_prefix="cycle",
        )
        # Reloads have their own thread: one at a time, never the control socket's.
        self._reloader = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reload")
        self._reloading: asyncio.Task[None] | None = None
        self._reload_again = False
        self.metrics = Metrics(served=bool(settings.http_listen))  # read on http.listen only
        self.notifier = Notifier.from_env()
        self.roots: dict[str, RootWorker] = {}
        self.views: dict[str, ViewWorker] = {}
        # Every result passes here: a status change is logged once and runs the hooks.
        self.transitions = Transitions()
        self.hooks = Hooks(settings.hooks, settings.state_dir)
        self.started = time.time()
        self._stop = asyncio.Event()
        self._tasks: asyncio.TaskGroup | None = None
        self._followers: dict[tuple[str, str | None], asyncio.Task[None]] = {}
        self._connected: dict[str, bool] = {}
        self._scheduler: AsyncIOScheduler | None = None
        self._context: WorkerContext | None = None  # what the workers see of us, in run()
        self._observer: Watches | None = None  # the first watched root starts it
        self._loop: asyncio.AbstractEventLoop | None = None
        self.pauses = PauseDesk(
            lambda: self.settings.state_dir,
            lambda: (list(self.roots), list(self.views)),
            self._wake,
            self.metrics.registry,
        )

    # -- life cycle ------------------------------------------------------------------------

    async def run(self) -> int:
        loop = self._loop = asyncio.get_running_loop()
        loop.set_default_executor(ThreadPoolExecutor(IO_WORKERS, thread_name_prefix="io"))
        ensure_state_dir(self.settings.state_dir)
        claim(self.settings.control_socket)  # a misplaced socket stops us before any work
        await asyncio.gather(
            *(asyncio.to_thread(_recover, r, self.settings.state_dir) for r in self.settings.roots)
        )
        control = await ControlSocket.start(self.settings.control_socket, self)
        try:
            health = await self._start_health()
        except BaseException:
            await control.stop()  # a taken http.listen ends the start-up: leave no socket
            raise
        for sig, action in (
            (signal.SIGTERM, self._stop.set),
            (signal.SIGINT, self._stop.set),
            (signal.SIGHUP, self.hangup),
        ):
            loop.add_signal_handler(sig, action)
        self._scheduler = AsyncIOScheduler(event_loop=loop)
        try:
            async with asyncio.TaskGroup() as tasks:
                self._tasks = tasks
                self._context = WorkerContext(
                    pool=self.pool,
                    metrics=self.metrics,
                    settings=lambda: self.settings,
                    synced=self.observed,
                    pulled=self.observed_view,
                    spawn=lambda coro, name: tasks.create_task(coro, name=name),
                    scheduler=self._scheduler,
                    watches=self._watches,
                )
                self._apply(self.settings)
                self.pauses.start()
                self._scheduler.start()
                keepalive = tasks.create_task(self._keepalive())
                hooks = tasks.create_task(self.hooks.serve(), name="hooks")
                self.notifier.ready(self._summary())
                log.info(
                    "memsync %s running: %d root(s), %d view(s); control socket %s",
                    __version__,
                    len(self.roots),
                    len(self.views),
                    self.settings.control_socket,
                )
                await self._stop.wait()
                self.notifier.stopping()
                log.info("stopping: letting running cycles finish")
                keepalive.cancel()
                self.pauses.close()
                hooks.cancel()  # a hook's command thread ends at its own deadline
                for task in self._followers.values():
                    task.cancel()
                for root in self.roots.values():
                    self._drop(root)
                for view in self.views.values():
                    self._drop(view)
                self._scheduler.shutdown(wait=False)
        finally:
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                loop.remove_signal_handler(sig)
            if self._observer is not None:
                self._observer.stop()
            await control.stop()
            if health is not None:
                await health.cleanup()
            if self._reloading is not None:
                self._reloading.cancel()
            self._reloader.shutdown(wait=False, cancel_futures=True)
            self.pool.shutdown(wait=True)
        log.info("stopped")
        return 0

    def stop(self) -> None:
        self._stop.set()

    def hangup(self) -> None:
        """SIGHUP: start a reload, or ask the running one for one more (bursts coalesce)."""
        if self._reloading is not None and not self._reloading.done():
            self._reload_again = True
            return
        self._reloading = asyncio.get_running_loop().create_task(self._reloads())

    async def _reloads(self) -> None:
        while True:
            self._reload_again = False
            try:
                await self.reload()
            except Exception:  # a bug in a reload must not end the daemon, nor go unsaid
                log.exception("reload failed, keeping the running configuration")
                self.notifier.ready(self._summary())
            if not self._reload_again:
                return

    async def reload(self) -> None:
        """Re-read the config; keep the old one when the new one is invalid."""
        self.notifier.reloading()
        loop = asyncio.get_running_loop()
        try:
            fresh = await loop.run_in_executor(self._reloader, self._load)
        except MemsyncError as exc:
            _refused(exc)
            self.notifier.ready(self._summary())
            return
        if fresh.control_socket != self.settings.control_socket:
            log.warning(
                "control.socket changes only on restart; keeping %s", self.settings.control_socket
            )
            fresh = replace(fresh, control_socket=self.settings.control_socket)
        self.settings = fresh
        self.hooks.configure(fresh.hooks, fresh.state_dir)
        self._apply(fresh)
        log.info("configuration reloaded: %d root(s), %d view(s)", len(self.roots), len(self.views))
        self.notifier.ready(self._summary())

    def _apply(self, settings: Settings) -> None:
        """Start, re-time or drop workers so that they match `settings`."""
        context = self._context
        assert context is not None  # noqa: S101 - set by run()
        wanted_roots = {r.name: r for r in settings.roots}
        for name in list(self.roots):
            if name not in wanted_roots:
                self._drop(self.roots.pop(name))
        for name, root in wanted_roots.items():
            worker = self.roots.get(name)
            if worker is None:
                self.roots[name] = worker = RootWorker(context, root)
                worker.start()
            else:
                worker.retime(root)
        wanted_views = {v.name: v for v in settings.views}
        for name in list(self.views):
            if name not in wanted_views:
                self._drop(self.views.pop(name))
        for name, view in wanted_views.items():
            vworker = self.views.get(name)
            if vworker is None:
                self.views[name] = vworker = ViewWorker(context, view)
                vworker.start()
            else:
                vworker.retime(view)
        self._follow_events(settings)

    def _drop(self, worker: RootWorker | ViewWorker) -> None:
        worker.stop()
        what: transitions.Kind = "root" if isinstance(worker, RootWorker) else "view"
        self.transitions.forget(what, worker.settings.name)

    async def _keepalive(self) -> None:
        """`WATCHDOG=1` at half of `WATCHDOG_USEC`, only while the loop runs; `STATUS=`."""
        interval = self.notifier.watchdog_interval() or 30.0
        while True:
            self.notifier.watchdog()
            self.notifier.status(self._summary())
            await asyncio.sleep(interval)

    def _watches(self) -> Watches:
        """The inotify watches of every root, made and started when a root with `watch` first
        asks: a daemon none of whose roots watches loads no watchdog and runs no reader."""
        if self._observer is None:
            from memsync.daemon.watch import new_observer  # noqa: PLC0415 - watched roots only

            self._observer = new_observer()
            self._observer.start()
        return self._observer

    async def _start_health(self) -> web.AppRunner | None:
        if not self.settings.http_listen:
            return None
        with no_trust_store():  # (aiohttp's context for ssl=False: see tlstrust.py)
            from aiohttp import web  # noqa: PLC0415 - only a daemon with `http.listen` serves

        host, _, port = self.settings.http_listen.rpartition(":")
        runner = web.AppRunner(health_app(self.metrics, self.readiness), access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, host.strip("[]") or "127.0.0.1", int(port)).start()
        except OSError as exc:
            await runner.cleanup()
            raise listen_error("http.listen", self.settings.http_listen, exc) from exc
        return runner

    # -- events ----------------------------------------------------------------------------

    def _follow_events(self, settings: Settings) -> None:
        """One stream per (URL, token): roots' `sync.events`, and the hubs views come from."""
        wanted: dict[tuple[str, str | None], None] = {}
        for root in settings.roots:
            if root.events:
                where = f"roots.{root.name}.sync.events_token"
                wanted[(root.events, resolve_token(root.events_token, where))] = None
        for view in settings.views:
            url = _view_events_url(view)
            if url is not None and isinstance(view.source, HttpSourceSettings):
                where = f"views.{view.name}.source.token"
                wanted[(url, resolve_token(view.source.token, where))] = None
        for key in list(self._followers):
            if key not in wanted:
                self._followers.pop(key).cancel()
        tasks = self._tasks
        assert tasks is not None  # noqa: S101
        for key in wanted:
            if key not in self._followers:
                with no_trust_store():  # (aiohttp's context for ssl=False: tlstrust.py)
                    from memsync.daemon.events import follow  # noqa: PLC0415 - when configured

                url, token = key
                self._followers[key] = tasks.create_task(
                    follow(
                        url,
                        token,
                        self._on_event,
                        connected=lambda up, u=url: self._stream(u, up),  # type: ignore[misc]
                    ),
                    name=f"events-{len(self._followers)}",
                )

    def _stream(self, url: str, up: bool) -> None:
        source = urlsplit(url).netloc
        self._connected[url] = up
        self.metrics.stream_connected.labels(source).set(1 if up else 0)

    def _on_event(self, event: Event) -> None:
        if event.kind == "upstream":
            hub_root = str(event.data.get("root", ""))
            for worker in self.roots.values():
                events = worker.settings.events
                if events and events_name_root(events, hub_root):
                    log.info(
                        "hub event: upstream %s moved; syncing root %s",
                        hub_root,
                        worker.settings.name,
                    )
                    worker.event_at = time.monotonic()
                    worker.trigger.request(AUTOMATIC, explicit=True)
        elif event.kind == "revision":
            view_id = str(event.data.get("view_id", ""))
            for vworker in self.views.values():
                if vworker.settings.view_id == view_id and _view_events_url(vworker.settings):
                    log.info(
                        "hub event: view %s has revision %s", view_id, event.data.get("revision")
                    )
                    vworker.trigger.request(PullOptions(), explicit=True)

    # -- results and the control socket ------------------------------------------------------

    def observed(self, result: SyncResult) -> None:
        self.metrics.observe_sync(result)
        if result.dry_run:  # a plan, not a state the root is in
            return
        document = documents.sync_result_document(result.document())
        self._changed(
            self.transitions.observe("root", result.root, result.status, result.message, document)
        )

    def observed_view(self, result: ViewResult) -> None:
        document = result.model().model_dump(mode="json")
        self._changed(
            self.transitions.observe("view", result.view, result.status, result.message, document)
        )

    def _changed(self, transition: transitions.Transition | None) -> None:
        """Log a status change once and hand it to the hooks (they never block a cycle)."""
        if transition is None:
            return
        transitions.log(log, transition)
        self.hooks.offer(transition)

    def unready(self) -> list[str]:
        """What keeps the daemon unready, from what its workers hold (no file read)."""
        reasons: list[str] = []
        for name, worker in self.roots.items():
            trigger = worker.trigger
            last = trigger.last
            if trigger.runs == 0:
                reasons.append(f"root {name}: first cycle not finished")
            elif trigger.error is not None:
                reasons.append(f"root {name}: error: {trigger.error}")
            elif last is not None and not last.ok and last.status not in HELD:
                reasons.append(f"root {name}: {last.status}")
        for name, vworker in self.views.items():
            vtrigger = vworker.trigger
            last_view = vtrigger.last
            if vtrigger.runs == 0:
                reasons.append(f"view {name}: first pull not finished")
            elif vtrigger.error is not None:
                reasons.append(f"view {name}: error: {vtrigger.error}")
            elif last_view is not None and last_view.status == "unavailable":
                reasons.append(f"view {name}: unavailable")
        return reasons

    async def readiness(self) -> list[str]:
        """`/readyz`: `unready()`, and the views past their `max_stale` (trust records)."""
        reasons = self.unready()
        judged = {r.split(":", 1)[0] for r in reasons}
        views = [v.settings for n, v in self.views.items() if f"view {n}" not in judged]
        stale = await asyncio.to_thread(_past_max_stale, views, self.settings.state_dir)
        return reasons + [f"view {name}: past max_stale ({age})" for name, age in stale]

    async def status(self) -> Answer:
        document = await asyncio.to_thread(status_document, self.settings)
        document["daemon"] = self._daemon_block()
        return documents.status_report(document)

    async def daemon(self) -> Answer:
        """`GET /v1/daemon`: the daemon block alone (no file read, no git)."""
        return documents.daemon_status(self._daemon_block())

    def _daemon_block(self) -> dict[str, Any]:
        """The `DaemonStatus` model's document, keys in its order."""
        return {
            "running": True,
            "pid": os.getpid(),
            "version": __version__,
            "started_at": timefmt.rfc3339(timefmt.from_timestamp(self.started)),
            "uptime_seconds": int(time.time() - self.started),
            "schedule": self._schedule(),
            "config": config_name(self.settings.config_path),
            "other_config": None,
        }

    def _schedule(self) -> list[dict[str, Any]]:
        """The `ScheduleEntry` models' documents."""
        entries: list[dict[str, Any]] = []
        loop_now = asyncio.get_running_loop().time()
        wall_now = time.time()
        jobs = {job.id: job for job in self._scheduler.get_jobs()} if self._scheduler else {}
        listed: list[tuple[str, str, Trigger]] = [  # type: ignore[type-arg]
            *(("root", name, w.trigger) for name, w in self.roots.items()),
            *(("view", name, w.trigger) for name, w in self.views.items()),
        ]
        for kind, name, trigger in listed:
            job = jobs.get(f"{'sync' if kind == 'root' else 'view'}:{name}")
            backoff = trigger.backoff
            entries.append(
                {
                    "kind": kind,
                    "name": name,
                    "next_run_at": timefmt.rfc3339(job.next_run_time)
                    if job and job.next_run_time
                    else None,
                    "running": trigger.running is not None,
                    "failures": backoff.failures,
                    "backoff_until": timefmt.rfc3339(
                        timefmt.from_timestamp(wall_now + backoff.wait(loop_now))
                    )
                    if backoff.wait(loop_now) > 0
                    else None,
                    "held": trigger.held(),
                }
            )
        return entries

    async def sync(self, request: SyncRequest) -> Answer:
        names = request.roots or list(self.roots)
        unknown = [n for n in names if n not in self.roots]
        if unknown:
            raise UsageError(f"unknown root(s): {', '.join(unknown)}")
        options = SyncOptions(
            accept_rewrite=request.accept_rewrite,
            no_push=request.no_push,
            dry_run=request.dry_run,
            wait=AUTOMATIC.wait,
            repair=make_repairer,
        )
        # shield: a client that disconnects does not cancel a cycle others may share.
        futures = [
            asyncio.shield(self.roots[n].trigger.request(options, explicit=True)) for n in names
        ]
        results = await asyncio.gather(*futures)
        return documents.sync_report(r.document() for r in results)

    async def cycle(self, kind: str, request: CycleRequest) -> Answer:
        worker = self.roots.get(request.root)
        if worker is None or kind not in worker.cycles:
            raise UsageError(f"unknown root {request.root!r} or cycle {kind!r}")
        result = await asyncio.shield(worker.cycles[kind].request(request.force, explicit=True))
        return result.model()

    async def pull(self, request: PullRequest) -> Answer:
        names = request.views or list(self.views)
        unknown = [n for n in names if n not in self.views]
        if unknown:
            raise UsageError(f"unknown view(s): {', '.join(unknown)}")
        futures = [
            asyncio.shield(self.views[n].trigger.request(PullOptions(), explicit=True))
            for n in names
        ]
        results = await asyncio.gather(*futures)
        if not results:  # no view configured: the empty report, without the models
            return documents.Answer.of({"results": []})
        from memsync.wire.cli import ViewsPullReport  # noqa: PLC0415 - views only

        return ViewsPullReport(results=[r.model() for r in results])

    async def pause(self, request: PauseRequest) -> Answer:
        return await self.pauses.pause(request)

    async def resume(self, request: ResumeRequest) -> Answer:
        return await self.pauses.resume(request)

    def _wake(self, kind: str, name: str) -> None:
        """One cycle now for a root or view a pause held (resumed, or its time ran out)."""
        if kind == "root" and name in self.roots:
            self.roots[name].trigger.request(AUTOMATIC, explicit=True)
        elif kind == "view" and name in self.views:
            self.views[name].trigger.request(PullOptions(), explicit=True)

    def _summary(self) -> str:
        bad = self.unready()
        head = f"{len(self.roots)} root(s), {len(self.views)} view(s)"
        return f"{head}; {len(bad)} not ok: {'; '.join(bad)[:120]}" if bad else f"{head}; all ok"


def _refused(exc: MemsyncError) -> None:
    """A refused reload: what was wrong, then every problem on its own line (a journal line
    is one record), each with its file, line and location."""
    problems = exc.problems if isinstance(exc, ConfigError) else ()
    source = exc.source if isinstance(exc, ConfigError) else None
    said = [format_problem(p, source) for p in problems]
    context = {"event": "reload-refused", "fields": {"problems": said}}
    log.error(
        "reload refused, keeping the running configuration: %s",
        exc.message,
        extra={"memsync": context},
    )
    for line in said:
        log.error("reload refused: %s", line, extra={"memsync": {"event": "config-problem"}})


def _recover(root: RootSettings, state_dir: Path) -> None:
    """Settle every unsettled journal record of one root before READY=1, and end the role
    process groups a killed daemon left running on it."""
    layout = RootLayout.for_root(state_dir, root.name)
    RoleGroups(layout.base).end_left()
    records = Journal(layout.journal_dir)
    if not root.path.is_dir() or not recovery.needed(records, layout):
        return
    try:
        with RootLock(layout.lock_file, wait=60, label=f"root {root.name}"):
            git = Git(root.path, timeout=root.timeout.total_seconds())
            if git.git_dir() is not None:
                recovery.recover(git, records, layout, SyncPolicy(max_file_size=root.max_file_size))
    except MemsyncError as exc:
        log.warning("root %s: recovery at start-up failed: %s", root.name, exc.message)


def _past_max_stale(views: list[ViewSettings], state_dir: Path) -> list[tuple[str, str]]:
    """The views whose last good check is older than their `max_stale`, with that age."""
    if not views:
        return []
    from memsync.views.trust import TrustState, trust_path  # noqa: PLC0415 - views only

    now = timefmt.now()
    found: list[tuple[str, str]] = []
    for view in views:
        trust = TrustState.load(trust_path(state_dir, view.name))
        if trust.is_past_max_stale(now, view.max_stale):
            age = trust.age(now)
            if age is None:
                found.append((view.name, "never checked"))
            else:
                rounded = timedelta(seconds=int(age.total_seconds()))
                found.append((view.name, f"last checked {rounded} ago"))
    return found


def _view_events_url(view: ViewSettings) -> str | None:
    """The events of the hub `view` comes from (hub sources only; the hub client's URL)."""
    if not isinstance(view.source, HttpSourceSettings):
        return None
    return view_events_url(view.source.url)


def run_daemon(settings: Settings, load: Callable[[], Settings]) -> int:
    """`memsync run`: the one `asyncio.run` of the process."""
    with contextlib.suppress(KeyboardInterrupt):
        return asyncio.run(Daemon(settings, load).run())
    return 130
