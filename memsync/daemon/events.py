"""Following a hub's Server-Sent Events: `upstream` events sync a root at once, `revision`
events pull a view at once.

The parser is pure (bytes in, events out) and tolerates garbage: a line it cannot read is
skipped, an event whose data is not a JSON object is dropped, an `id` that is not printable
ASCII of at most `MAX_ID` characters is dropped (it would go back in a header). It is
bounded and linear: a line over `MAX_LINE`, an event over `MAX_EVENT` bytes are a
`StreamError`, its buffer never holds more than one line plus one read, and it never
re-slices that buffer per line (runs of blank lines and comments are skipped in one step).

The follower reads through the hub client (`transports/hubclient.py`, on the HTTP box: the
URL and token rule, no redirect, no compression) at most `CHUNK` bytes at a time and yields
to the event loop after each read, so a flood of anything costs bounded work per read and
never starves the daemon. A connection that breaks a bound, or carries over `MAX_CONNECTION`
bytes, is dropped and counts as a failure for the back-off. It reconnects with back-off and
`Last-Event-ID`, and marks the stream connected or not; polling goes on either way, so a hub
that drops the stream, sends junk or never answers only costs latency. The same failure
twice in a row is logged once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from memsync.daemon.triggers import Backoff
from memsync.redaction import redact
from memsync.transports.http import HttpError, redact_url
from memsync.transports.hubclient import HubClient

TYPE_CHECKING = False
if TYPE_CHECKING:
    import aiohttp  # loaded by the HTTP box, without the CA bundle reads it does not need

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024  # bytes in one line
MAX_EVENT = 256 * 1024  # bytes of the fields of one event (hub events are a few hundred)
MAX_ID = 256  # characters of an event id (sent back as `Last-Event-ID`)
MAX_CONNECTION = 64 * 1024 * 1024  # bytes on one connection before it is dropped
CHUNK = 64 * 1024  # bytes per read: the parser's work between two yields to the loop
READ_TIMEOUT = 90.0  # the hub sends heartbeats well within this

_ID = re.compile(rf"[\x20-\x7e]{{0,{MAX_ID}}}")
# Lines that change nothing, skipped in one step: comments always; blank lines when no
# event is pending (a blank line then dispatches nothing). Possessive (`++`): no
# backtracking state per line, so a run of any length is one linear pass.
_COMMENTS = re.compile(rb"(?::[^\n]{0,%d}\n)++" % MAX_LINE)
_IDLE = re.compile(rb"(?:\r?\n|:[^\n]{0,%d}\n)++" % MAX_LINE)


class StreamError(Exception):
    """The stream broke a bound: the connection is dropped and backed off."""


@dataclass(frozen=True)
class Event:
    kind: str
    data: dict[str, Any]
    id: str | None = None


@dataclass
class EventParser:
    """Incremental SSE parsing (the WHATWG rules memsync needs: event, data, id, comments).

    One parser per connection; `last_id` is what a reconnect sends back.
    """

    last_id: str | None = None
    _buffer: bytearray = field(default_factory=bytearray)
    _kind: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str | None = None
    _size: int = 0  # bytes of the pending event's lines

    def feed(self, chunk: bytes) -> Iterator[Event]:
        """The events `chunk` completes; StreamError (after the events before it) when a
        bound is broken. Linear in the buffered bytes."""
        buffer = self._buffer
        buffer += chunk
        pos, end = 0, len(buffer)
        try:
            while pos < end:
                skip = (_IDLE if self._idle() else _COMMENTS).match(buffer, pos)
                if skip is not None:
                    pos = skip.end()
                    continue
                cut = buffer.find(b"\n", pos)
                if cut < 0:
                    if end - pos > MAX_LINE:
                        raise StreamError(f"a line over {MAX_LINE} bytes")
                    break
                if cut - pos > MAX_LINE:
                    raise StreamError(f"a line over {MAX_LINE} bytes")
                line = bytes(buffer[pos:cut]).removesuffix(b"\r")
                pos = cut + 1
                event = self._line(line)
                if event is not None:
                    yield event
        finally:
            del buffer[:pos]

    def _idle(self) -> bool:
        return not self._size and not self._kind and not self._data and self._id is None

    def _line(self, raw: bytes) -> Event | None:
        if not raw:
            return self._dispatch()
        if raw.startswith(b":"):
            return None  # a comment (heartbeat)
        self._size += len(raw)
        if self._size > MAX_EVENT:
            raise StreamError(f"an event over {MAX_EVENT} bytes")
        name, _, value = raw.decode("utf-8", "replace").partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._kind = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and _ID.fullmatch(value):
            self._id = value
        return None

    def _dispatch(self) -> Event | None:
        kind, data, event_id = self._kind or "message", self._data, self._id
        self._kind, self._data, self._id, self._size = "", [], None, 0
        if event_id is not None:
            self.last_id = event_id
        if not data:
            return None
        try:
            decoded = json.loads("\n".join(data))
        except (ValueError, RecursionError):
            return None
        if not isinstance(decoded, dict):
            return None
        return Event(kind, decoded, event_id)


Handler = Callable[[Event], Awaitable[None] | None]


@dataclass
class _Quiet:
    """Logs a stream's failures, each distinct one once in a row (repeats go to debug)."""

    shown: str
    last: str | None = None
    announced: bool = False

    def connected(self) -> None:
        if not self.announced:
            log.info("following hub events at %s", self.shown)
            self.announced = True

    def failed(self, problem: str) -> None:
        if problem == self.last:
            log.debug("hub events at %s: %s (again)", self.shown, problem)
            return
        log.warning("hub events at %s: %s", self.shown, problem)
        self.last, self.announced = problem, False


async def follow(
    url: str,
    token: str | None,
    handle: Handler,
    *,
    connected: Callable[[bool], None] = lambda up: None,
    backoff: Backoff | None = None,
) -> None:
    """Follow `url` until cancelled, reconnecting with back-off; never raises otherwise.

    The token goes only where the URL rule lets it (https, or loopback http); without one,
    plain http is followed anywhere (an event only asks for a cycle that checks everything).
    """
    backoff = backoff or Backoff(base=1.0, cap=60.0)
    last_id: str | None = None
    quiet = _Quiet(_shown(url))
    strained = False  # the last connection broke a bound: it does not reset the back-off
    async with HubClient(allow_http=token is None) as hub:
        while True:
            parser = EventParser(last_id)  # a new connection starts with an empty buffer
            try:
                async with hub.events(
                    url, token=token, last_id=last_id, read_timeout=READ_TIMEOUT
                ) as body:
                    connected(True)
                    if not strained:
                        backoff.succeeded()
                    strained = False
                    quiet.connected()
                    await _read(body, parser, handle)
                    last_id = parser.last_id
                quiet.failed("the hub closed the stream")
            except asyncio.CancelledError:
                connected(False)
                raise
            except StreamError as exc:
                last_id, strained = parser.last_id, True
                quiet.failed(f"{exc}; dropped the connection")
            except HttpError as exc:
                last_id = parser.last_id
                quiet.failed(exc.message)
            except (TimeoutError, OSError, ValueError) as exc:
                last_id = parser.last_id
                quiet.failed(redact(str(exc)) or type(exc).__name__)
            connected(False)
            delay = backoff.failed(asyncio.get_running_loop().time())
            await asyncio.sleep(delay)


async def _read(body: aiohttp.StreamReader, parser: EventParser, handle: Handler) -> None:
    """Feed the stream to `parser` at most `CHUNK` bytes at a time, yielding between reads."""
    total = 0
    while chunk := await body.read(CHUNK):
        total += len(chunk)
        if total > MAX_CONNECTION:
            raise StreamError(f"over {MAX_CONNECTION} bytes on one connection")
        for event in parser.feed(chunk):
            outcome = handle(event)
            if outcome is not None:
                await outcome
        await asyncio.sleep(0)  # bounded work per read: other tasks run between reads


def _shown(url: str) -> str:
    try:
        return redact_url(url)
    except ValueError:
        return "<invalid url>"
