"""A real view server on loopback for tests, with a fault chosen per request.

`serve(state)` runs the app from `make_app(state)` on 127.0.0.1 with an ephemeral port and
yields a `FlakyServer`. The app serves a fixed manifest and package under the hub's paths
(`/v1/views/{id}/manifest`, `/v1/views/{id}/package`) with strong ETags and `304` on
`If-None-Match`. Each request takes the next fault from `state.faults` (then
`state.default`, a fault or a function choosing one), and every request's path and headers
are recorded in `state.seen` so tests can assert what crossed which origin.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import struct
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from enum import StrEnum

from aiohttp import web

MANIFEST = b'{"signed": {"_type": "memsync.view-manifest", "view_id": "auth", "revision": 7}}'
PACKAGE = hashlib.sha256(b"seed").digest() * 8192  # 256 KiB: several reads, not one


class Fault(StrEnum):
    OK = "ok"
    RESET = "reset"  # headers and half the body, then a TCP reset
    HANGUP = "hangup"  # a TCP reset before any byte of the response
    STALL = "stall"  # sleep `stall_seconds` before answering
    TRICKLE = "trickle"  # one byte every `trickle_interval`
    TRUNCATE = "truncate"  # Content-Length of the whole body, half of it, then close
    LIE = "lie"  # Content-Length smaller than the body that follows
    BLOAT = "bloat"  # chunked body with extra bytes after the real content
    E500 = "500"
    E503 = "503"
    E429 = "429"  # with Retry-After: `retry_after`
    E404 = "404"
    E401 = "401"
    E403 = "403"
    REDIRECT = "redirect"  # 302 to the same path on `redirect_to` (another origin)
    REDIRECT_LOOP = "redirect-loop"  # 302 to /loop, which redirects to itself forever


@dataclass(frozen=True)
class Seen:
    path: str
    headers: dict[str, str]


@dataclass
class FlakyState:
    manifest: bytes = MANIFEST
    package: bytes = PACKAGE
    faults: deque[Fault] = field(default_factory=deque)
    default: Fault | Callable[[], Fault] = Fault.OK
    redirect_to: str | None = None
    stall_seconds: float = 5.0
    trickle_interval: float = 0.2
    retry_after: str = "0"
    seen: list[Seen] = field(default_factory=list)

    def script(self, *faults: Fault) -> None:
        """The next requests get these faults, in order; later ones get `default`."""
        self.faults.extend(faults)

    def next_fault(self) -> Fault:
        if self.faults:
            return self.faults.popleft()
        return self.default() if callable(self.default) else self.default


@dataclass(frozen=True)
class FlakyServer:
    state: FlakyState
    url: str  # http://127.0.0.1:<port>

    def manifest_url(self, view: str = "auth") -> str:
        return f"{self.url}/v1/views/{view}/manifest"

    def package_url(self, view: str = "auth") -> str:
        return f"{self.url}/v1/views/{view}/package"


def etag_of(body: bytes) -> str:
    return f'"sha256:{hashlib.sha256(body).hexdigest()}"'


def _raw(
    request: web.Request, head: dict[str, str] | None, body: bytes, *, reset: bool
) -> web.StreamResponse:
    """Write a hand-made response (if any) straight to the socket, then drop the connection."""
    transport = request.transport
    if transport is None:
        raise ConnectionResetError("client already gone")
    if head is not None:
        lines = "".join(f"{key}: {value}\r\n" for key, value in head.items())
        transport.write(f"HTTP/1.1 200 OK\r\n{lines}\r\n".encode("ascii") + body)
    if reset:  # SO_LINGER 0: close sends RST instead of FIN
        sock = transport.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
    else:
        transport.close()
    # Writing this one to the closed transport fails quietly (a "premature disconnection").
    return web.Response()


async def _answer(state: FlakyState, request: web.Request, body: bytes) -> web.StreamResponse:
    state.seen.append(Seen(request.path, dict(request.headers)))
    fault = state.next_fault()
    etag = etag_of(body)
    half = body[: len(body) // 2]
    if fault is Fault.STALL:
        await asyncio.sleep(state.stall_seconds)
    elif fault is Fault.TRICKLE:
        resp = web.StreamResponse(headers={"ETag": etag})
        resp.content_length = len(body)
        await resp.prepare(request)
        for i in range(len(body)):
            await resp.write(body[i : i + 1])
            await asyncio.sleep(state.trickle_interval)
        return resp
    elif fault in (Fault.RESET, Fault.TRUNCATE):
        return _raw(request, {"Content-Length": str(len(body))}, half, reset=fault is Fault.RESET)
    elif fault is Fault.HANGUP:
        return _raw(request, None, b"", reset=True)
    elif fault is Fault.LIE:
        return _raw(request, {"Content-Length": str(len(body) - 10)}, body, reset=False)
    elif fault is Fault.BLOAT:
        resp = web.StreamResponse(headers={"ETag": etag})
        resp.enable_chunked_encoding()
        await resp.prepare(request)
        await resp.write(body)
        await resp.write(b"x" * 4096)
        return resp
    elif fault is Fault.E429:
        return web.Response(status=429, headers={"Retry-After": state.retry_after})
    elif fault in (Fault.E500, Fault.E503, Fault.E404, Fault.E401, Fault.E403):
        return web.Response(status=int(fault.value), text='{"error": {"code": "fault"}}')
    elif fault is Fault.REDIRECT:
        if state.redirect_to is None:
            raise RuntimeError("Fault.REDIRECT needs state.redirect_to")
        raise web.HTTPFound(location=state.redirect_to + request.path_qs)
    elif fault is Fault.REDIRECT_LOOP:
        raise web.HTTPFound(location="/loop")
    if request.headers.get("If-None-Match") == etag:
        return web.Response(status=304, headers={"ETag": etag})
    return web.Response(body=body, headers={"ETag": etag})


def make_app(state: FlakyState) -> web.Application:
    async def manifest(request: web.Request) -> web.StreamResponse:
        return await _answer(state, request, state.manifest)

    async def package(request: web.Request) -> web.StreamResponse:
        return await _answer(state, request, state.package)

    async def loop(request: web.Request) -> web.StreamResponse:
        state.seen.append(Seen(request.path, dict(request.headers)))
        raise web.HTTPFound(location="/loop")

    app = web.Application()
    app.router.add_get("/loop", loop)
    app.router.add_get("/v1/views/{view}/manifest", manifest)
    app.router.add_get("/v1/views/{view}/package", package)
    return app


@asynccontextmanager
async def serve(state: FlakyState | None = None) -> AsyncIterator[FlakyServer]:
    """Run the app on 127.0.0.1 with an ephemeral port until the block ends."""
    state = state or FlakyState()
    # handler_cancellation: a stalled or trickling handler stops when the client hangs up.
    runner = web.AppRunner(
        make_app(state), handler_cancellation=True, shutdown_timeout=0.5, access_log=None
    )
    await runner.setup()
    try:
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        yield FlakyServer(state, f"http://{host}:{port}")
    finally:
        await runner.cleanup()
