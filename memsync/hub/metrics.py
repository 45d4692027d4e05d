"""The hub's Prometheus metrics (`GET /metrics`): requests by route template and status,
bytes sent, event streams open, uploads by result, refused tokens by reason (never the
token), connections the hub closed by reason, and each view's current revision.

Every label value comes from a closed set: a route is its template (`/v1/views/{id}/package`,
`unmatched` for a path no route knows), a status an HTTP status number, a reason or a
result one of the words below. A raw path, a query or a token never becomes a label.

A hub of one process counts in memory. A hub of several workers (`workers.py`) counts in
prometheus-client's multiprocess mode: each worker writes its counters to its own memory
mapped file in `<data_dir>/metrics/` (a private dir the supervisor empties before it forks),
and whichever worker answers `/metrics` sums every worker's files, so a scrape sees the
hub's totals. The open streams gauge is the sum over live workers; the views' revisions
are read from the data dir (the truth) at scrape time, in either mode.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, values
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector

from memsync.atomicfile import private_dir

METRICS_DIR = "metrics"  # <data_dir>/metrics: the workers' counter files
UNMATCHED = "unmatched"  # the route label of a request no route matched
TOKEN_REASONS = ("missing", "malformed", "unknown", "expired", "revoked", "in-url")
UPLOAD_RESULTS = {
    200: "unchanged",
    201: "created",
    400: "bad-request",
    403: "forbidden",
    404: "not-found",
    409: "conflict",
    413: "too-large",
    415: "bad-request",
    422: "refused",
}  # any other status: `error`
CLOSE_REASONS = ("header-timeout", "idle-timeout", "connection-cap")
_shared: list[Path] = []  # the counter dir, once `share_counts` ran in this process


def prepare_shared(data_dir: Path) -> Path:
    """The workers' counter dir, emptied (the supervisor, holding the data dir's lock,
    calls it before forking: counters start at zero with the hub, as Prometheus expects)."""
    directory = private_dir(data_dir / METRICS_DIR)
    for entry in directory.iterdir():
        if entry.name.endswith(".db") and entry.is_file():
            entry.unlink()
    return directory


def share_counts(data_dir: Path) -> None:
    """Count in the workers' shared files from now on (a worker calls it once, after the
    fork and before it makes its application; it changes this process only)."""
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(data_dir / METRICS_DIR)
    values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
    _shared[:] = [data_dir / METRICS_DIR]


class _Views:
    """The current revision of every view, as one scrape found them."""

    def __init__(self, current: Sequence[tuple[str, int]]) -> None:
        self.current = current

    def collect(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "memsync_hub_view_revision", "The current revision of each view", labels=["view"]
        )
        for view, revision in self.current:
            family.add_metric([view], revision)
        yield family


class HubMetrics:
    """The counters of one hub process: in the workers' shared files once `share_counts`
    ran in this process (a worker), in memory otherwise."""

    def __init__(self) -> None:
        shared = _shared[0] if _shared else None
        self.requests = Counter(
            "memsync_hub_requests",
            "Requests answered, by route template and HTTP status",
            ["route", "status"],
            registry=None,
        )
        self.response_bytes = Counter(
            "memsync_hub_response_bytes",
            "Bytes of answers sent (status line, headers and body), by route template",
            ["route"],
            registry=None,
        )
        self.streams = Gauge(
            "memsync_hub_event_streams_open",
            "Event streams (GET /v1/events) open now",
            registry=None,
            multiprocess_mode="livesum",
        )
        self.uploads = Counter(
            "memsync_hub_uploads", "Publications (uploads) by result", ["result"], registry=None
        )
        self.token_failures = Counter(
            "memsync_hub_token_failures",
            "Requests refused for their token, by reason (never the token)",
            ["reason"],
            registry=None,
        )
        self.connections_closed = Counter(
            "memsync_hub_connections_closed",
            "Connections the hub closed by a limit, by reason",
            ["reason"],
            registry=None,
        )
        for reason in TOKEN_REASONS:  # every series from the start: rate() needs a zero
            self.token_failures.labels(reason)
        for result in ("created", "unchanged", "refused"):
            self.uploads.labels(result)
        for reason in CLOSE_REASONS:
            self.connections_closed.labels(reason)
        self.streams.set(0)
        self._shared = shared

    def request(self, route: str, status: int, sent: int) -> None:
        """A request answered: `sent` bytes (head and body) went out."""
        self.requests.labels(route, str(status)).inc()
        if sent > 0:
            self.response_bytes.labels(route).inc(sent)

    def upload(self, status: int) -> None:
        self.uploads.labels(UPLOAD_RESULTS.get(status, "error")).inc()

    def token_failure(self, reason: str) -> None:
        self.token_failures.labels(reason if reason in TOKEN_REASONS else "unknown").inc()

    def connection_closed(self, reason: str) -> None:
        """A limit closed a connection (`CLOSE_REASONS`)."""
        self.connections_closed.labels(reason).inc()

    def exposition(self, views: Iterable[tuple[str, int]]) -> bytes:
        """The Prometheus text, with `views` (id, current revision) as the revision gauge
        (blocking when shared: the workers' files are read; call it in a thread)."""
        registry = CollectorRegistry()
        if self._shared is not None:
            MultiProcessCollector(registry, path=str(self._shared))  # type: ignore[no-untyped-call]
        else:
            for metric in (
                self.requests,
                self.response_bytes,
                self.streams,
                self.uploads,
                self.token_failures,
                self.connections_closed,
            ):
                registry.register(metric)
        registry.register(_Views(tuple(views)))
        return generate_latest(registry)
