"""Two hub workers over one data dir, in this process, wired as `hub serve --workers 2`
wires them (`peers.Board`) but with the first worker's datagrams going nowhere: what the
second one knows of the first one's revisions comes from the shared counters and the disk
alone. The process tree itself is tested in tests/e2e/test_hub_workers.py."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from memsync.hub.app import hub_runner, hub_site, make_app
from memsync.hub.peers import Board, Peers
from memsync.hub.tokens import hub_init
from tests.integration.test_hub import Stream, bearer, build, etag


async def _serve(data: Path, peers: Peers, runners: list[web.AppRunner]) -> str:
    runner = hub_runner(make_app(data, peers=peers, heartbeat=0.2))
    await runner.setup()
    runners.append(runner)
    await hub_site(runner, socket.create_server(("127.0.0.1", 0))).start()
    host, port = runner.addresses[0][:2]
    return f"http://{host}:{port}"


@pytest.fixture
async def pair(tmp_path: Path) -> AsyncIterator[tuple[str, str, str]]:
    """(first worker's URL, second worker's URL, admin token)."""
    data = tmp_path / "hub"
    admin = hub_init(data)
    board = Board(2)
    (inbox0, outbox0), (inbox1, _outbox1) = board.pairs
    nowhere, sink = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    sink.setblocking(False)
    runners: list[web.AppRunner] = []
    first = await _serve(data, Peers(0, 2, board.page, inbox0, [sink]), runners)
    second = await _serve(data, Peers(1, 2, board.page, inbox1, [outbox0]), runners)
    yield first, second, admin
    for runner in runners:
        await runner.cleanup()
    nowhere.close()


async def test_a_worker_that_missed_the_news_reads_the_disk_before_answering(
    pair: tuple[str, str, str],
) -> None:
    first, second, admin = pair
    async with aiohttp.ClientSession() as session:
        events = await session.get(f"{second}/v1/events", headers=bearer(admin))
        stream = Stream(events)
        assert await stream.next(pings=True) == ("comment", "ping")
        manifest, package = build("auth", 1)
        form = aiohttp.FormData()
        form.add_field("manifest", manifest, filename="manifest")
        form.add_field("package", package, filename="package")
        url = f"{first}/v1/views/auth/revisions"
        async with session.post(url, data=form, headers=bearer(admin)) as answer:
            assert answer.status == 201
        # nothing told the second worker: its next read finds the revision on disk
        async with session.get(f"{second}/v1/views/auth/manifest", headers=bearer(admin)) as got:
            assert got.status == 200 and got.headers["ETag"] == etag(manifest)
        # and its streams hear of it then, once
        kind, data = await stream.next()
        assert kind == "revision" and json.loads(data)["revision"] == 1
        async with session.get(f"{second}/v1/views", headers=bearer(admin)) as listed:
            assert [v["revision"] for v in (await listed.json())["views"]] == [1]
        assert await stream.next(pings=True) == ("comment", "ping")  # no second event
        events.close()
