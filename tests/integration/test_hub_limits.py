"""Bodies over the hub's caps are cut off: the 413 arrives, the rest of the body is never
read, and the connection is closed.

A raw client on loopback sends far more than the cap and counts the body bytes the kernel
accepted before the hub closed the connection. Small socket buffers on both ends keep what
the kernels can absorb small, so that count is close to what the hub itself read.
"""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memsync.hub.app import MAX_NOTIFY, hub_runner, hub_site, make_app
from memsync.hub.tokens import hub_init

CAP = 256 * 1024  # the hub's max_upload in these tests
PIECE = 16 * 1024  # the client sends the body in HTTP chunks of this size
SOCKET_BUFFER = 16 * 1024  # SO_RCVBUF of the hub, SO_SNDBUF of the client (Linux doubles it)
# What the client may get into the connection beyond what the hub needed to see the cap
# crossed: the two kernels' buffers (2 x 2 x SOCKET_BUFFER), what aiohttp buffers before
# it pauses reading (2 x 64 KiB) and one socket read (up to 256 KiB, bounded by the buffer).
SLACK = 384 * 1024
DEADLINE = 20.0  # seconds the client waits on a socket that neither moves nor closes
BOUNDARY = "memsyncboundary"


@dataclass
class SmallHub:
    port: int
    admin: str
    data: Path


@dataclass
class Outcome:
    sent: int  # body bytes the client's kernel accepted before the hub closed
    answer: bytes  # everything the hub sent back
    closed: bool  # the hub closed the connection (EOF or reset) within the deadline


@pytest.fixture
async def small_hub(tmp_path: Path) -> AsyncIterator[SmallHub]:
    data = tmp_path / "hub"
    admin = hub_init(data)
    runner = hub_runner(make_app(data, max_upload=CAP))
    await runner.setup()
    with socket.socket() as listener:
        # accepted connections inherit the listener's receive buffer
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
        listener.bind(("127.0.0.1", 0))
        try:
            await hub_site(runner, listener).start()
            yield SmallHub(listener.getsockname()[1], admin, data)
        finally:
            await runner.cleanup()


def _send(port: int, head: bytes, frames: Iterator[tuple[bytes, int]]) -> Outcome:
    """Blocking client: the request head, then `frames` (wire bytes, body bytes they carry)
    until the hub stops taking them; then the answer, then whether the hub closed."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, SOCKET_BUFFER)
    sock.settimeout(DEADLINE)
    with sock:
        sock.connect(("127.0.0.1", port))
        sock.sendall(head)
        sent = 0
        try:
            for wire, carried in frames:
                sock.sendall(wire)
                sent += carried
        except (BrokenPipeError, ConnectionResetError):
            pass  # the hub closed the connection: what was sent so far is the count
        except TimeoutError:
            return Outcome(sent, b"", closed=False)  # the hub neither reads nor closes
        answer = b""
        try:
            while not _complete(answer) and (data := sock.recv(65536)):
                answer += data
            closed = not _complete(answer) or sock.recv(65536) == b""
        except ConnectionResetError:
            closed = True
        except TimeoutError:
            closed = False
    return Outcome(sent, answer, closed)


def _complete(answer: bytes) -> bool:
    """Whether `answer` holds a whole HTTP response with a Content-Length."""
    head, found, body = answer.partition(b"\r\n\r\n")
    if not found:
        return False
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.lower().split(b"\r\n")
        if line.startswith(b"content-length:")
    )
    return len(body) >= length


def _chunked(prefix: bytes, filler: int, line: bytes = b"x") -> Iterator[tuple[bytes, int]]:
    """A chunked body: `prefix`, then about `filler` bytes of `line` repeated, PIECE at a time."""
    yield b"%x\r\n%s\r\n" % (len(prefix), prefix), len(prefix)
    piece = line * (PIECE // len(line))
    for _ in range(filler // len(piece)):
        yield b"%x\r\n%s\r\n" % (len(piece), piece), len(piece)
    yield b"0\r\n\r\n", 0


def _plain(prefix: bytes, filler: int) -> Iterator[tuple[bytes, int]]:
    """The same body without chunk framing (for a request with a Content-Length)."""
    yield prefix, len(prefix)
    piece = b"x" * PIECE
    for _ in range(filler // PIECE):
        yield piece, PIECE


def _head(path: str, token: str, content_type: str, length: int | None = None) -> bytes:
    framing = "Transfer-Encoding: chunked" if length is None else f"Content-Length: {length}"
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n"
        f"Content-Type: {content_type}\r\n{framing}\r\n\r\n"
    ).encode()


def _error_code(answer: bytes) -> tuple[int, str]:
    if not _complete(answer):
        return 0, f"no whole answer: {answer[:200]!r}"
    head, _, body = answer.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body)["error"]["code"]


UPLOAD_PREFIX = (
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="manifest"\r\n\r\n{{}}\r\n'
    f'--{BOUNDARY}\r\nContent-Disposition: form-data; name="package"\r\n\r\n'
).encode()
UPLOAD_TYPE = f"multipart/form-data; boundary={BOUNDARY}"


@pytest.mark.parametrize("framing", ["chunked", "content-length", "preamble"])
async def test_an_upload_over_the_cap_is_cut_off_at_the_cap(
    small_hub: SmallHub, framing: str
) -> None:
    total = 50 * CAP
    path = "/v1/views/auth/revisions"
    if framing == "chunked":
        head, frames = _head(path, small_hub.admin, UPLOAD_TYPE), _chunked(UPLOAD_PREFIX, total)
    elif framing == "preamble":  # short lines before the first boundary: no part is ever reached
        head = _head(path, small_hub.admin, UPLOAD_TYPE)
        frames = _chunked(b"preamble\r\n", total, b"preamble\r\n")
    else:
        length = len(UPLOAD_PREFIX) + total
        head = _head(path, small_hub.admin, UPLOAD_TYPE, length)
        frames = _plain(UPLOAD_PREFIX, total)
    outcome = await asyncio.to_thread(_send, small_hub.port, head, frames)
    assert _error_code(outcome.answer) == (413, "too-large")
    assert outcome.sent <= CAP + SLACK, f"the hub took {outcome.sent} bytes of {total}"
    assert outcome.closed, "the hub kept the connection open"
    assert list((small_hub.data / "tmp").iterdir()) == []
    assert not (small_hub.data / "views" / "auth").exists()


@pytest.mark.parametrize("framing", ["chunked", "content-length"])
async def test_a_notify_body_over_the_cap_is_cut_off_at_the_cap(
    small_hub: SmallHub, framing: str
) -> None:
    total = 8 * 1024 * 1024  # ~2000 times the cap: far more than the slack
    path, prefix = "/v1/roots/team/notify", b'{"commit": "'
    if framing == "chunked":
        head, frames = _head(path, small_hub.admin, "application/json"), _chunked(prefix, total)
    else:
        length = len(prefix) + total
        head = _head(path, small_hub.admin, "application/json", length)
        frames = _plain(prefix, total)
    outcome = await asyncio.to_thread(_send, small_hub.port, head, frames)
    assert _error_code(outcome.answer) == (413, "too-large")
    assert outcome.sent <= MAX_NOTIFY + SLACK, f"the hub took {outcome.sent} bytes of {total}"
    assert outcome.closed, "the hub kept the connection open"


async def test_an_upload_refused_before_its_body_is_not_read(small_hub: SmallHub) -> None:
    head = _head("/v1/views/auth/revisions", "not-a-token", UPLOAD_TYPE)
    frames = _chunked(UPLOAD_PREFIX, 50 * CAP)
    outcome = await asyncio.to_thread(_send, small_hub.port, head, frames)
    assert _error_code(outcome.answer) == (401, "malformed-token")
    assert outcome.sent <= SLACK, f"the hub took {outcome.sent} bytes of {50 * CAP}"
    assert outcome.closed, "the hub kept the connection open"
