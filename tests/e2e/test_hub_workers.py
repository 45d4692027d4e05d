"""`memsync hub serve --workers N` as a real process tree on loopback: connections spread
over the workers by the kernel (SO_REUSEPORT), and each worker answers from the one data
dir: revisions and events published through any worker reach every stream, a revoked
token is refused by every worker, concurrent uploads stay consistent, and the supervisor
stops the whole hub on SIGTERM (exit 0) or when a worker dies (exit 3).

Which worker holds a connection is read from /proc (socket inodes), not from anything the
hub says: the tests observe the process tree as an operator would.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import pytest

from memsync.hub.tokens import hub_init
from tests.helpers import wait_for
from tests.integration.test_hub import Stream, bearer, build, etag
from tests.kit import free_port

WORKERS = 2
ESTABLISHED, LISTEN = "01", "0A"


# -- the process tree, as /proc shows it ------------------------------------------------------


def children(pid: int) -> list[int]:
    with contextlib.suppress(FileNotFoundError):
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
        return [int(child) for child in text.split()]
    return []


def alive(pid: int) -> bool:
    """Running (a zombie, reaped by nobody yet, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def tcp_inodes(port: int, state: str) -> set[int]:
    """Socket inodes of loopback TCP sockets on local `port` in `state` (hex, as /proc)."""
    found: set[int] = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(FileNotFoundError), open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == state:
                    found.add(int(fields[9]))
    return found


def held(pid: int, inodes: set[int]) -> int:
    """How many of `inodes` process `pid` has open."""
    count = 0
    with contextlib.suppress(FileNotFoundError):
        for fd in os.listdir(f"/proc/{pid}/fd"):
            with contextlib.suppress(FileNotFoundError):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:[") and int(target[8:-1]) in inodes:
                    count += 1
    return count


# -- the hub ----------------------------------------------------------------------------------


@dataclass
class Hub:
    proc: subprocess.Popen[bytes]
    url: str
    port: int
    data: Path
    admin: str
    stderr: Path

    @property
    def workers(self) -> list[int]:
        return children(self.proc.pid)

    def connections(self) -> list[int]:
        """Established client connections each worker holds."""
        inodes = tcp_inodes(self.port, ESTABLISHED)
        return [held(pid, inodes) for pid in self.workers]

    def log(self) -> str:
        return self.stderr.read_text()

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "memsync", "hub", *args, "--data", str(self.data)],
            capture_output=True,
            text=True,
            check=True,
        )


def start_hub(
    tmp_path: Path,
    data: Path,
    port: int,
    workers: int = WORKERS,
    *options: str,
    env: dict[str, str] | None = None,
) -> Hub:
    stderr = tmp_path / f"hub-{port}-{time.monotonic_ns()}.log"
    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "memsync", "hub", "serve", "--data", str(data)),
                *("--listen", f"127.0.0.1:{port}", "--workers", str(workers)),
                *options,
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=None if env is None else {**os.environ, **env},
        )
    return Hub(proc, f"http://127.0.0.1:{port}", port, data, "", stderr)


def wait_listening(hub: Hub, workers: int = WORKERS) -> None:
    """Until every worker listens on the port (each has its own SO_REUSEPORT socket)."""

    def listening() -> bool:
        assert hub.proc.poll() is None, hub.log()
        pids = hub.workers
        inodes = tcp_inodes(hub.port, LISTEN)
        return len(pids) == workers and all(held(pid, inodes) == 1 for pid in pids)

    wait_for(listening, 20, "every hub worker to listen")


def stop(hub: Hub) -> int:
    if hub.proc.poll() is None:
        hub.proc.send_signal(signal.SIGTERM)
    try:
        return hub.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        for pid in [hub.proc.pid, *hub.workers]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        hub.proc.wait()
        raise


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[Hub]:
    data = tmp_path / "hub"
    admin = hub_init(data)
    running = start_hub(tmp_path, data, free_port())
    running.admin = admin
    workers: list[int] = []
    try:
        wait_listening(running)
        workers = running.workers
        yield running
    finally:
        stop(running)
        for pid in workers:  # never leave a worker behind, whatever the test did
            if alive(pid):
                os.kill(pid, signal.SIGKILL)


@contextlib.asynccontextmanager
async def connections(count: int) -> AsyncIterator[list[aiohttp.ClientSession]]:
    """`count` sessions of one keep-alive connection each (each a new source port)."""
    sessions = [
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) for _ in range(count)
    ]
    try:
        yield sessions
    finally:
        for session in sessions:
            await session.close()


async def spread(hub: Hub, sessions: list[aiohttp.ClientSession], token: str) -> None:
    """One request on each session; then every worker must hold some of the connections
    (the kernel hashes source ports: with 16 connections, all on one worker is 1 in 2**15)."""
    for session in sessions:
        async with session.get(f"{hub.url}/v1/views", headers=bearer(token)) as answer:
            assert answer.status == 200
    counts = hub.connections()
    assert len(counts) == WORKERS and all(counts), counts


async def publish(url: str, token: str, view: str, manifest: bytes, package: bytes) -> int:
    form = aiohttp.FormData()
    form.add_field("manifest", manifest, filename="manifest", content_type="application/json")
    form.add_field("package", package, filename="package", content_type="application/zip")
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{url}/v1/views/{view}/revisions", data=form, headers=bearer(token)) as r,
    ):
        return r.status


async def fresh_get(url: str, token: str, **headers: str) -> tuple[int, str]:
    """A GET on a new connection (so any worker may answer it): (status, ETag)."""
    async with (
        aiohttp.ClientSession() as session,
        session.get(url, headers={**bearer(token), **headers}) as answer,
    ):
        await answer.read()
        return answer.status, answer.headers.get("ETag", "")


# -- tests ------------------------------------------------------------------------------------


async def test_events_from_any_worker_reach_every_stream(hub: Hub) -> None:
    # A hub's first upload loads the manifest's models and checks (a fresh hub has none:
    # issue 18); one comes first, read by both workers before any stream opens (no stream
    # sees it), so that `took` below is the push's.
    assert await publish(hub.url, hub.admin, "warm", *build("warm", 1)) == 201
    warm = f"{hub.url}/v1/views/warm/manifest"
    assert {
        s for s, _ in await asyncio.gather(*(fresh_get(warm, hub.admin) for _ in range(16)))
    } == {200}
    async with connections(16) as sessions:
        responses = []
        for session in sessions:
            response = await session.get(f"{hub.url}/v1/events", headers=bearer(hub.admin))
            assert response.status == 200
            responses.append(response)
        streams = [Stream(response) for response in responses]
        counts = hub.connections()
        assert len(counts) == WORKERS and all(counts), counts  # both workers hold streams

        manifest, package = build("auth", 1)
        started = time.monotonic()
        assert await publish(hub.url, hub.admin, "auth", manifest, package) == 201
        events = await asyncio.gather(*(stream.next(timeout=5) for stream in streams))
        took = time.monotonic() - started
        assert {kind for kind, _ in events} == {"revision"}
        assert all(json.loads(data)["revision"] == 1 for _, data in events)
        assert took < 2.0, took  # a push, not a poll (it is milliseconds when idle)

        # read-your-writes: every worker answers with the new revision at once
        url = f"{hub.url}/v1/views/auth/manifest"
        answers = await asyncio.gather(*(fresh_get(url, hub.admin) for _ in range(16)))
        assert set(answers) == {(200, etag(manifest))}

        sha = "c0ffee" * 6 + "abcd"
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"{hub.url}/v1/roots/team/notify", json={"commit": sha}, headers=bearer(hub.admin)
            ) as answer,
        ):
            assert answer.status == 202
        events = await asyncio.gather(*(stream.next(timeout=5) for stream in streams))
        assert [(kind, json.loads(data)) for kind, data in events] == [
            ("upstream", {"root": "team", "commit": sha})
        ] * len(streams)
        for response in responses:
            response.close()


async def test_a_revoked_token_is_refused_by_every_worker(hub: Hub) -> None:
    token = json.loads(hub.cli("token", "create", "--scope", "read:*", "--json").stdout)
    async with connections(16) as sessions:
        await spread(hub, sessions, token["token"])  # every worker has the token cached
        hub.cli("token", "revoke", token["id"])
        for session in sessions:  # the same connections: each worker checks again
            headers = bearer(token["token"])
            async with session.get(f"{hub.url}/v1/views", headers=headers) as answer:
                assert answer.status == 401
                assert (await answer.json())["error"]["code"] == "revoked-token"
        assert all(hub.connections())  # still spread: both workers refused it


async def test_concurrent_uploads_through_several_workers_store_one_revision(hub: Hub) -> None:
    first, second = build("auth", 1, "one"), build("auth", 1, "two")
    statuses = await asyncio.gather(
        *(publish(hub.url, hub.admin, "auth", *(first if i % 2 else second)) for i in range(12))
    )
    assert statuses.count(201) == 1, statuses
    assert set(statuses) <= {201, 200, 409}, statuses
    winner = first if statuses.index(201) % 2 else second
    url = f"{hub.url}/v1/views/auth/manifest"
    answers = await asyncio.gather(*(fresh_get(url, hub.admin) for _ in range(16)))
    assert set(answers) == {(200, etag(winner[0]))}
    revisions = hub.data / "views" / "auth" / "revisions"
    assert sorted(p.name for p in revisions.iterdir()) == ["1"]
    # later revisions through any worker, one after the other, each current everywhere
    for number in range(2, 6):
        manifest, package = build("auth", number)
        assert await publish(hub.url, hub.admin, "auth", manifest, package) == 201
        answers = await asyncio.gather(*(fresh_get(url, hub.admin) for _ in range(6)))
        assert set(answers) == {(200, etag(manifest))}


async def test_revisions_are_stored_in_increasing_order_across_workers(hub: Hub) -> None:
    """Uploads of revisions 1-12 in a shuffled order through both workers: each is judged
    against the revisions stored so far (the per-view lock spans the workers), so the ones
    stored were stored in increasing order and the others refused as rollbacks."""
    order = [7, 2, 11, 1, 5, 12, 3, 9, 4, 10, 6, 8]
    built = {number: build("auth", number) for number in order}
    statuses = await asyncio.gather(
        *(publish(hub.url, hub.admin, "auth", *built[number]) for number in order)
    )
    assert set(statuses) <= {201, 409}, statuses
    created = sorted(
        number for number, status in zip(order, statuses, strict=True) if status == 201
    )
    revisions = hub.data / "views" / "auth" / "revisions"
    assert sorted(int(path.name) for path in revisions.iterdir()) == created
    # stored in increasing order (the clock is coarse: equal times are allowed)
    times = [(revisions / str(number)).stat().st_ctime_ns for number in created]
    assert times == sorted(times), list(zip(created, times, strict=True))
    assert 12 in created


# Records, in the file MEMSYNC_TEST_IMPORTS names, the pid of each process that imports the
# manifest's models (forked workers inherit the modules their supervisor imported).
IMPORT_SITE = """
import os, sys

def _hook(event, args):
    if event == "import" and args[0] == "memsync.views.manifest":
        with open(os.environ["MEMSYNC_TEST_IMPORTS"], "a") as out:
            out.write(f"{os.getpid()}\\n")

sys.addaudithook(_hook)
"""


def test_a_hub_holding_revisions_loads_the_manifest_models_once_for_every_worker(
    hub: Hub, tmp_path: Path
) -> None:
    """Each worker reads the stored revisions when it starts: the supervisor imports the
    manifest's models (pydantic, cryptography: ~170 ms of CPU) once, before it forks,
    rather than every worker separately (a hub without revisions loads them on its first
    upload: `test_lean_starts`)."""
    manifest, package = build("auth", 1)
    assert asyncio.run(publish(hub.url, hub.admin, "auth", manifest, package)) == 201
    assert stop(hub) == 0
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(IMPORT_SITE)
    imports = tmp_path / "imports.txt"
    path = os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])])
    env = {"PYTHONPATH": path, "MEMSYNC_TEST_IMPORTS": str(imports)}
    again = start_hub(tmp_path, hub.data, free_port(), env=env)
    workers: list[int] = []
    try:
        wait_listening(again)
        workers = again.workers
        url = f"{again.url}/v1/views/auth/manifest"
        answers = asyncio.run(fresh_gets(url, hub.admin, 16))
        assert set(answers) == {(200, etag(manifest))}  # any worker answers with it
    finally:
        assert stop(again) == 0, again.log()
        for pid in workers:
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
    assert imports.read_text().split() == [str(again.proc.pid)]


async def fresh_gets(url: str, token: str, count: int) -> list[tuple[int, str]]:
    return list(await asyncio.gather(*(fresh_get(url, token) for _ in range(count))))


def test_sigterm_stops_every_worker_and_the_hub_exits_0(hub: Hub) -> None:
    workers = hub.workers
    assert len(workers) == WORKERS
    assert stop(hub) == 0
    assert not any(alive(pid) for pid in workers)
    assert "error" not in hub.log().lower(), hub.log()


def test_a_dead_worker_stops_the_hub_with_status_3(hub: Hub) -> None:
    victim, survivor = hub.workers
    os.kill(victim, signal.SIGKILL)
    assert hub.proc.wait(timeout=30) == 3
    assert not alive(survivor)
    log = hub.log()
    assert f"hub worker {victim} was killed by signal 9; stopping the hub" in log, log


def test_workers_stop_when_their_supervisor_is_killed(hub: Hub) -> None:
    workers = hub.workers
    os.kill(hub.proc.pid, signal.SIGKILL)
    hub.proc.wait()
    wait_for(lambda: not any(alive(pid) for pid in workers), 20, "the orphaned workers to stop")


def test_another_hub_cannot_share_the_port(hub: Hub, tmp_path: Path) -> None:
    other = tmp_path / "other"
    hub_init(other)
    second = start_hub(tmp_path, other, hub.port)
    assert second.proc.wait(timeout=30) == 2
    assert f"cannot listen on 127.0.0.1:{hub.port}" in second.log(), second.log()
    same = start_hub(tmp_path, hub.data, free_port())  # nor the data dir, on another port
    assert same.proc.wait(timeout=30) == 2
    assert "another hub is already serving" in same.log(), same.log()


def test_one_worker_is_one_process(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    admin = hub_init(data)
    single = start_hub(tmp_path, data, free_port(), workers=1)
    try:

        def up() -> bool:
            assert single.proc.poll() is None, single.log()
            return held(single.proc.pid, tcp_inodes(single.port, LISTEN)) == 1

        wait_for(up, 20, "the hub to listen")
        assert single.workers == []
        status, _ = asyncio.run(fresh_get(f"{single.url}/v1/views", admin))
        assert status == 200
    finally:
        assert stop(single) == 0


def test_a_malformed_request_quoting_a_token_never_puts_it_in_the_log(hub: Hub) -> None:
    """aiohttp logs a request it cannot parse with the offending header line: the hub's
    handler redacts it like its own messages."""
    secret = hub.admin.rsplit("_", 1)[-1]
    for bad in (f"Bearer {hub.admin}\x01", f"Bearer {hub.admin}\r\n folded"):
        with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as conn:
            conn.sendall(
                f"GET /v1/views HTTP/1.1\r\nHost: x\r\nAuthorization: {bad}\r\n\r\n".encode()
            )
            assert conn.recv(4096).split(b"\r\n", 1)[0].endswith(b" 400 Bad Request")
    assert stop(hub) == 0
    log = hub.log()
    assert "msk_REDACTED" in log, log  # the request was logged, redacted
    assert secret not in log and hub.admin not in log


def test_a_stop_asked_for_while_workers_start_waits_for_them_and_exits_0(
    tmp_path: Path,
) -> None:
    data = tmp_path / "hub"
    hub_init(data)
    hub = start_hub(tmp_path, data, free_port(), workers=12)
    try:
        wait_for(lambda: len(hub.workers) >= 1, 20, "the first worker to be forked")
        hub.proc.send_signal(signal.SIGTERM)
        assert hub.proc.wait(timeout=60) == 0, hub.log()
    finally:
        stop(hub)
    assert "Bad file descriptor" not in hub.log() and "error" not in hub.log().lower(), hub.log()


def test_a_worker_that_does_not_stop_is_killed_after_the_grace_and_the_hub_exits_3(
    tmp_path: Path,
) -> None:
    data = tmp_path / "hub"
    hub_init(data)
    hub = start_hub(tmp_path, data, free_port(), WORKERS, "--stop-grace", "2s")
    try:
        wait_listening(hub)
        stuck, other = hub.workers
        os.kill(stuck, signal.SIGSTOP)  # it cannot see the lifeline close
        try:
            asked = time.monotonic()
            hub.proc.send_signal(signal.SIGTERM)
            assert hub.proc.wait(timeout=60) == 3, hub.log()
            assert time.monotonic() - asked >= 2, hub.log()  # not killed before its grace
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(stuck, signal.SIGCONT)
        wait_for(lambda: not alive(stuck) and not alive(other), 20, "both workers to be gone")
    finally:
        stop(hub)
    log = hub.log()
    assert f"hub worker {stuck} did not stop in 2 s: killing it" in log, log
    assert f"hub worker {other} did not stop" not in log, log  # the other stopped in time
    assert "internal error" not in log, log


@pytest.mark.parametrize(
    "start",
    [
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03",  # a TLS ClientHello: https by mistake
        b"GET /v1/views HTTP/1.1\nHost: x\n\n",  # bare LF line ends
    ],
)
def test_a_request_the_fast_lane_cannot_answer_is_refused_at_once(hub: Hub, start: bytes) -> None:
    with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as conn:
        conn.sendall(start)
        answer = conn.recv(4096)  # before the timeout: answered or closed, not left waiting
    assert answer == b"" or answer.split(b"\r\n", 1)[0].endswith(b" 400 Bad Request"), answer


def test_a_request_sent_in_pieces_is_still_answered_by_the_fast_lane(hub: Hub) -> None:
    head = f"GET /v1/views/none/manifest HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {hub.admin}"
    with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as conn:
        for piece in (head[:2], head[2:20], head[20:], "\r\n", "\r\n"):
            conn.sendall(piece.encode())
        assert conn.recv(4096).split(b"\r\n", 1)[0] == b"HTTP/1.1 404 Not Found"


def test_the_hub_says_where_it_serves_but_logs_no_request(hub: Hub) -> None:
    wait_for(lambda: "memsync hub serving" in hub.log(), 20, "the hub to say where it serves")
    assert f"http://127.0.0.1:{hub.port}" in hub.log()
    for _ in range(3):
        with socket.create_connection(("127.0.0.1", hub.port), timeout=10) as conn:
            conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert conn.recv(4096).startswith(b"HTTP/1.1 200")
    assert stop(hub) == 0
    assert "/v1/health" not in hub.log(), hub.log()
