"""Prometheus metrics (CONTRACT §6) and the health endpoints on `http.listen`.

One registry per daemon (not the global one), so tests can run several daemons in one
process. Besides the CONTRACT §6 series, what a dashboard needs: the last success of each
root and view (a Unix time, absent until the first success since the daemon started), the
current status as a labelled gauge (1 for the status the last cycle ended in, 0 for every
other status word, so that a panel or an alert selects `{status="rejected"} == 1`), and
`memsync_build_info{version,python,git}` (always 1).

Only a daemon with `http.listen` can be asked for them: without it (`served=False`) every
series is `SILENT`, which drops each update, and neither prometheus_client nor the git that
`memsync_build_info` asks for is loaded or run (issue 18: a start pays only for what its
configuration uses).

`/healthz` answers 200 while the loop runs; `/readyz` 200 only when every root and view
finished its first cycle, every root's last cycle was ok and no view is past
`max_stale`, else 503 with the reasons (`root NAME: first cycle not finished`, `root NAME:
offline`, `view NAME: past max_stale (...)`).
"""

from __future__ import annotations

import platform
import time
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from memsync import __version__
from memsync.errors import MemsyncError
from memsync.roots.result import SyncResult, SyncStatus
from memsync.transports.git import Git
from memsync.transports.gitparse import version_token
from memsync.wire import documents

if TYPE_CHECKING:  # aiohttp and prometheus_client load with `http.listen` only (issue 18)
    from aiohttp import web
    from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

    from memsync.views.pull import ViewResult

# Every status word a root or a view can be in (CONTRACT §2 and §8); a word not listed
# here (a newer status) still gets its series when a cycle ends in it.
_WORDS = tuple(status.value for status in SyncStatus)
ROOT_STATUSES = (
    *_WORDS,
    *(word for word in ("auth-failed", "host-key-changed", "paused") if word not in _WORDS),
)
VIEW_STATUSES = ("pulled", "current", "stale", "unavailable", "paused")


class Silent:
    """A series nobody can read (no `http.listen`): every update is dropped."""

    def labels(self, *values: str) -> Silent:
        return self

    def inc(self, amount: float = 1) -> None:
        pass

    def set(self, value: float) -> None:
        pass

    def observe(self, amount: float) -> None:
        pass

    def set_function(self, f: Callable[[], float]) -> None:
        pass


SILENT = Silent()


class Metrics:
    """The daemon's series; `served` False (no `http.listen`) keeps none of them."""

    registry: CollectorRegistry | None
    sync_total: Counter | Silent
    sync_duration: Histogram | Silent
    behind: Gauge | Silent
    view_revision: Gauge | Silent
    view_age: Gauge | Silent
    cycle_total: Counter | Silent
    problems_total: Counter | Silent
    stream_connected: Gauge | Silent
    propagation: Histogram | Silent
    root_last_success: Gauge | Silent
    view_last_success: Gauge | Silent
    root_status: Gauge | Silent
    view_status: Gauge | Silent

    def __init__(self, *, served: bool = True) -> None:
        self.served = served
        if not served:
            self.registry = None
            self.sync_total = self.cycle_total = self.problems_total = SILENT
            self.sync_duration = self.propagation = SILENT
            self.behind = self.view_revision = self.view_age = self.stream_connected = SILENT
            self.root_last_success = self.view_last_success = SILENT
            self.root_status = self.view_status = SILENT
            return
        # Here only: the series someone can scrape.
        from prometheus_client import (  # noqa: PLC0415
            CollectorRegistry,
            Counter,
            Gauge,
            Histogram,
        )

        self.registry = CollectorRegistry()
        r = self.registry
        self.sync_total = Counter(
            "memsync_sync", "Sync cycles by root and status", ["root", "status"], registry=r
        )
        self.sync_duration = Histogram(
            "memsync_sync_duration_seconds",
            "Duration of sync cycles",
            ["root"],
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120),
            registry=r,
        )
        self.behind = Gauge(
            "memsync_root_behind_commits",
            "Upstream commits not yet published",
            ["root"],
            registry=r,
        )
        self.view_revision = Gauge(
            "memsync_view_revision", "Revision of the active import", ["view"], registry=r
        )
        self.view_age = Gauge(
            "memsync_view_age_seconds",
            "Seconds since the view was last fetched",
            ["view"],
            registry=r,
        )
        self.cycle_total = Counter(
            "memsync_cycle", "Maintenance cycles by status", ["root", "cycle", "status"], registry=r
        )
        self.problems_total = Counter(
            "memsync_validation_problems",
            "Validation problems found, by code",
            ["code"],
            registry=r,
        )
        self.stream_connected = Gauge(
            "memsync_event_stream_connected",
            "1 while a hub event stream is connected",
            ["source"],
            registry=r,
        )
        self.propagation = Histogram(
            "memsync_propagation_seconds",
            "From a hub event's arrival to the publication it caused",
            buckets=(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1, 2, 5, 10),
            registry=r,
        )

        self.root_last_success = Gauge(
            "memsync_root_last_success_timestamp_seconds",
            "When the root's last cycle that ended current, synced or pushed finished",
            ["root"],
            registry=r,
        )
        self.view_last_success = Gauge(
            "memsync_view_last_success_timestamp_seconds",
            "When the view's last pull that ended pulled or current finished",
            ["view"],
            registry=r,
        )
        self.root_status = Gauge(
            "memsync_root_status",
            "1 for the status the root's last cycle ended in, 0 for the others",
            ["root", "status"],
            registry=r,
        )
        self.view_status = Gauge(
            "memsync_view_status",
            "1 for the status the view's last pull ended in, 0 for the others",
            ["view", "status"],
            registry=r,
        )
        build_info = Gauge(
            "memsync_build_info",
            "The running memsync: its version, Python's and git's (always 1)",
            ["version", "python", "git"],
            registry=r,
        )
        build_info.labels(__version__, platform.python_version(), git_version()).set(1)

    def observe_sync(self, result: SyncResult) -> None:
        self.sync_total.labels(result.root, str(result.status)).inc()
        self.sync_duration.labels(result.root).observe(result.duration_ms / 1000)
        for problem in result.problems:
            self.problems_total.labels(problem.code).inc()
        if result.dry_run:  # what a cycle would do is not the root's status
            return
        _one_of(self.root_status, result.root, str(result.status), ROOT_STATUSES)
        if result.ok:
            self.root_last_success.labels(result.root).set(time.time())

    def observe_view(self, result: ViewResult) -> None:
        _one_of(self.view_status, result.view, result.status, VIEW_STATUSES)
        if result.ok:
            self.view_last_success.labels(result.view).set(time.time())

    def exposition(self) -> bytes:
        if self.registry is None:
            return b""
        from prometheus_client.exposition import generate_latest  # noqa: PLC0415

        return generate_latest(self.registry)


def _one_of(gauge: Gauge | Silent, name: str, current: str, words: Iterable[str]) -> None:
    """Set `gauge{name, status}` to 1 for `current` and 0 for every other word."""
    for word in (*words, current):
        gauge.labels(name, word).set(1 if word == current else 0)


def git_version() -> str:
    """The git memsync runs (`2.39.5` of `git version 2.39.5`), or `unknown`."""
    try:
        done = Git(Path("/"), timeout=10).version()
    except MemsyncError:
        return "unknown"
    found = version_token(done.text)
    return found if found is not None and done.ok else "unknown"


def health_app(metrics: Metrics, readiness: Callable[[], Awaitable[list[str]]]) -> web.Application:
    """`/metrics`, `/healthz`, `/readyz`; `readiness()` lists what keeps the daemon unready."""
    from aiohttp import web  # noqa: PLC0415 - only a daemon with `http.listen` serves it
    from prometheus_client import CONTENT_TYPE_LATEST  # noqa: PLC0415

    async def metrics_page(request: web.Request) -> web.Response:
        body = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response(documents.health())

    async def readyz(request: web.Request) -> web.Response:
        reasons = await readiness()
        return web.json_response(documents.readiness(reasons), status=503 if reasons else 200)

    app = web.Application()
    app.router.add_get("/metrics", metrics_page)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
