"""Servers on loopback for end-to-end tests: a hub whose stderr the test reads (on
`tests/kit.hub_process`), a hostile events server, a static file host."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from tests.kit import hub_process


@contextlib.contextmanager
def running_hub(data: Path) -> Iterator[tuple[str, list[str]]]:
    """A hub serving `data`; yields its URL and, once it stopped, its stderr lines.

    One process (`--workers 1`): these tests are about what a hub serves, not how its
    workers share it (`test_hub_workers`); each more worker would import the manifest's
    models again after the first upload (~0.17 s of CPU per hub)."""
    log: list[str] = []
    with hub_process(data, "--workers", "1") as hub:
        try:
            yield hub.url, log
        finally:
            hub.proc.terminate()
            hub.proc.wait(timeout=15)
            log += hub.log()


# --- a hostile hub: an aiohttp server on loopback, in its own thread and event loop ---------

GOOD_EVENT = b'id: 42\nevent: upstream\ndata: {"root": "team", "commit": "x"}\n\n'


@dataclass
class HostileHub:
    """Serves `GET /v1/events` (and records every request) in the mode the test sets:

    - `good`: one upstream event (id 42), then heartbeats;
    - `flood`: blank lines and comments, never an event;
    - `endless`: `data:` lines that never end the event;
    - `gzip`: the endless event gzip-compressed (`Content-Encoding: gzip`): a bomb;
    - `badid`: the good event, then events whose ids are non-ASCII, over-long or hold
      control characters;
    - `redirect`: `302` to `redirect_to`.

    Each connection sends at most `per_connection` bytes (after compression) and stops when
    the test ends; `BADID_BYTES` is `badid`'s events and no heartbeat, so a connection ends
    right after its last bad id (heartbeats come one per 50 ms pause: a drop after more
    bytes only waits). `sent` counts the bytes written, per connection.
    """

    url: str = ""
    mode: str = "good"
    per_connection: int = 200 * 1024 * 1024
    requests: list[dict[str, str]] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)
    redirect_to: str = ""
    stopping: threading.Event = field(default_factory=threading.Event)

    async def events(self, request: web.Request) -> web.StreamResponse:
        self.requests.append(dict(request.headers))
        mode, index = self.mode, len(self.sent)
        self.sent.append(0)
        if mode == "redirect":
            raise web.HTTPFound(self.redirect_to)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        if mode == "gzip":
            response.headers["Content-Encoding"] = "gzip"
        await response.prepare(request)
        for block in _blocks(mode):
            if self.stopping.is_set() or self.sent[index] >= self.per_connection:
                break
            if block is None:
                await asyncio.sleep(0.05)
                continue
            try:
                await response.write(block)
            except (ConnectionError, RuntimeError):
                break  # the client dropped the stream
            self.sent[index] += len(block)
        return response


def _blocks(mode: str) -> Iterator[bytes | None]:
    """What a connection sends, block by block; None is a short pause."""
    if mode == "good":
        yield GOOD_EVENT
        while True:
            yield b": heartbeat\n\n"
            yield None  # a pause
    elif mode == "badid":
        yield GOOD_EVENT  # then ids that must never go back in a header
        for bad in (b"\xc3\xa9", b"7" * 300, b"4\x01", b"5\r\x7f"):
            yield b"id: " + bad + b'\nevent: upstream\ndata: {"root": "other"}\n\n'
        while True:
            yield b": heartbeat\n\n"
            yield None
    elif mode == "flood":
        block = (b"\n" * 16000 + b": c\n" + b"\r\n" * 100) * 64  # 1 MB
        while True:
            yield block
    elif mode == "endless":
        block = b"data: " + b"x" * 1000 + b"\n"
        yield b"event: upstream\n"
        while True:
            yield block * 64
    else:  # gzip: about 1000:1
        packer = zlib.compressobj(9, zlib.DEFLATED, 31)
        plain = b"event: upstream\n" + (b"data: " + b"x" * 1000 + b"\n") * 1024
        packed = packer.compress(plain) + packer.flush(zlib.Z_SYNC_FLUSH)
        yield packed
        more = packer.compress((b"data: " + b"x" * 1000 + b"\n") * 1024)
        more += packer.flush(zlib.Z_SYNC_FLUSH)
        while True:
            yield more  # the same deflate block again: each one more 1 MiB of data


BADID_BYTES = sum(len(block or b"") for block in itertools.islice(_blocks("badid"), 5))


@contextlib.contextmanager
def hostile_hub(host: str = "127.0.0.1") -> Iterator[HostileHub]:
    """A `HostileHub` listening on `host` (an ephemeral port) until the block ends."""
    hub = HostileHub()
    app = web.Application()
    app.router.add_get("/v1/events", hub.events)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    loop = asyncio.new_event_loop()
    up = threading.Event()

    async def start() -> None:
        await runner.setup()
        site = web.TCPSite(runner, host, 0)
        await site.start()
        server = site._server
        assert server is not None
        port = server.sockets[0].getsockname()[1]
        hub.url = f"http://{host}:{port}"
        up.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(start())
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name="hostile-hub", daemon=True)
    thread.start()
    assert up.wait(10), "the hostile hub did not start"
    try:
        yield hub
    finally:
        hub.stopping.set()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(15)


# --- a static host: what `views build --out DIR` is served by (nginx, a CDN) -----------------


@contextlib.contextmanager
def static_site(directory: Path) -> Iterator[str]:
    """Python's own static file server on loopback serving `directory`; yields its URL."""
    import functools  # noqa: PLC0415
    import http.server  # noqa: PLC0415

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            return

    handler = functools.partial(Quiet, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="static-site", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(15)
