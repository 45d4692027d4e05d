"""The little HTTP/1.1 server behind the control socket, on asyncio streams alone.

The control socket answers one user's own CLI with small JSON documents: it needs no web
framework, and an idle daemon should not hold one (issue 18: aiohttp loads only for what
speaks HTTP over the network, hub events, HTTP views, webhooks and `http.listen`).

What it speaks: a request line, headers, a body delimited by Content-Length or chunked,
keep-alive as HTTP/1.1 has it, `Expect: 100-continue`, HEAD answered as GET without the
body. Every part is bounded: the head (`MAX_HEAD` bytes), the body (`max_body`: a larger
one is handed on as too large, read and dropped up to `MAX_DRAIN`, and the connection
closes after the answer), the wait for a head or a body (`IDLE`), the wait for handlers at
shutdown. Something that is not HTTP gets a JSON error and the connection closes; the
server goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from http import HTTPStatus

from memsync.wire import documents

log = logging.getLogger(__name__)

MAX_HEAD = 16 * 1024  # request line and headers (a client of ours sends ~100 bytes)
MAX_HEADERS = 64
IDLE = 75.0  # seconds to wait for a request's head or body (aiohttp's keep-alive time)
MAX_DRAIN = 1024 * 1024  # a body over the cap up to this size is read and dropped
SHUTDOWN_GRACE = 10.0  # seconds running handlers get to answer when the server stops
JSON = "application/json; charset=utf-8"
# A header's name: RFC 9110's token characters.
_TOKEN = frozenset("!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")


@dataclass(frozen=True)
class Request:
    """One request: `body` is None when it was larger than the server takes (unread)."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes | None
    sock: socket.socket | None


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = JSON
    headers: tuple[tuple[str, str], ...] = field(default=())


Handler = Callable[[Request], Awaitable[Response]]


def error(status: int, code: str, message: str) -> Response:
    """The error document every refusal of the control socket is."""
    return Response(status, documents.control_error(code, message))


def reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Unknown"


class _BadRequest(Exception):
    pass


class _BadChunk(ConnectionError):
    """A chunked body that is not one: the connection ends without an answer."""


@dataclass(frozen=True)
class _Head:
    method: str
    path: str
    version: str
    headers: dict[str, str]


async def _discard(reader: asyncio.StreamReader, length: int) -> None:
    while length > 0:
        length -= len(await reader.readexactly(min(length, 64 * 1024)))


def parse_head(raw: bytes) -> _Head:
    """The request line and headers of `raw` (ending in a blank line); _BadRequest when
    they are not HTTP/1.x."""
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError as exc:  # pragma: no cover - latin-1 decodes every byte
        raise _BadRequest from exc
    line, *lines = text[:-4].split("\r\n")
    parts = line.split(" ")
    if len(parts) != 3 or parts[2] not in ("HTTP/1.0", "HTTP/1.1"):
        raise _BadRequest
    method, target, version = parts
    if not method.isascii() or not method.isalpha() or not method.isupper():
        raise _BadRequest
    if not target.startswith("/") or any(c <= " " or c == "\x7f" for c in target):
        raise _BadRequest
    if len(lines) > MAX_HEADERS:
        raise _BadRequest
    headers: dict[str, str] = {}
    for header in lines:
        name, colon, value = header.partition(":")
        if not colon or not name or not set(name) <= _TOKEN:
            raise _BadRequest
        key = name.lower()
        value = value.strip(" \t")
        if any(c != "\t" and (c < " " or c == "\x7f") for c in value):
            raise _BadRequest  # a control character (a lone CR, a NUL) is no header's
        if key in headers:
            if key in ("content-length", "transfer-encoding", "host"):
                raise _BadRequest
            headers[key] = f"{headers[key]}, {value}"
        else:
            headers[key] = value
    return _Head(method, target.split("?", 1)[0], version, headers)


def _keep_alive(head: _Head) -> bool:
    tokens = {t.strip().lower() for t in head.headers.get("connection", "").split(",")}
    if head.version == "HTTP/1.1":
        return "close" not in tokens
    return "keep-alive" in tokens


def _encode(response: Response, *, head_only: bool, close: bool) -> bytes:
    lines = [
        f"HTTP/1.1 {response.status} {reason(response.status)}",
        f"Content-Type: {response.content_type}",
        f"Content-Length: {len(response.body)}",
        *(f"{name}: {value}" for name, value in response.headers),
    ]
    if close:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body


class Server:
    """Serves `handler` on a listening unix socket until `stop`."""

    def __init__(self, handler: Handler, *, max_body: int) -> None:
        self._handler = handler
        self._max_body = max_body
        self._server: asyncio.AbstractServer | None = None
        self._connections: set[asyncio.Task[None]] = set()
        self._busy: set[asyncio.Task[None]] = set()  # between a request's head and its answer

    async def start_unix(self, path: str) -> None:
        self._server = await asyncio.start_unix_server(self._connection, path, limit=MAX_HEAD)

    async def stop(self) -> None:
        """Stop listening, close idle connections at once, give running handlers
        `SHUTDOWN_GRACE` seconds to answer, then cancel them."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
        for task in self._connections - self._busy:
            task.cancel()
        running = set(self._connections)
        if running:
            _, late = await asyncio.wait(running, timeout=SHUTDOWN_GRACE)
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=SHUTDOWN_GRACE)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._connections.add(task)
        try:
            while await self._one(reader, writer, task):
                pass
        except (
            ConnectionError,
            asyncio.IncompleteReadError,
            asyncio.LimitOverrunError,
            TimeoutError,
        ):
            pass  # the client went away, said nothing in time, or sent a broken chunked body
        finally:
            if task is not None:
                self._connections.discard(task)
                self._busy.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _one(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        task: asyncio.Task[None] | None,
    ) -> bool:
        """Serve one request; whether the connection stays open for another."""
        if task is not None:
            self._busy.discard(task)
        try:
            raw = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), IDLE)
        except asyncio.IncompleteReadError as exc:
            if exc.partial.strip():
                await self._send(writer, error(400, "http", "Bad Request"), close=True)
            return False
        except asyncio.LimitOverrunError:
            await self._send(writer, error(400, "http", "Bad Request"), close=True)
            return False
        if task is not None:
            self._busy.add(task)
        try:
            head = parse_head(raw)
        except _BadRequest:
            await self._send(writer, error(400, "http", "Bad Request"), close=True)
            return False
        coding = head.headers.get("transfer-encoding")
        length_text = head.headers.get("content-length", "0")
        if (
            coding is not None and (coding.lower() != "chunked" or "content-length" in head.headers)
        ) or (not length_text.isdigit() or not length_text.isascii()):
            await self._send(writer, error(400, "http", "Bad Request"), close=True)
            return False
        length = int(length_text)
        keep = _keep_alive(head)
        body: bytes | None = None
        if length > self._max_body:
            keep = False  # answered 413, and the connection carries no other request
            if length <= MAX_DRAIN:  # read it all, so that a client that sends before it
                await asyncio.wait_for(_discard(reader, length), IDLE)  # reads gets the answer
        else:
            if (length or coding) and head.headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            if coding is not None:
                body = await asyncio.wait_for(self._chunked(reader), IDLE)
                keep = keep and body is not None
            elif length:
                body = await asyncio.wait_for(reader.readexactly(length), IDLE)
            else:
                body = b""
        sock = writer.get_extra_info("socket")
        request = Request(head.method, head.path, head.headers, body, sock)
        response = await self._handler(request)
        await self._send(writer, response, close=not keep, head_only=head.method == "HEAD")
        return keep

    async def _chunked(self, reader: asyncio.StreamReader) -> bytes | None:
        """A chunked body; None when it grows past `max_body` (the rest stays unread).
        _BadChunk when it is not one."""
        parts: list[bytes] = []
        size = 0
        while True:
            line = await reader.readuntil(b"\r\n")
            digits = line[:-2].split(b";", 1)[0].strip()
            if (
                not digits
                or len(digits) > 8
                or any(c not in b"0123456789abcdefABCDEF" for c in digits)
            ):
                raise _BadChunk
            chunk = int(digits, 16)
            if chunk == 0:
                while await reader.readuntil(b"\r\n") != b"\r\n":  # trailers, bounded by MAX_HEAD
                    pass
                return b"".join(parts)
            size += chunk
            if size > self._max_body:
                return None
            parts.append(await reader.readexactly(chunk))
            if await reader.readexactly(2) != b"\r\n":
                raise _BadChunk

    @staticmethod
    async def _send(
        writer: asyncio.StreamWriter, response: Response, *, close: bool, head_only: bool = False
    ) -> None:
        writer.write(_encode(response, head_only=head_only, close=close))
        await writer.drain()
