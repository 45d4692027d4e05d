"""Following a hub's Server-Sent Events: `upstream` events sync a root at once, `revision`
events pull a view at once.

The parser is pure (bytes in, events out) and tolerates garbage: a line it cannot read is
skipped, an event whose data is not a JSON object is dropped. The follower reconnects with
back-off and `Last-Event-ID`, and marks the stream connected or not; polling goes on
either way, so a hub that drops the stream, sends junk or never answers only costs latency.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from memsync.daemon.triggers import Backoff
from memsync.redaction import redact

log = logging.getLogger(__name__)

MAX_LINE = 64 * 1024
READ_TIMEOUT = 90.0  # the hub sends heartbeats well within this


@dataclass(frozen=True)
class Event:
    kind: str
    data: dict[str, Any]
    id: str | None = None


@dataclass
class EventParser:
    """Incremental SSE parsing (the WHATWG rules memsync needs: event, data, id, comments)."""

    _buffer: bytes = b""
    _kind: str = ""
    _data: list[str] = field(default_factory=list)
    _id: str | None = None
    last_id: str | None = None

    def feed(self, chunk: bytes) -> Iterator[Event]:
        self._buffer += chunk
        while True:
            cut = self._buffer.find(b"\n")
            if cut < 0:
                if len(self._buffer) > MAX_LINE:
                    self._buffer = b""  # an endless line: drop it
                return
            raw, self._buffer = self._buffer[:cut], self._buffer[cut + 1 :]
            line = raw.rstrip(b"\r").decode("utf-8", "replace")
            event = self._line(line)
            if event is not None:
                yield event

    def _line(self, line: str) -> Event | None:
        if not line:
            return self._dispatch()
        if line.startswith(":"):
            return None  # a comment (heartbeat)
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "event":
            self._kind = value
        elif name == "data":
            self._data.append(value)
        elif name == "id" and "\0" not in value:
            self._id = value
        return None

    def _dispatch(self) -> Event | None:
        kind, data, event_id = self._kind or "message", self._data, self._id
        self._kind, self._data, self._id = "", [], None
        if event_id is not None:
            self.last_id = event_id
        if not data:
            return None
        try:
            decoded = json.loads("\n".join(data))
        except ValueError:
            return None
        if not isinstance(decoded, dict):
            return None
        return Event(kind, decoded, event_id)


Handler = Callable[[Event], Awaitable[None] | None]


async def follow(
    url: str,
    token: str | None,
    handle: Handler,
    *,
    connected: Callable[[bool], None] = lambda up: None,
    backoff: Backoff | None = None,
) -> None:
    """Follow `url` until cancelled, reconnecting with back-off; never raises otherwise."""
    backoff = backoff or Backoff(base=1.0, cap=60.0)
    parser = EventParser()
    shown = redact(url)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=READ_TIMEOUT)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        while True:
            headers = {"Accept": "text/event-stream"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            if parser.last_id:
                headers["Last-Event-ID"] = parser.last_id
            try:
                async with session.get(url, headers=headers, allow_redirects=False) as response:
                    if response.status != 200:
                        raise aiohttp.ClientResponseError(
                            response.request_info, (), status=response.status
                        )
                    connected(True)
                    backoff.succeeded()
                    log.info("following hub events at %s", shown)
                    async for chunk in response.content.iter_any():
                        for event in parser.feed(chunk):
                            outcome = handle(event)
                            if outcome is not None:
                                await outcome
            except asyncio.CancelledError:
                connected(False)
                raise
            except (aiohttp.ClientError, TimeoutError, OSError) as exc:
                log.warning("hub events at %s: %s", shown, redact(str(exc)) or type(exc).__name__)
            connected(False)
            delay = backoff.failed(asyncio.get_running_loop().time())
            await asyncio.sleep(delay)
