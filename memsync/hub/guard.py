"""The hub's listeners under hostile clients: how long a request head may take, how long a
connection may sit idle, how many connections one worker holds (`Limits`, `Gate`).

- A request head must arrive whole within `header_timeout` seconds of the connection being
  opened, or of its first byte after an answer; otherwise the connection is closed. Both
  paths apply it: the fast lane (`fastlane.py`) to the heads it reads, `HeadGuard` (aiohttp's
  connection handler with a deadline) to the rest.
- A connection with no request under way is closed after `idle_timeout` seconds. An event
  stream is a request under way: it is never idle. A client that stops reading its answers
  (the hub's send buffer stays full) is closed after `idle_timeout` as well.
- A worker holds at most `max_connections` connections. At the cap, a new connection
  closes the one that has waited longest for a request (half a head, or nothing since
  its last answer), so that clients holding connections open cannot shut others out;
  when every connection has a request under way (event streams, uploads), the new one is
  closed as soon as it is accepted, before anything is read from it. The default keeps
  room below the process's descriptor limit (RLIMIT_NOFILE) for the files, database and
  pipes the hub itself opens and for two batches of accepted connections.

Every refusal is logged as a warning; `ratelog.RepeatFilter` bounds how often.
"""

from __future__ import annotations

import asyncio
import logging
import resource
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

log = logging.getLogger("memsync.hub")

HEADER_TIMEOUT = 10.0
IDLE_TIMEOUT = 60.0
MAX_STREAMS_PER_TOKEN = 16
RESERVED_FDS = 64  # at least this many descriptors stay free for the hub's own files
BACKLOG = 128  # connections asyncio accepts in one go, before any of them can be closed


def default_max_connections() -> int:
    """Connections per worker: the descriptor limit less an eighth of it (at least
    `RESERVED_FDS`) for the hub's own files, and less two batches of accepted connections
    (`BACKLOG`): a connection closed to make room (or refused) keeps its descriptor until
    the loop's next turn, while the next batch is accepted."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(1, soft - max(RESERVED_FDS, soft // 8) - 2 * BACKLOG)


@dataclass(frozen=True)
class Limits:
    """The listener limits of one hub (`hub:` config keys, `hub serve` options)."""

    header_timeout: float = HEADER_TIMEOUT
    idle_timeout: float = IDLE_TIMEOUT
    max_connections: int | None = None  # per worker; None: `default_max_connections()`
    max_streams_per_token: int = MAX_STREAMS_PER_TOKEN

    def connections(self) -> int:
        return self.max_connections or default_max_connections()


class Gate:
    """The connections one worker holds, against its cap, and which of them wait for a
    request (a head not yet whole, or nothing since the last answer), longest first."""

    def __init__(self, cap: int, closed: Callable[[str], None] | None = None) -> None:
        """`closed` is told the reason each time a limit closes a connection (the hub's
        `connections_closed` metric): `connection-cap`, `header-timeout`, `idle-timeout`."""
        self.cap = cap
        self.held = 0
        self.closed: Callable[[str], None] = closed or (lambda _reason: None)
        self._waiting: dict[object, Callable[[], None]] = {}  # connection -> its closing

    def admit(self) -> bool:
        """Count a new connection. At the cap, the connection waiting longest for a request
        is closed to make room; False (not counted) when every one is busy."""
        if self.held >= self.cap:
            if not self._waiting:
                log.warning(
                    "holding %d connections, the most allowed (hub.max_connections), all "
                    "busy: closing new ones at once",
                    self.cap,
                )
                self.closed("connection-cap")
                return False
            log.warning(
                "holding %d connections, the most allowed (hub.max_connections): closing "
                "the ones that waited longest for a request",
                self.cap,
            )
            oldest = next(iter(self._waiting))
            self._waiting.pop(oldest)()
            self.closed("connection-cap")
        self.held += 1
        return True

    def waiting(self, connection: object, close: Callable[[], None], *, anew: bool = True) -> None:
        """`connection` waits for a request: from now on (`anew`: it goes last in line), or
        still (it keeps its place; `close` is how to close it now)."""
        if anew:
            self._waiting.pop(connection, None)
        self._waiting[connection] = close

    def busy(self, connection: object) -> None:
        """`connection` has a request under way, or is gone."""
        self._waiting.pop(connection, None)

    def release(self, connection: object) -> None:
        """`connection` is gone."""
        self._waiting.pop(connection, None)
        self.held -= 1


def abort(transport: asyncio.BaseTransport) -> None:
    """Close at once, dropping unsent data (a client that stopped reading keeps nothing)."""
    if isinstance(transport, asyncio.WriteTransport):
        transport.abort()
    else:
        transport.close()


class HeadGuard(RequestHandler):
    """aiohttp's handler of one connection, with a deadline on every request head and the
    connection counted in the worker's `Gate` until it is lost."""

    def __init__(
        self, manager: Server, *, gate: Gate, header_timeout: float, **kwargs: Any
    ) -> None:
        super().__init__(manager, **kwargs)
        self._gate: Gate | None = gate
        self._connection: asyncio.BaseTransport | None = None  # its key in the gate
        self._header_timeout = header_timeout
        self._head_timer: asyncio.TimerHandle | None = None
        self._stall_timer: asyncio.TimerHandle | None = None
        self.on_lost: list[Callable[[], None]] = []  # called once the connection is gone

    def take_over(self, transport: asyncio.Transport, unread: bytes, head_since: float) -> None:
        """Take the connection from the fast lane: `unread` is the start of a request head
        due since `head_since` (loop time)."""
        transport.set_protocol(self)
        self.connection_made(transport)
        self._await_head(head_since, anew=False)  # its place in line is the lane's
        self.data_received(unread)

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._connection = transport
        super().connection_made(transport)

    def _await_head(self, since: float, *, anew: bool = True) -> None:
        """A request head is due since `since`: its deadline, and a place in the line of
        connections waiting for a request (by when the head began, not its last byte)."""
        self._head_timer = self._loop.call_at(since + self._header_timeout, self._late)
        if self._gate is not None:
            self._gate.waiting(self._connection, self._evict, anew=anew)

    def data_received(self, data: bytes) -> None:
        if data and self._head_timer is None and self._between_requests():
            self._await_head(self._loop.time())
        super().data_received(data)
        if self._head_timer is not None and self._messages:  # the head is in
            self._head_timer.cancel()
            self._head_timer = None
            if self._gate is not None:
                self._gate.busy(self._connection)

    def _evict(self) -> None:
        if self.transport is not None:
            abort(self.transport)
        self.force_close()

    def _between_requests(self) -> bool:
        return not self._messages and not self._request_in_progress

    def _late(self) -> None:
        self._head_timer = None
        if self._between_requests() and self.transport is not None:
            log.warning(
                "closed a connection: its request head did not arrive within %g s "
                "(hub.header_timeout)",
                self._header_timeout,
            )
            if self._gate is not None:
                self._gate.closed("header-timeout")
            abort(self.transport)
            self.force_close()

    def pause_writing(self) -> None:
        """The client stopped reading: it has `idle_timeout` to read again."""
        super().pause_writing()
        if self._stall_timer is None:
            self._stall_timer = self._loop.call_later(self._keepalive_timeout, self._stalled)

    def resume_writing(self) -> None:
        super().resume_writing()
        if self._stall_timer is not None:
            self._stall_timer.cancel()
            self._stall_timer = None

    def _stalled(self) -> None:
        self._stall_timer = None
        if self.transport is not None:
            log.warning(
                "closed a connection: its client read none of its answer for %g s "
                "(hub.idle_timeout)",
                self._keepalive_timeout,
            )
            if self._gate is not None:
                self._gate.closed("idle-timeout")
            self._evict()

    def connection_lost(self, exc: BaseException | None) -> None:
        for timer in (self._head_timer, self._stall_timer):
            if timer is not None:
                timer.cancel()
        self._head_timer = self._stall_timer = None
        if self._gate is not None:
            self._gate.release(self._connection)
            self._gate = None
        callbacks, self.on_lost = self.on_lost, []
        for callback in callbacks:
            callback()
        super().connection_lost(exc)
