"""`memsync hub serve` against the clients an attacker would write, as real processes on
loopback: connections that send half a request head (or a head one byte at a time, or
nothing) and hold it, more connections than the hub may hold, idle keep-alive connections,
and more event streams on one token than it may have.

What the tests watch is what an operator would: the hub's descriptors (/proc/<pid>/fd), its
log lines, whether /v1/health still answers and how fast, and what the clients see.
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import aiohttp
import pytest

from memsync.hub.tokens import hub_init, open_store
from tests.e2e.test_hub_workers import WORKERS, children, held, publish, tcp_inodes
from tests.helpers import metric, wait_for
from tests.integration.test_hub import bearer, build
from tests.kit import HubProcess, hub_process

# A request head cut short three ways: nothing at all, the start of a request the fast lane
# reads itself, the start of one it hands to aiohttp.
HALF_HEADS = (
    b"",
    b"GET /v1/views/auth/manifest HTTP/1.1\r\nHost: x\r\nAuthoriz",
    b"POST /v1/roots/team/notify HTTP/1.1\r\nHost: x\r\nContent-Le",
)
HEALTH = b"GET /v1/health HTTP/1.1\r\nHost: x\r\n\r\n"
PROMPT = 2.0  # seconds /v1/health may take while the hub is under attack (a loaded CI host)


@pytest.fixture
def data(tmp_path: Path) -> Path:
    hub_init(tmp_path / "hub")
    return tmp_path / "hub"


@contextlib.contextmanager
def half_open(
    port: int, count: int, heads: tuple[bytes, ...] = HALF_HEADS
) -> Iterator[list[socket.socket]]:
    """`count` connections that each sent the start of a request head and hold it."""
    conns: list[socket.socket] = []
    try:
        for n in range(count):
            conn = socket.create_connection(("127.0.0.1", port), timeout=5)
            conns.append(conn)
            with contextlib.suppress(ConnectionError):
                conn.sendall(heads[n % len(heads)])
            conn.setblocking(False)
        yield conns
    finally:
        for conn in conns:
            conn.close()


def is_closed(conn: socket.socket) -> bool:
    """Whether the hub closed the connection (EOF or reset); never blocks."""
    try:
        while conn.recv(65536):
            pass
    except BlockingIOError:
        return False
    except ConnectionError:
        return True
    return True


def health_seconds(hub: HubProcess) -> float:
    """How long /v1/health takes on a new connection (it must answer 200)."""
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as conn:
        conn.sendall(HEALTH)
        assert conn.recv(4096).startswith(b"HTTP/1.1 200"), "no health answer"
    return time.monotonic() - started


def closed(hub: HubProcess, data: Path, reason: str) -> float | None:
    """The hub's `memsync_hub_connections_closed_total{reason}`, scraped with a metrics token."""
    store = open_store(data)
    try:
        _id, token = store.create(["metrics"], label="scrape")
    finally:
        store.close()
    request = urllib.request.Request(f"{hub.url}/metrics", headers=bearer(token))
    with urllib.request.urlopen(request, timeout=10) as answer:
        page = answer.read().decode()
    return metric(page, "memsync_hub_connections_closed_total", reason=reason)


def warnings(hub: HubProcess, words: str) -> list[str]:
    return [line for line in hub.log() if words in line]


def test_half_sent_heads_are_closed_after_the_header_timeout(data: Path) -> None:
    with hub_process(data, "--workers", "1", "--header-timeout", "3s") as hub:
        baseline = hub.fds()
        first = time.monotonic()  # the first of the 300 is opened now, the last at `opened`
        with half_open(hub.port, 300) as conns:
            opened = time.monotonic()
            assert max(health_seconds(hub) for _ in range(5)) < PROMPT
            # The hub holds them, for now: it accepts them as it gets to them, so wait for that
            # while the first is under 2 s old (a slow host may be past its timeout by then).
            held: list[int] = []

            def holds_all_or_late() -> bool:
                held.append(hub.fds())
                return held[-1] >= baseline + 300 or time.monotonic() - first >= 2.0

            wait_for(holds_all_or_late, 10, "the hub to accept the 300")
            if time.monotonic() - first < 2.0:
                assert held[-1] >= baseline + 300
                assert not any(is_closed(conn) for conn in conns), "closed before the timeout"
            wait_for(lambda: all(is_closed(c) for c in conns), 15, "the half-open to close")
            wait_for(lambda: hub.fds() <= baseline + 2, 10, "the hub's descriptors to go")
            assert time.monotonic() - opened >= 2.5  # by the timeout, not by anything sooner
            assert health_seconds(hub) < PROMPT
        lines = warnings(hub, "request head did not arrive within 3 s")
        assert 1 <= len(lines) <= 2, lines  # 300 closes, at most a line per interval
        assert len(hub.log()) < 20, hub.log()
        assert (closed(hub, data, "header-timeout") or 0) >= 300  # each close is counted


@pytest.mark.parametrize(
    ("options", "nofile", "cap"),
    [
        (("--max-connections", "40"), None, 40),
        ((), 512, 512 - 64 - 2 * 128),  # 64 stay free, and room to accept 128 twice
    ],
    ids=["option", "from-the-descriptor-limit"],
)
def test_at_the_cap_a_new_connection_closes_the_one_waiting_longest(
    data: Path, options: tuple[str, ...], nofile: int | None, cap: int
) -> None:
    with hub_process(
        data, "--workers", "1", "--header-timeout", "60s", *options, nofile=nofile
    ) as hub:
        baseline = hub.fds()
        with half_open(hub.port, cap + 100) as conns:

            def shut() -> int:
                return sum(is_closed(conn) for conn in conns)

            # (the launcher's last health checks may still be held, and go first)
            wait_for(lambda: shut() >= 98, 10, "the oldest connections to be closed")
            assert shut() <= 100
            assert not any(is_closed(conn) for conn in conns[100:])  # the newest are kept
            assert hub.fds() <= baseline + cap
            # the hub still answers a client that sends its request at once
            assert max(health_seconds(hub) for _ in range(5)) < PROMPT
            assert hub.fds() <= baseline + cap
        wait_for(lambda: hub.fds() <= baseline + 2, 10, "the hub's descriptors to go")
        assert len(warnings(hub, "waited longest for a request")) == 1, hub.log()
        assert not warnings(hub, "Too many open files"), hub.log()
        assert len(hub.log()) < 20, hub.log()
        assert (closed(hub, data, "connection-cap") or 0) >= 98  # each eviction is counted


def test_at_the_cap_with_every_connection_busy_a_new_one_is_closed_at_once(
    data: Path,
) -> None:
    store = open_store(data)
    try:
        _id, token = store.create(["read:*"], label="reader")
    finally:
        store.close()

    async def streams() -> None:
        sessions: list[aiohttp.ClientSession] = []
        try:
            statuses = [await _stream_status(hub.url, token, sessions) for _ in range(4)]
            assert statuses == [200] * 4
            started = time.monotonic()
            assert await asyncio.to_thread(hub.healthy) is False  # closed, not answered...
            assert time.monotonic() - started < PROMPT  # ...at once, not after a timeout
            await sessions[0].close()  # a stream ends: there is room again
            async with asyncio.timeout(10):
                while not await asyncio.to_thread(hub.healthy):
                    await asyncio.sleep(0.05)
        finally:
            for session in sessions:
                await session.close()

    with hub_process(data, "--workers", "1", "--max-connections", "4") as hub:
        asyncio.run(streams())
        assert len(warnings(hub, "all busy: closing new ones at once")) == 1, hub.log()


def drip(conn: socket.socket, head: bytes, until: float) -> float | None:
    """Send `head` a byte every 0.2 s (never its end) until the hub closes the connection;
    the seconds that took, or None if it was still open at `until` (monotonic)."""
    started = time.monotonic()
    for byte in head * 100:
        readable, _, _ = select.select([conn], [], [], 0.2)
        if readable and is_closed(conn):
            return time.monotonic() - started
        if time.monotonic() > until:
            return None
        with contextlib.suppress(ConnectionError):
            conn.send(bytes([byte]))
    return None


@pytest.mark.parametrize(
    ("first", "dripped"),
    [
        (b"", b"GET /v1/views/auth/manifest HTTP/1.1\r\nX-Slow: "),  # the fast lane's
        (b"", b"GET /v1/health HTTP/1.1\r\nX-Slow: "),  # aiohttp's
        (HEALTH, b"GET /v1/health HTTP/1.1\r\nX-Slow: "),  # the next head after an answer
    ],
    ids=["fast-lane", "aiohttp", "after-an-answer"],
)
def test_a_head_sent_a_byte_at_a_time_is_closed_at_the_header_timeout(
    data: Path, first: bytes, dripped: bytes
) -> None:
    with (
        hub_process(
            data, "--workers", "1", "--header-timeout", "2s", "--idle-timeout", "60s"
        ) as hub,
        socket.create_connection(("127.0.0.1", hub.port), timeout=10) as conn,
    ):
        if first:
            conn.sendall(first)
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
        took = drip(conn, dripped, time.monotonic() + 15)
        assert took is not None, "a head that never ends kept its connection"
        assert 1.5 <= took <= 10, took


def test_idle_keep_alive_connections_are_closed(data: Path) -> None:
    manifest, package = build("auth", 1)
    with hub_process(data, "--workers", "1", "--idle-timeout", "2s") as hub:
        store = open_store(data)
        try:
            _id, token = store.create(["admin"], label="test")
        finally:
            store.close()
        assert asyncio.run(publish(hub.url, token, "auth", manifest, package)) == 201
        with contextlib.ExitStack() as stack:
            # one connection answered by aiohttp, one by the fast lane (a 304)
            plain = stack.enter_context(socket.create_connection(("127.0.0.1", hub.port), 10))
            lane = stack.enter_context(socket.create_connection(("127.0.0.1", hub.port), 10))
            conditional = (
                f"GET /v1/views/auth/manifest HTTP/1.1\r\nHost: x\r\n"
                f"Authorization: Bearer {token}\r\nIf-None-Match: *\r\n\r\n"
            ).encode()
            for _ in range(2):  # a second request within the timeout is still served
                plain.sendall(HEALTH)
                assert plain.recv(4096).startswith(b"HTTP/1.1 200")
                lane.sendall(conditional)
                assert lane.recv(4096).startswith(b"HTTP/1.1 304")
            answered = time.monotonic()
            for conn in (plain, lane):
                conn.setblocking(False)
            wait_for(lambda: is_closed(plain) and is_closed(lane), 10, "idle connections to close")
            assert time.monotonic() - answered >= 1.5


def flood_unread(port: int, request: bytes) -> socket.socket:
    """A connection that sends `request` over and over, pipelined, and reads nothing: a
    small receive buffer, requests sent for a second or until the hub stops taking them."""
    conn = socket.socket()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn.connect(("127.0.0.1", port))
    conn.setblocking(False)
    batch, until = request * 256, time.monotonic() + 1
    with contextlib.suppress(BlockingIOError, ConnectionError):
        while time.monotonic() < until and select.select([], [conn], [], 0.2)[1]:
            conn.send(batch)
    return conn


TCP_CLOSE, TCP_CLOSE_WAIT = 7, 8  # tcpi_state values (linux/tcp_states.h)


def shut_by_hub(conn: socket.socket) -> bool:
    """Whether the hub closed or reset the connection, seen in the socket's TCP state
    (reading would take what the hub sent: this client never reads)."""
    return conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] in (TCP_CLOSE, TCP_CLOSE_WAIT)


def test_a_client_that_reads_none_of_its_answers_is_closed(data: Path) -> None:
    manifest, package = build("auth", 1)
    # The fast lane stops reading mid-head: the head's deadline closes that one, as soon.
    limits = ("--idle-timeout", "2s", "--header-timeout", "2s")
    with hub_process(data, "--workers", "1", *limits) as hub:
        store = open_store(data)
        try:
            _id, token = store.create(["admin"], label="test")
        finally:
            store.close()
        assert asyncio.run(publish(hub.url, token, "auth", manifest, package)) == 201
        conditional = (
            f"GET /v1/views/auth/manifest HTTP/1.1\r\nHost: x\r\n"
            f"Authorization: Bearer {token}\r\nIf-None-Match: *\r\n\r\n"
        ).encode()
        baseline = hub.fds()
        conns = [flood_unread(hub.port, request) for request in (HEALTH, conditional)]
        try:
            wait_for(lambda: all(shut_by_hub(c) for c in conns), 20, "the stalled to be closed")
            wait_for(lambda: hub.fds() <= baseline, 10, "the hub's descriptors to go")
        finally:
            for conn in conns:
                conn.close()
        assert len(warnings(hub, "read none of its answer for 2 s")) == 1, hub.log()  # aiohttp's
        # (the fast lane's is closed by the deadline of its head, or of its idleness)


async def _stream_status(url: str, token: str, sessions: list[aiohttp.ClientSession]) -> int:
    """Open an event stream on a new connection; its status (the stream stays open)."""
    session = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1))
    sessions.append(session)
    response = await session.get(f"{url}/v1/events", headers=bearer(token))
    if response.status == 200:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        return 200
    body = await response.json()
    assert body["error"]["code"] == "too-many-streams", body
    assert "Retry-After" in response.headers
    response.release()
    return response.status


async def _streams(hub: HubProcess, first: str, second: str, cap: int) -> None:
    sessions: list[aiohttp.ClientSession] = []
    try:
        assert [await _stream_status(hub.url, first, sessions) for _ in range(cap)] == [200] * cap
        # the streams are spread over the workers, yet the cap is the token's in all of them
        inodes = tcp_inodes(hub.port, "01")
        spread = [held(pid, inodes) for pid in children(hub.proc.pid)]
        past = [await _stream_status(hub.url, first, sessions) for _ in range(12)]
        assert past == [429] * 12, (past, spread)
        assert await _stream_status(hub.url, second, sessions) == 200  # another token's own
        await sessions[0].close()  # one of the first token's streams ends...

        async def reopened() -> bool:
            return await _stream_status(hub.url, first, sessions) == 200

        async with asyncio.timeout(10):  # ...and its place is free at once, not at a ping
            while not await reopened():
                await asyncio.sleep(0.05)
    finally:
        for session in sessions:
            await session.close()


def test_a_token_holds_at_most_its_cap_of_event_streams_across_workers(data: Path) -> None:
    store = open_store(data)
    try:
        _a, first = store.create(["read:*"], label="first")
        _b, second = store.create(["read:*"], label="second")
    finally:
        store.close()
    with hub_process(data, "--workers", str(WORKERS), "--max-streams-per-token", "4") as hub:
        wait_for(lambda: len(children(hub.proc.pid)) == WORKERS, 10, "the workers")
        asyncio.run(_streams(hub, first, second, 4))
        assert not warnings(hub, "Traceback"), hub.log()


@pytest.mark.parametrize(("options", "cap"), [((), 1), (("--max-streams-per-token", "2"), 2)])
def test_the_limits_come_from_the_hub_section_and_the_options_override_it(
    data: Path, tmp_path: Path, options: tuple[str, ...], cap: int
) -> None:
    config = tmp_path / "memsync.yaml"
    config.write_text(
        f"version: 1\nhub: {{data_dir: {data}, max_streams_per_token: 1, idle_timeout: 1s}}\n"
    )
    store = open_store(data)
    try:
        _id, token = store.create(["read:*"], label="reader")
    finally:
        store.close()

    async def statuses() -> list[int]:
        sessions: list[aiohttp.ClientSession] = []
        try:
            return [await _stream_status(hub.url, token, sessions) for _ in range(cap + 1)]
        finally:
            for session in sessions:
                await session.close()

    with hub_process(data, "--workers", "1", *options, config=config) as hub:
        assert asyncio.run(statuses()) == [200] * cap + [429]
        with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as conn:
            conn.sendall(HEALTH)
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
            conn.setblocking(False)
            wait_for(lambda: is_closed(conn), 10, "the idle timeout of the config")


@pytest.mark.parametrize(
    "option",
    [
        ("--header-timeout", "0s"),
        ("--idle-timeout", "soon"),
        ("--max-connections", "0"),
        ("--max-streams-per-token", "-1"),
        ("--stop-grace", "0s"),
    ],
)
def test_a_limit_out_of_range_is_a_usage_error(data: Path, option: tuple[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memsync", "hub", "serve", "--data", str(data), *option],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert option[0] in done.stderr
