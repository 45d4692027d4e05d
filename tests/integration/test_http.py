"""The HTTP box against a real aiohttp server on loopback, in every fault mode."""

from __future__ import annotations

import asyncio
import email.utils
import hashlib
import logging
import random
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
from yarl import URL

from memsync.transports.http import ErrorKind, HttpClient, HttpError, redact_url
from tests.e2e.test_daemon_hooks import receiver
from tests.flaky_server import MANIFEST, PACKAGE, Fault, FlakyServer, etag_of, serve

TOKEN = "msk_abc_s3cretvalue"
CAP = 1 << 20


@pytest.fixture
async def hub() -> AsyncIterator[FlakyServer]:
    async with serve() as server:
        yield server


@pytest.fixture
async def client() -> AsyncIterator[HttpClient]:
    async with HttpClient(user_agent="memsync-test") as c:
        yield c


def soon(seconds: float = 3.0) -> float:
    return asyncio.get_running_loop().time() + seconds


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


async def test_200_then_304_with_the_etag(hub: FlakyServer, client: HttpClient) -> None:
    first = await client.get(
        hub.manifest_url(), dest=None, token=TOKEN, etag=None, max_bytes=CAP, deadline=soon()
    )
    assert (first.status, first.body, first.etag) == (200, MANIFEST, etag_of(MANIFEST))
    assert first.sha256 == hashlib.sha256(MANIFEST).hexdigest()
    again = await client.get(
        hub.manifest_url(), dest=None, token=TOKEN, etag=first.etag, max_bytes=CAP, deadline=soon()
    )
    assert (again.status, again.etag, again.body, again.sha256) == (304, first.etag, None, None)
    assert hub.state.seen[1].headers["If-None-Match"] == first.etag


async def test_package_lands_atomically_at_dest(
    hub: FlakyServer, client: HttpClient, tmp_path: Path
) -> None:
    dest = tmp_path / "package.zip"
    got = await client.get(
        hub.package_url(),
        dest=dest,
        token=TOKEN,
        etag=None,
        max_bytes=CAP,
        deadline=soon(),
        expected_length=len(PACKAGE),
    )
    assert (got.status, got.path, got.length, got.body) == (200, dest, len(PACKAGE), None)
    assert dest.read_bytes() == PACKAGE
    assert got.sha256 == hashlib.sha256(PACKAGE).hexdigest()
    assert leftovers(tmp_path) == ["package.zip"]


FAULTS = [
    (Fault.RESET, ErrorKind.TRUNCATED, True),  # mid-body: FIN or RST look alike
    (Fault.HANGUP, ErrorKind.CONNECTION, True),
    (Fault.STALL, ErrorKind.TIMEOUT, True),
    (Fault.TRICKLE, ErrorKind.TIMEOUT, True),
    (Fault.TRUNCATE, ErrorKind.TRUNCATED, True),
    (Fault.LIE, ErrorKind.TRUNCATED, True),
    (Fault.BLOAT, ErrorKind.TOO_LARGE, False),
    (Fault.E500, ErrorKind.SERVER, True),
    (Fault.E503, ErrorKind.SERVER, True),
    (Fault.E429, ErrorKind.RATE_LIMITED, True),
    (Fault.E404, ErrorKind.NOT_FOUND, False),
    (Fault.E401, ErrorKind.UNAUTHORIZED, False),
    (Fault.E403, ErrorKind.FORBIDDEN, False),
    (Fault.REDIRECT_LOOP, ErrorKind.REFUSED, False),
]


@pytest.mark.parametrize(("fault", "kind", "transient"), FAULTS, ids=[f[0] for f in FAULTS])
async def test_every_fault_has_its_kind_and_leaves_nothing(
    hub: FlakyServer,
    client: HttpClient,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    fault: Fault,
    kind: ErrorKind,
    transient: bool,
) -> None:
    caplog.set_level(logging.DEBUG, logger="memsync.http")
    # aiohttp itself re-sends an idempotent request once when the connection drops
    # before any response (RFC 9112 9.3.1.1), so a hangup has to happen twice.
    hub.state.script(fault, fault) if fault is Fault.HANGUP else hub.state.script(fault)
    dest = tmp_path / "package.zip"
    with pytest.raises(HttpError) as caught:
        await client.get(
            hub.package_url() + "?access_token=q-secret",
            dest=dest,
            token=TOKEN,
            etag=None,
            max_bytes=CAP,
            deadline=soon(0.5),
            expected_length=len(PACKAGE),
        )
    err = caught.value
    assert (err.kind, err.transient) == (kind, transient)
    assert err.url == hub.package_url() + "?…"
    assert leftovers(tmp_path) == []
    for text in (str(err), err.url, caplog.text):
        assert TOKEN not in text
        assert "q-secret" not in text


async def test_unwritable_dest_is_a_storage_error(
    hub: FlakyServer, client: HttpClient, tmp_path: Path
) -> None:
    with pytest.raises(HttpError) as caught:
        await client.get(
            hub.package_url(),
            dest=tmp_path / "missing-dir" / "p.zip",
            token=None,
            etag=None,
            max_bytes=CAP,
            deadline=soon(),
        )
    assert (caught.value.kind, caught.value.transient) == (ErrorKind.STORAGE, False)
    assert leftovers(tmp_path) == []


async def test_connection_refused_is_transient(client: HttpClient) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(HttpError) as caught:
        await client.get(
            f"http://127.0.0.1:{port}/x",
            dest=None,
            token=TOKEN,
            etag=None,
            max_bytes=CAP,
            deadline=soon(),
        )
    assert (caught.value.kind, caught.value.transient) == (ErrorKind.CONNECTION, True)


async def test_errors_name_the_method(client: HttpClient) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1/views/auth/revisions"
    with pytest.raises(HttpError) as posted:
        await client.post_form(url, fields={}, token=TOKEN, deadline=soon())
    assert posted.value.kind is ErrorKind.CONNECTION
    assert str(posted.value).startswith(f"POST {url}: ")
    with pytest.raises(HttpError) as refused:
        await client.post_form("ftp://127.0.0.1/x", fields={}, token=TOKEN, deadline=soon())
    assert str(refused.value).startswith("POST ftp://127.0.0.1/x: ")
    with pytest.raises(HttpError) as got:
        await client.get(url, dest=None, token=TOKEN, etag=None, max_bytes=CAP, deadline=soon())
    assert str(got.value).startswith(f"GET {url}: ")


async def test_retry_recovers_from_transient_faults(
    hub: FlakyServer, client: HttpClient, tmp_path: Path
) -> None:
    hub.state.script(Fault.RESET, Fault.HANGUP, Fault.E503, Fault.E429, Fault.TRUNCATE)
    dest = tmp_path / "package.zip"
    got = await client.get_with_retry(
        hub.package_url(),
        dest=dest,
        token=TOKEN,
        etag=None,
        max_bytes=CAP,
        deadline=soon(10),
        expected_length=len(PACKAGE),
        attempts=6,
    )
    assert got.sha256 == hashlib.sha256(PACKAGE).hexdigest()
    assert dest.read_bytes() == PACKAGE
    assert len(hub.state.seen) == 6
    assert leftovers(tmp_path) == ["package.zip"]


async def test_retry_gives_up_when_attempts_run_out(hub: FlakyServer, client: HttpClient) -> None:
    hub.state.script(Fault.E500, Fault.E500, Fault.E500)
    with pytest.raises(HttpError) as caught:
        await client.get_with_retry(
            hub.manifest_url(),
            dest=None,
            token=TOKEN,
            etag=None,
            max_bytes=CAP,
            deadline=soon(10),
            attempts=2,
        )
    assert caught.value.kind is ErrorKind.SERVER
    assert len(hub.state.seen) == 2


@pytest.mark.parametrize("fault", [Fault.E404, Fault.E401, Fault.E403, Fault.BLOAT])
async def test_no_retry_for_permanent_failures(
    hub: FlakyServer, client: HttpClient, fault: Fault
) -> None:
    hub.state.script(fault)
    with pytest.raises(HttpError) as caught:
        await client.get_with_retry(
            hub.package_url(),
            dest=None,
            token=TOKEN,
            etag=None,
            max_bytes=CAP,
            deadline=soon(10),
            expected_length=len(PACKAGE),
        )
    assert not caught.value.transient
    assert len(hub.state.seen) == 1


@pytest.mark.parametrize("header", ["30", "http-date"])
async def test_retry_after_beyond_the_deadline_stops_at_once(
    hub: FlakyServer, client: HttpClient, header: str
) -> None:
    later = email.utils.formatdate(time.time() + 31, usegmt=True)
    hub.state.retry_after = later if header == "http-date" else header
    hub.state.script(Fault.E429)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(HttpError) as caught:
        await client.get_with_retry(
            hub.manifest_url(), dest=None, token=None, etag=None, max_bytes=CAP, deadline=soon(5)
        )
    assert caught.value.kind is ErrorKind.RATE_LIMITED
    assert 29 <= (caught.value.retry_after or 0) <= 31
    assert loop.time() - started < 1.0
    assert len(hub.state.seen) == 1


async def test_deadline_cuts_a_trickle(
    hub: FlakyServer, client: HttpClient, tmp_path: Path
) -> None:
    hub.state.default = Fault.TRICKLE
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(HttpError) as caught:
        await client.get_with_retry(
            hub.manifest_url(),
            dest=tmp_path / "manifest.json",
            token=TOKEN,
            etag=None,
            max_bytes=CAP,
            deadline=started + 0.5,
        )
    assert caught.value.kind is ErrorKind.TIMEOUT
    assert loop.time() - started < 0.9
    assert leftovers(tmp_path) == []


async def test_byte_cap(hub: FlakyServer, client: HttpClient, tmp_path: Path) -> None:
    dest = tmp_path / "package.zip"
    with pytest.raises(HttpError) as caught:  # refused on Content-Length, before the body
        await client.get(
            hub.package_url(), dest=dest, token=None, etag=None, max_bytes=1000, deadline=soon()
        )
    assert caught.value.kind is ErrorKind.TOO_LARGE
    hub.state.script(Fault.BLOAT)  # chunked, no length: cut off while reading
    with pytest.raises(HttpError) as caught:
        await client.get(
            hub.package_url(),
            dest=dest,
            token=None,
            etag=None,
            max_bytes=len(PACKAGE),
            deadline=soon(),
        )
    assert caught.value.kind is ErrorKind.TOO_LARGE
    with pytest.raises(HttpError) as caught:  # a declared length over the cap: no request
        await client.get(
            hub.package_url(),
            dest=dest,
            token=None,
            etag=None,
            max_bytes=1000,
            deadline=soon(),
            expected_length=2000,
        )
    assert caught.value.kind is ErrorKind.TOO_LARGE
    assert len(hub.state.seen) == 2
    assert leftovers(tmp_path) == []


async def test_token_goes_to_the_original_origin_only(
    hub: FlakyServer, client: HttpClient, tmp_path: Path
) -> None:
    async with serve() as other:
        hub.state.redirect_to = other.url
        hub.state.script(Fault.REDIRECT)
        got = await client.get(
            hub.package_url(),
            dest=tmp_path / "p",
            token=TOKEN,
            etag=None,
            max_bytes=CAP,
            deadline=soon(),
        )
        assert got.sha256 == hashlib.sha256(PACKAGE).hexdigest()
        assert hub.state.seen[0].headers["Authorization"] == f"Bearer {TOKEN}"
        assert [s.path for s in other.state.seen] == ["/v1/views/auth/package"]
        assert "Authorization" not in other.state.seen[0].headers
        assert TOKEN not in repr(other.state.seen)


async def test_same_origin_redirect_keeps_the_token(hub: FlakyServer, client: HttpClient) -> None:
    hub.state.redirect_to = hub.url
    hub.state.script(Fault.REDIRECT)
    await client.get(
        hub.manifest_url(), dest=None, token=TOKEN, etag=None, max_bytes=CAP, deadline=soon()
    )
    assert [s.headers.get("Authorization") for s in hub.state.seen] == [f"Bearer {TOKEN}"] * 2


@pytest.mark.parametrize(
    "url",
    [
        "http://192.0.2.1/x",
        "http://example.invalid/x",
        "ftp://127.0.0.1/x",
        "http://u:p@127.0.0.1/x",
        "http://[::1/x",
    ],
)
async def test_refused_urls_do_no_io(
    client: HttpClient, url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Every way aiohttp reaches the network goes through one of these: each is a tripwire
    # (rather than a time bound, which a loaded machine could break).
    loop = asyncio.get_running_loop()
    reached: list[str] = []

    def tripwire(name: str) -> Callable[..., object]:
        def tripped(*_args: object, **_kwargs: object) -> object:
            reached.append(name)
            raise OSError(f"{name}: the refused URL was not refused before any I/O")

        return tripped

    for name in ("getaddrinfo", "create_connection", "sock_connect"):
        monkeypatch.setattr(loop, name, tripwire(name))
    monkeypatch.setattr(socket, "getaddrinfo", tripwire("socket.getaddrinfo"))
    started = loop.time()
    with pytest.raises(HttpError) as caught:
        await client.get(url, dest=None, token=TOKEN, etag=None, max_bytes=CAP, deadline=soon())
    assert caught.value.kind is ErrorKind.REFUSED, caught.value
    assert reached == []
    assert loop.time() - started < 1  # and no wait (a retry, a back-off) before refusing
    assert "u:p" not in str(caught.value)


async def test_downgrade_rule_and_loopback_rule(client: HttpClient) -> None:
    with pytest.raises(HttpError):
        client.check_url(URL("http://127.0.0.1/x"), previous=URL("https://127.0.0.1/y"))
    client.check_url(URL("http://127.0.0.1/x"), previous=URL("http://127.0.0.1/y"))
    client.check_url(URL("http://[::1]:8080/x"))
    client.check_url(URL("http://localhost/x"))
    client.check_url(URL("https://192.0.2.1/x"))
    async with HttpClient(allow_http=True) as lenient:
        lenient.check_url(URL("http://192.0.2.1/x"))


def test_redact_url() -> None:
    assert redact_url("https://u:pw@h.example/a?token=t#f") == "https://h.example/a?…"
    assert redact_url("https://h.example/a") == "https://h.example/a"


@pytest.mark.slow
async def test_random_faults_never_leave_a_partial_file(
    hub: FlakyServer, client: HttpClient, tmp_path: Path
) -> None:
    rng = random.Random(20261129)
    quick = [f for f in Fault if f not in (Fault.STALL, Fault.TRICKLE, Fault.REDIRECT)]
    hub.state.default = lambda: rng.choice([*quick, Fault.OK, Fault.OK, Fault.STALL])
    hub.state.redirect_to = hub.url
    good = hashlib.sha256(PACKAGE).hexdigest()
    outcomes: dict[str, int] = {}
    for i in range(200):
        dest = tmp_path / f"p{i}.zip"
        try:
            got = await client.get(
                hub.package_url(),
                dest=dest,
                token=TOKEN,
                etag=None,
                max_bytes=CAP,
                deadline=soon(0.3),
                expected_length=len(PACKAGE),
            )
        except HttpError as exc:
            assert not dest.exists()
            outcomes[exc.kind] = outcomes.get(exc.kind, 0) + 1
        else:
            assert got.sha256 == good
            assert hashlib.sha256(dest.read_bytes()).hexdigest() == good
            dest.unlink()
            outcomes["ok"] = outcomes.get("ok", 0) + 1
    assert leftovers(tmp_path) == []
    assert outcomes["ok"] > 10, outcomes
    assert len(outcomes) >= 8, outcomes


async def test_a_retrying_post_retries_what_may_pass_and_counts_its_attempts(
    client: HttpClient,
) -> None:
    """`post_json_retrying` (webhooks): a 5xx or 429 is tried again, a 4xx is final, a
    connection failure is retried and its error says how many attempts were made."""
    with receiver((500, 429, 200)) as got:
        posted = await client.post_json_retrying(
            got.url, document={"a": 1}, token=TOKEN, deadline=soon(), attempts=3, backoff=0.01
        )
    assert (posted.status, posted.attempts) == (200, 3)
    assert [status for _, _, status in got.got] == [500, 429, 200]
    assert all(body == {"a": 1} for _, body, _ in got.got)
    with receiver((404, 200)) as got:
        posted = await client.post_json_retrying(
            got.url, document={}, token=None, deadline=soon(), attempts=3, backoff=0.01
        )
    assert (posted.status, posted.attempts, len(got.got)) == (404, 1, 1)
    with receiver((503, 503)) as got:
        posted = await client.post_json_retrying(
            got.url, document={}, token=None, deadline=soon(), attempts=2, backoff=0.01
        )
    assert (posted.status, posted.attempts, len(got.got)) == (503, 2, 2)
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(HttpError) as caught:
        await client.post_json_retrying(
            f"http://127.0.0.1:{port}/x",
            document={},
            token=None,
            deadline=soon(),
            attempts=3,
            backoff=0.01,
        )
    assert (caught.value.kind, caught.value.attempts) == (ErrorKind.CONNECTION, 3)
    with pytest.raises(HttpError) as caught:  # refused before any I/O: never retried
        await client.post_json_retrying(
            "ftp://127.0.0.1/x", document={}, token=None, deadline=soon(), attempts=3, backoff=0
        )
    assert (caught.value.kind, caught.value.attempts) == (ErrorKind.REFUSED, 1)
