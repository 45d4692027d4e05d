"""Prometheus metrics (CONTRACT §6) and the health endpoints on `http.listen`.

One registry per daemon (not the global one), so tests can run several daemons in one
process. `/healthz` answers 200 while the loop runs; `/readyz` 200 only when every root and
view finished its first cycle, every root's last cycle was ok and no view is past
`max_stale`, else 503 with the reasons (`root NAME: first cycle not finished`, `root NAME:
offline`, `view NAME: past max_stale (...)`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from memsync.roots.result import SyncResult


class Metrics:
    def __init__(self) -> None:
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

    def observe_sync(self, result: SyncResult) -> None:
        self.sync_total.labels(result.root, str(result.status)).inc()
        self.sync_duration.labels(result.root).observe(result.duration_ms / 1000)
        for problem in result.problems:
            self.problems_total.labels(problem.code).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def health_app(metrics: Metrics, readiness: Callable[[], Awaitable[list[str]]]) -> web.Application:
    """`/metrics`, `/healthz`, `/readyz`; `readiness()` lists what keeps the daemon unready."""

    async def metrics_page(request: web.Request) -> web.Response:
        body = metrics.exposition()
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        reasons = await readiness()
        if reasons:
            return web.json_response({"status": "unready", "reasons": reasons}, status=503)
        return web.json_response({"status": "ready"})

    app = web.Application()
    app.router.add_get("/metrics", metrics_page)
    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    return app
