"""The hub's fast lane: a conditional GET of a view's current manifest or package whose
ETag still matches is answered 304 before aiohttp builds a request.

Every connection starts here. A request the lane answers must be plainly one: the request
line `GET /v1/views/<id>/{manifest,package} HTTP/1.1` (no query), header lines of token
characters and visible ASCII only, exactly one `Host` (a plain host name or address),
`Authorization` and `If-None-Match`,
nothing that frames a body or changes the connection (`Content-Length`,
`Transfer-Encoding`, `Upgrade`, `Expect`, a `Connection` other than keep-alive). The token
is checked by the same `HubState.authenticate` as every other request, and the view, scope
and ETag by the same rules as `app.py`. Anything else, including every refusal (401, 404)
and every answer with a body, is handed over unread to aiohttp together with the rest of
the connection, which stays aiohttp's from then on: the lane never answers a request it is
not sure of, and never answers after aiohttp began.

The 304 carries what aiohttp's would (ETag, Cache-Control, Date, Server) and is logged
the same way when the access log is on.
"""

from __future__ import annotations

import asyncio
import logging
import re
import socket
import time
from email.utils import formatdate
from typing import cast

from aiohttp import web
from aiohttp.http import SERVER_SOFTWARE
from aiohttp.web_protocol import RequestHandler
from aiohttp.web_server import Server

from memsync.hub.guard import BACKLOG, Gate, HeadGuard, abort
from memsync.hub.state import HubState
from memsync.hub.tokens import TokenInfo, redact
from memsync.names import is_name

log = logging.getLogger("memsync.hub")
access_log = logging.getLogger("memsync.hub.access")

MAX_HEAD = 8190  # longer heads go to aiohttp, which applies its own limits
_REQUEST_LINE = re.compile(rb"GET /v1/views/([A-Za-z0-9._-]{1,128})/(manifest|package) HTTP/1\.1")
_HEADER = re.compile(rb"([!#$%&'*+.^_`|~0-9A-Za-z-]+):[ \t]*((?:[\x21-\x7e][\x20-\x7e\t]*)?)")
_HOST = re.compile(rb"[A-Za-z0-9.-]{1,253}(?::[0-9]{1,5})?|\[[0-9A-Fa-f:.]{2,45}\](?::[0-9]{1,5})?")
_FRAMING = frozenset({b"content-length", b"transfer-encoding", b"upgrade", b"expect", b"te"})
_SERVER = SERVER_SOFTWARE.encode()


class _Clock:
    """The `Date` header, formatted once a second."""

    def __init__(self) -> None:
        self._second = -1
        self._text = b""

    def now(self) -> bytes:
        second = int(time.time())
        if second != self._second:
            self._second = second
            self._text = formatdate(second, usegmt=True).encode()
        return self._text


_CLOCK = _Clock()


def parse_head(head: bytes) -> tuple[str, str, bytes, bytes] | None:
    """(view id, `manifest`/`package`, Authorization, If-None-Match) of a request head (its
    bytes before the blank line) the lane may answer; None for anything else."""
    lines = head.split(b"\r\n")
    line = _REQUEST_LINE.fullmatch(lines[0])
    if line is None:
        return None
    auth = match = host = None
    for raw in lines[1:]:
        header = _HEADER.fullmatch(raw)
        if header is None:
            return None
        name, value = header[1].lower(), header[2].rstrip(b" \t")
        if name == b"authorization":
            if auth is not None:
                return None
            auth = value
        elif name == b"if-none-match":
            if match is not None:
                return None
            match = value
        elif name == b"host":
            if host is not None or _HOST.fullmatch(value) is None:
                return None
            host = value
        elif name in _FRAMING or (name == b"connection" and value.lower() != b"keep-alive"):
            return None
    view = line[1].decode("ascii")
    if auth is None or match is None or host is None or not is_name(view):
        return None
    return view, line[2].decode("ascii"), auth, match


def matches(header: str | None, etag: str) -> bool:
    """If-None-Match uses the weak comparison: `W/` is ignored, `*` matches anything."""
    if header is None:
        return False
    return any(c.strip() in ("*", etag) or c.strip() == f"W/{etag}" for c in header.split(","))


class FastLane(asyncio.Protocol):
    """One connection: 304s answered here until a request needs aiohttp (see above).

    It also keeps the connection's deadlines until aiohttp takes it (`guard.py`): the
    request head due since the connection opened or since its first byte after an answer
    must be whole within `header_timeout`, and a connection with nothing under way is
    closed after `idle_timeout`. A client that reads none of its answers stops the lane
    reading (`pause_writing`); the deadline of the head it was sending, or of idleness
    since its last request, still closes it."""

    def __init__(self, server: Server, hub: HubState, lanes: set[FastLane], gate: Gate) -> None:
        self._server, self._hub, self._lanes, self._gate = server, hub, lanes, gate
        self._limits = hub.limits
        self._buffer = b""
        self._transport: asyncio.Transport
        self._handler: RequestHandler | None = None
        self._counted = False
        self._head_since: float | None = None  # loop time a request head has been due since
        self._last = 0.0  # loop time of the last answer (the start of idleness)
        self._timer: asyncio.TimerHandle | None = None
        self._paused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast("asyncio.Transport", transport)
        if not self._gate.admit():
            abort(transport)
            return
        self._counted = True
        self._gate.waiting(transport, self._evict)  # (keyed by the transport, as aiohttp's is)
        self._lanes.add(self)
        self._head_since = asyncio.get_running_loop().time()  # the first head is due now
        self._schedule()

    def data_received(self, data: bytes) -> None:
        if self._handler is not None:  # (a write may arrive before set_protocol applies)
            self._handler.data_received(data)
            return
        loop = asyncio.get_running_loop()
        if self._head_since is None:  # the first byte of a new request head
            self._head_since = loop.time()
        buffer = self._buffer + data if self._buffer else data
        while buffer:
            end = buffer.find(b"\r\n\r\n", 0, MAX_HEAD + 4)
            if end < 0:
                if len(buffer) > MAX_HEAD or not _may_become_ours(buffer):
                    self._hand_over(buffer)
                    return
                break
            answer = self._answer(buffer[:end])
            if answer is None:
                self._hand_over(buffer)
                return
            self._transport.write(answer)
            buffer = buffer[end + 4 :]
            self._head_since = loop.time() if buffer else None
        self._buffer = buffer
        if self._head_since is None:
            self._last = loop.time()
            self._gate.waiting(self._transport, self._evict)  # answered: last in line again
        if self._timer is None or self._timer.when() > self._deadline():
            self._schedule()  # the deadline came nearer (a head began, or idleness did)

    def _answer(self, head: bytes) -> bytes | None:
        """The 304 for one request head, or None when aiohttp must answer it."""
        parsed = parse_head(head)
        if parsed is None:
            return None
        started = time.perf_counter()
        view_id, what, auth, match = parsed
        hub = self._hub
        token = hub.authenticate(auth.decode("latin-1"), "", ())
        if not isinstance(token, TokenInfo) or not token.may_read(view_id):
            return None
        current = hub.fresh().current(view_id)
        if current is None:
            return None
        etag = current.manifest_etag if what == "manifest" else current.package_etag
        if not matches(match.decode("latin-1"), etag):
            return None
        if access_log.isEnabledFor(logging.INFO):
            peer = self._transport.get_extra_info("peername")
            access_log.info(
                '%s "GET %s" 304 0 %.1fms',
                peer[0] if peer else "-",
                redact(f"/v1/views/{view_id}/{what}"),
                (time.perf_counter() - started) * 1000,
            )
        answer = (
            b"HTTP/1.1 304 Not Modified\r\nETag: %s\r\nCache-Control: no-cache\r\n"
            b"Date: %s\r\nServer: %s\r\n\r\n" % (etag.encode(), _CLOCK.now(), _SERVER)
        )
        hub.metrics.request(f"/v1/views/{{id}}/{what}", 304, len(answer))  # as aiohttp's
        return answer

    def _hand_over(self, unread: bytes) -> None:
        """aiohttp takes the connection, starting with the bytes not answered here."""
        self._forget()
        if self._paused:  # aiohttp's own flow control takes over from here
            self._transport.resume_reading()
        server = self._server
        handler = HeadGuard(
            server,
            gate=self._gate,
            header_timeout=self._limits.header_timeout,
            loop=asyncio.get_running_loop(),
            **server._kwargs,  # what `server()` would pass: the runner's handler settings
        )
        self._handler = handler
        self._buffer = b""
        handler.take_over(self._transport, unread, self._head_since or handler._loop.time())

    def eof_received(self) -> bool | None:
        if self._handler is not None:
            self._handler.eof_received()
        return None  # close (aiohttp's answer too): every complete request was answered

    def pause_writing(self) -> None:  # a client that does not read its answers
        if self._handler is None:
            self._paused = True
            self._transport.pause_reading()  # its deadlines run on: see `_check`

    def resume_writing(self) -> None:
        if self._handler is not None:
            self._handler.resume_writing()
        elif self._paused:
            self._paused = False
            self._transport.resume_reading()

    def connection_lost(self, exc: BaseException | None) -> None:
        if self._handler is not None:
            self._handler.connection_lost(exc)
        elif self._counted:
            self._gate.release(self._transport)
        self._counted = False
        self._forget()

    def _forget(self) -> None:
        self._lanes.discard(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _deadline(self) -> float:
        if self._head_since is not None:
            return self._head_since + self._limits.header_timeout
        return self._last + self._limits.idle_timeout

    def _schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = asyncio.get_running_loop().call_at(self._deadline(), self._check)

    def _check(self) -> None:
        self._timer = None
        if asyncio.get_running_loop().time() < self._deadline():
            self._schedule()
        elif self._handler is None:
            if self._head_since is not None:
                log.warning(
                    "closed a connection: its request head did not arrive within %g s "
                    "(hub.header_timeout)",
                    self._limits.header_timeout,
                )
                self._gate.closed("header-timeout")
                abort(self._transport)
            else:
                self._gate.closed("idle-timeout")
                self.close()

    def _evict(self) -> None:
        """Make room for a new connection (the worker holds its cap)."""
        if self._handler is None:
            abort(self._transport)

    def close(self) -> None:
        """Close the connection (idle, or the server stops) unless aiohttp has it."""
        if self._handler is None:
            if self._transport.get_write_buffer_size():
                abort(self._transport)  # a client that does not read its answers
            else:
                self._transport.close()


def _may_become_ours(partial: bytes) -> bool:
    """Whether an unfinished request head could still be one this lane answers: a
    `GET /v1/views/` with CRLF line ends. Anything else (TLS by mistake, bare LF, another
    method) goes to aiohttp at once, which answers or refuses it, rather than waiting."""
    start = partial[: len(_OURS)]
    return _OURS.startswith(start) and partial.count(b"\n") == partial.count(b"\r\n")


_OURS = b"GET /v1/views/"
LANES: web.AppKey[set[FastLane]] = web.AppKey("memsync.hub.lanes")


class FastSite(web.SockSite):
    """A listening socket whose connections start in the fast lane."""

    def __init__(
        self,
        runner: web.BaseRunner,
        sock: socket.socket,
        hub: HubState,
        lanes: set[FastLane],
        gate: Gate,
    ) -> None:
        super().__init__(runner, sock, backlog=BACKLOG)
        self._hub, self._lanes, self._gate = hub, lanes, gate

    async def start(self) -> None:
        await web.BaseSite.start(self)
        server, hub, lanes, gate = self._runner.server, self._hub, self._lanes, self._gate
        if server is None:
            raise RuntimeError("the runner is not set up")
        self._server = await asyncio.get_running_loop().create_server(
            lambda: FastLane(server, hub, lanes, gate), sock=self._sock, backlog=self._backlog
        )


async def close_lanes(app: web.Application) -> None:
    """At shutdown: close the connections the fast lane still holds."""
    lanes: set[FastLane] = app[LANES]
    for lane in list(lanes):
        lane.close()
