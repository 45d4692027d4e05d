"""The hub event-stream follower and the notification against a real (hostile) aiohttp hub on
loopback: bounded work per read, bounds that drop the connection and back off, ids that
never reach a header, no compression, and tokens that never reach plain http elsewhere."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from memsync.config.model import RootSettings
from memsync.config.sections import HttpSourceSettings
from memsync.daemon.events import MAX_EVENT, Event, follow
from memsync.daemon.triggers import Backoff
from memsync.daemon.workers import notify_hub
from memsync.roots.create import init_root
from memsync.secrets import SecretRef
from memsync.transports.http import ErrorKind, HttpClient, HttpError
from memsync.transports.process import Deadline
from memsync.views.httpsource import HttpSource
from memsync.views.pull import pull_views
from memsync.views.source import SourceError
from tests.e2e.hubs import BADID_BYTES, HostileHub, hostile_hub
from tests.integration.test_pull import settings as view_settings
from tests.kit import settings_for

TOKEN = "msk_follow_s3cret"


async def until(predicate: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


@contextlib.asynccontextmanager
async def following(
    url: str, token: str | None, backoff: Backoff | None = None
) -> AsyncIterator[list[Event]]:
    """Run `follow` on `url` for the block; yields the events handled so far."""
    seen: list[Event] = []
    task = asyncio.create_task(follow(url, token, seen.append, backoff=backoff))
    try:
        yield seen
        assert not task.done(), task.exception()  # the follower never ends by itself
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


class LoopLag:
    """The worst delay of a 10 ms timer on this loop while it runs: how long others wait."""

    def __init__(self) -> None:
        self.worst = 0.0

    async def run(self) -> None:
        while True:
            before = time.monotonic()
            await asyncio.sleep(0.01)
            self.worst = max(self.worst, time.monotonic() - before - 0.01)


async def test_a_blank_line_flood_never_starves_the_loop() -> None:
    """50+ MB of blank lines and comments: the follower reads 64 KiB at a time, parses in
    one pass and yields after every read, so a 10 ms timer alongside stays on time."""
    with hostile_hub() as hub:
        hub.mode, hub.per_connection = "flood", 60 * 1024 * 1024
        lag = LoopLag()
        timer = asyncio.create_task(lag.run())
        started = time.monotonic()
        async with following(f"{hub.url}/v1/events?root=team", None) as seen:
            await until(lambda: sum(hub.sent) >= 50 * 1024 * 1024, 120, "50 MB of flood")
        timer.cancel()
        assert seen == []
    took = time.monotonic() - started
    print(f"50 MB flood in {took:.1f} s; worst loop lag {lag.worst * 1000:.0f} ms")
    assert lag.worst < 0.5


async def test_an_event_that_never_ends_is_dropped_and_backed_off(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="memsync.daemon.events")
    backoff = Backoff(base=0.05, cap=0.4)
    with hostile_hub() as hub:
        hub.mode = "endless"
        async with following(f"{hub.url}/v1/events", None, backoff) as seen:
            await until(lambda: len(hub.requests) >= 4, 30, "three reconnects")
        assert seen == []
        # a connection that broke a bound does not reset the back-off: it keeps growing
        assert backoff.failures >= 3
        # the client dropped each connection near the event bound (plus what the sockets
        # buffered), never reading the 200 MB the hub was ready to send
        assert max(hub.sent[:3]) < MAX_EVENT + 16 * 1024 * 1024
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "event over" in warnings[0].getMessage()  # logged once


async def test_a_compressed_stream_is_refused_before_a_byte_is_inflated() -> None:
    backoff = Backoff(base=0.05, cap=0.4)
    with hostile_hub() as hub:
        hub.mode = "gzip"
        async with following(f"{hub.url}/v1/events", None, backoff) as seen:
            await until(lambda: len(hub.requests) >= 3, 30, "reconnects")
        assert seen == []
        assert backoff.failures >= 2
        assert all(r.get("Accept-Encoding") == "identity" for r in hub.requests)


async def test_ids_that_cannot_go_back_in_a_header_are_dropped() -> None:
    with hostile_hub() as hub:
        hub.mode, hub.per_connection = "badid", BADID_BYTES  # the bad ids, then a drop
        async with following(f"{hub.url}/v1/events", TOKEN, Backoff(0.05, 0.2)) as seen:
            await until(lambda: len(hub.requests) >= 3, 30, "reconnects")
        assert seen[0] == Event("upstream", {"root": "team", "commit": "x"}, "42")
        assert [e.id for e in seen[1:5]] == [None] * 4  # each bad id dropped, the event kept
        assert hub.requests[1]["Last-Event-ID"] == "42"
        assert hub.requests[1]["Authorization"] == f"Bearer {TOKEN}"


async def test_a_redirect_is_never_followed_with_or_without_the_token() -> None:
    with hostile_hub() as hub, hostile_hub() as elsewhere:
        hub.mode, hub.redirect_to = "redirect", f"{elsewhere.url}/v1/events"
        async with following(f"{hub.url}/v1/events", TOKEN, Backoff(0.05, 0.2)):
            await until(lambda: len(hub.requests) >= 2, 30, "retries")
        assert elsewhere.requests == []


def own_address() -> str | None:
    """This machine's own non-loopback IPv4 address (no packet is sent), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("10.255.255.1", 9))  # any routable address: only the route is asked
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address  # noqa: S104


@pytest.fixture
def remote_hub() -> Iterator[HostileHub]:
    address = own_address()
    if address is None:
        pytest.skip("this machine has no non-loopback address")
    with hostile_hub(address) as hub:
        yield hub


def root_settings(tmp_path: Path, hub: str) -> RootSettings:
    return settings_for(
        "team",
        tmp_path,
        max_file_size=1 << 20,
        timeout=timedelta(seconds=20),
        notify_hub=hub,
        notify_token=SecretRef("value", TOKEN),
    )


async def test_no_token_ever_reaches_plain_http_on_another_host(
    remote_hub: HostileHub, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The configuration refuses these URLs at load; the runtime refuses them too, before any
    I/O: the events follower, the notification, the view puller (even with allow_http)."""
    url = f"{remote_hub.url}/v1/events?root=team"
    backoff = Backoff(base=0.05, cap=0.2)
    async with following(url, TOKEN, backoff):
        await until(lambda: backoff.failures >= 3, 10, "refusals")
    await notify_hub(root_settings(tmp_path, remote_hub.url), "0" * 40)
    async with HttpClient(allow_http=True) as lenient:
        source = HttpSource(lenient, f"{remote_hub.url}/v1/views/v", SecretRef("value", TOKEN))
        with pytest.raises(SourceError):
            await source.manifest(etag=None, deadline=Deadline.after(5))
        with pytest.raises(HttpError) as caught:
            await lenient.post_json(url, document={}, token=TOKEN, deadline=soon())
        assert caught.value.kind is ErrorKind.REFUSED
    assert remote_hub.requests == []
    assert "token goes only over https" in caplog.text
    assert TOKEN not in caplog.text
    # the listener is reachable: without a token the follower does connect to it
    async with following(url, None):
        await until(lambda: len(remote_hub.requests) >= 1, 10, "a tokenless connection")
    assert "Authorization" not in remote_hub.requests[0]


def soon() -> float:
    return asyncio.get_running_loop().time() + 5


async def test_each_view_of_a_pull_keeps_its_own_plain_http_choice(
    remote_hub: HostileHub, tmp_path: Path
) -> None:
    """One session serves every view of a pull, but `allow_http` is each view's: a view that
    does not allow plain http is refused before any I/O even when another view allows it."""
    root = tmp_path / "bob"
    init_root(root)
    lenient = view_settings(
        root,
        remote_hub.url,
        name="lenient",
        source=HttpSourceSettings(f"{remote_hub.url}/v1/views/lenient", None, allow_http=True),
    )
    strict = view_settings(
        root,
        remote_hub.url,
        name="strict",
        source=HttpSourceSettings(f"{remote_hub.url}/v1/views/strict", None, allow_http=False),
    )
    results = {r.view: r for r in await pull_views([lenient, strict], tmp_path / "state")}
    assert "plain http to a non-loopback host refused" in results["strict"].message
    assert "refused" not in results["lenient"].message  # it was asked (the hub has no views)
    assert "404" in results["lenient"].message
