"""The hub's listeners under hostile clients: how long a request head may take, how long a
connection may sit idle, how many connections one worker holds (`Limits`, `Gate`).

- A request head must arrive whole within `header_timeout` seconds of the connection being
  opened, or of its first byte after an answer; otherwise the connection is closed. Both
  paths apply it: the fast lane (`fastlane.py`) to the heads it reads, `HeadGuard` (aiohttp's
  connection handler with a deadline) to the rest.
- A connection with no request under way is closed after `idle_timeout` seconds. An event
  stream is a request under way: it is never idle.
- A worker holds at most `max_connections` connections; one more is closed as soon as it is
  accepted, before anything is read from it. The default keeps room below the process's
  descriptor limit (RLIMIT_NOFILE) for the files, database and pipes the hub itself opens
  and for one batch of accepted connections.

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
    `RESERVED_FDS`) for the hub's own files, and less one batch of accepted connections
    (`BACKLOG`), which are open for a moment before the ones past the cap are closed."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 1 << 20
    return max(1, soft - max(RESERVED_FDS, soft // 8) - BACKLOG)


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
    """The connections one worker holds, against its cap."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.held = 0

    def admit(self) -> bool:
        """Count a new connection; False (not counted) when the worker holds its cap."""
        if self.held >= self.cap:
            log.warning(
                "holding %d connections, the most allowed (hub.max_connections): "
                "closing new ones at once",
                self.cap,
            )
            return False
        self.held += 1
        return True

    def release(self) -> None:
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
        self._header_timeout = header_timeout
        self._head_timer: asyncio.TimerHandle | None = None
        self.on_lost: list[Callable[[], None]] = []  # called once the connection is gone

    def take_over(self, transport: asyncio.Transport, unread: bytes, head_since: float) -> None:
        """Take the connection from the fast lane: `unread` is the start of a request head
        due since `head_since` (loop time)."""
        transport.set_protocol(self)
        self.connection_made(transport)
        self._head_timer = self._loop.call_at(head_since + self._header_timeout, self._late)
        self.data_received(unread)

    def data_received(self, data: bytes) -> None:
        if data and self._head_timer is None and self._between_requests():
            self._head_timer = self._loop.call_later(self._header_timeout, self._late)
        super().data_received(data)
        if self._head_timer is not None and self._messages:  # the head is in
            self._head_timer.cancel()
            self._head_timer = None

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
            abort(self.transport)
            self.force_close()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        if self._gate is not None:
            self._gate.release()
            self._gate = None
        callbacks, self.on_lost = self.on_lost, []
        for callback in callbacks:
            callback()
        super().connection_lost(exc)
