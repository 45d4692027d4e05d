"""The hub as its clients see it: a real server on loopback, real signed manifests, real
ZIP packages checked by the consumers' validator, and tokens created as the CLI does."""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.base_protocol import BaseProtocol
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.http_parser import HttpRequestParser
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st
from multidict import CIMultiDict

from memsync.errors import UsageError
from memsync.hub.app import hub_runner, hub_site, make_app
from memsync.hub.fastlane import LANES, parse_head
from memsync.hub.revisions import MAX_JUMP
from memsync.hub.tokens import DB_NAME, TokenStore, hub_init
from memsync.wire.hub import ErrorBody, PublishResult, ViewList
from tests.kit import signed_release

KEY = Ed25519PrivateKey.generate()


def package_files(view_id: str, note: str = "") -> dict[str, bytes]:
    """A minimal RightMemory file-view package v2 that the consumers' validator accepts."""
    return {
        "view.md": f"# {view_id}\n{note}\n".encode(),
        "recipe.toml": f'version = 1\nview_id = "{view_id}"\nkind = "file"\n'.encode(),
        "rightmemory-shared-view.toml": (
            f'version = 2\nview_id = "{view_id}"\nkind = "file"\ntitle = "T"\n'
        ).encode(),
        "dist/manifest.toml": (
            f'version = 2\nview_id = "{view_id}"\ndocument_kind = "rightmemory-memory"\n'
        ).encode(),
        "dist/MEMORY.md": b"# Memory\n",
    }


def build(
    view_id: str,
    revision: int,
    note: str = "",
    *,
    files: dict[str, bytes] | None = None,
    expires: timedelta = timedelta(days=30),
) -> tuple[bytes, bytes]:
    """(manifest bytes, package bytes), signed as a provider would."""
    files = files if files is not None else package_files(view_id, note)
    now = datetime.now(UTC).replace(microsecond=0)
    return signed_release(
        view_id,
        revision,
        files,
        KEY,
        published_at=now + min(expires, timedelta(0)) - timedelta(days=1),
        expires=now + expires,
    )


def etag(data: bytes) -> str:
    return f'"sha256:{hashlib.sha256(data).hexdigest()}"'


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@dataclass
class Hub:
    url: str
    data: Path
    admin: str
    session: aiohttp.ClientSession
    store: TokenStore
    runners: list[web.AppRunner] = field(default_factory=list)

    def token(self, *scopes: str, expires: timedelta | None = None) -> str:
        return self.store.create(list(scopes), expires=expires)[1]

    async def get(self, path: str, token: str | None = None, **headers: str) -> Response:
        auth = bearer(token) if token else {}
        async with self.session.get(self.url + path, headers={**auth, **headers}) as resp:
            return Response(resp.status, CIMultiDict(resp.headers), await resp.read())

    async def publish(
        self, view_id: str, manifest: bytes, package: bytes, token: str | None = None
    ) -> Response:
        form = aiohttp.FormData()
        form.add_field("manifest", manifest, filename="manifest", content_type="application/json")
        form.add_field("package", package, filename="package", content_type="application/zip")
        url = f"{self.url}/v1/views/{view_id}/revisions"
        async with self.session.post(url, data=form, headers=bearer(token or self.admin)) as resp:
            return Response(resp.status, CIMultiDict(resp.headers), await resp.read())

    async def notify(self, root: str, body: Any, token: str | None = None) -> Response:
        url = f"{self.url}/v1/roots/{root}/notify"
        async with self.session.post(url, json=body, headers=bearer(token or self.admin)) as resp:
            return Response(resp.status, CIMultiDict(resp.headers), await resp.read())


@dataclass
class Response:
    status: int
    headers: CIMultiDict[str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def code(self) -> str:
        return ErrorBody.model_validate_json(self.body).error.code


Starter = Callable[..., Awaitable[str]]


@pytest.fixture
async def hub(tmp_path: Path) -> AsyncIterator[Hub]:
    data = tmp_path / "hub"
    admin = hub_init(data)
    async with aiohttp.ClientSession() as session:
        state = Hub("", data, admin, session, TokenStore(data / DB_NAME))
        state.url = await start(state)
        yield state
        for runner in state.runners:
            await runner.cleanup()
        state.store.close()


async def start(state: Hub, **options: Any) -> str:
    options.setdefault("heartbeat", 0.2)
    runner = hub_runner(make_app(state.data, **options))
    await runner.setup()
    state.runners.append(runner)
    await hub_site(runner, socket.create_server(("127.0.0.1", 0))).start()
    host, port = runner.addresses[0][:2]
    return f"http://{host}:{port}"


async def restart(state: Hub, **options: Any) -> None:
    for runner in state.runners:
        await runner.cleanup()
    state.runners.clear()
    state.url = await start(state, **options)


# -- health, routes, auth ---------------------------------------------------------------------


async def test_health_and_json_errors_for_unknown_routes(hub: Hub) -> None:
    ok = await hub.get("/v1/health")
    assert ok.status == 200 and ok.json() == {"status": "ok"}
    missing = await hub.get("/nope")
    assert missing.status == 404 and missing.code == "not-found"
    async with hub.session.delete(hub.url + "/v1/views") as resp:
        assert resp.status == 405
        assert "GET" in resp.headers["Allow"]
        assert ErrorBody.model_validate_json(await resp.read()).error.code == "method-not-allowed"


async def test_auth_matrix(hub: Hub) -> None:
    manifest, package = build("auth", 1)
    assert (await hub.publish("auth", manifest, package)).status == 201
    past = TokenStore(hub.data / DB_NAME, clock=lambda: datetime.now(UTC) - timedelta(days=2))
    expired = past.create(["read:*"], expires=timedelta(hours=1))[1]
    revoked_id, revoked = hub.store.create(["read:*"])
    hub.store.revoke(revoked_id)
    good = hub.token("read:*")
    unknown = "msk_" + "ab" * 8 + "_" + good.split("_", 2)[2]
    cases = {
        "missing-token": {},
        "malformed-token": {"Authorization": "Bearer not-a-token"},
        "unknown-token": bearer(unknown),
        "expired-token": bearer(expired),
        "revoked-token": bearer(revoked),
    }
    cases_basic = {"malformed-token": {"Authorization": f"Basic {good}"}}
    for code, headers in [*cases.items(), *cases_basic.items()]:
        for path in ("/v1/views", "/v1/views/auth/manifest", "/v1/events"):
            answer = await hub.get(path, **headers)
            assert answer.status == 401, (code, path)
            assert answer.code == code
            assert answer.headers["WWW-Authenticate"].startswith("Bearer")
    in_url = await hub.get(f"/v1/views/auth/manifest?token={good}", good)
    assert in_url.status == 401 and in_url.code == "token-in-url"
    assert (await hub.get("/v1/views/auth/manifest", good)).status == 200
    assert (await hub.get("/v1/views/auth/manifest", f"  {good}  ")).status == 200


async def test_unreadable_views_look_exactly_like_missing_ones(hub: Hub) -> None:
    for view in ("auth", "ops"):
        assert (await hub.publish(view, *build(view, 1))).status == 201
    reader = hub.token("read:auth")
    for suffix in ("manifest", "package", "revisions/1/manifest", "revisions/1/package"):
        hidden = await hub.get(f"/v1/views/ops/{suffix}", reader)
        absent = await hub.get(f"/v1/views/nothing/{suffix}", reader)
        assert hidden.status == absent.status == 404
        assert hidden.body == absent.body
        assert (await hub.get(f"/v1/views/auth/{suffix}", reader)).status == 200
    listed = ViewList.model_validate_json((await hub.get("/v1/views", reader)).body)
    assert [entry.view_id for entry in listed.views] == ["auth"]
    every = ViewList.model_validate_json((await hub.get("/v1/views", hub.admin)).body)
    assert [entry.view_id for entry in every.views] == ["auth", "ops"]
    assert every.views[0].revision == 1 and every.views[0].expires


async def test_scopes_on_publish(hub: Hub) -> None:
    assert (await hub.publish("auth", *build("auth", 1))).status == 201
    reader, star = hub.token("read:auth"), hub.token("read:*")
    publisher = hub.token("publish:auth")
    refused = await hub.publish("auth", *build("auth", 2), token=reader)
    assert refused.status == 403 and refused.code == "forbidden"
    assert (await hub.publish("new", *build("new", 1), token=star)).status == 404
    assert (await hub.publish("ops", *build("ops", 1), token=publisher)).status == 404
    assert (await hub.publish("auth", *build("auth", 2), token=publisher)).status == 201
    anyone = hub.token("publish:*")
    assert (await hub.publish("fresh", *build("fresh", 1), token=anyone)).status == 201
    # a publisher sees its own view (it needs the current revision to pick the next)
    assert (await hub.get("/v1/views/auth/manifest", publisher)).status == 200


async def test_revocation_applies_to_the_next_request(hub: Hub) -> None:
    assert (await hub.publish("auth", *build("auth", 1))).status == 201
    token_id, raw = hub.store.create(["read:auth"])
    assert (await hub.get("/v1/views/auth/manifest", raw)).status == 200
    TokenStore(hub.data / DB_NAME).revoke(token_id)  # as `memsync hub token revoke` would
    answer = await hub.get("/v1/views/auth/manifest", raw)
    assert answer.status == 401 and answer.code == "revoked-token"


# -- publishing and reading ---------------------------------------------------------------------


async def test_publish_read_conditional_get_retry_and_conflicts(hub: Hub) -> None:
    reader = hub.token("read:auth")
    manifest, package = build("auth", 1, "first")
    created = await hub.publish("auth", manifest, package)
    assert created.status == 201
    result = PublishResult.model_validate_json(created.body)
    assert (result.status, result.revision) == ("created", 1)
    assert result.sha256 == hashlib.sha256(package).hexdigest()

    got = await hub.get("/v1/views/auth/manifest", reader)
    assert got.status == 200 and got.body == manifest
    assert got.headers["ETag"] == etag(manifest)
    assert got.headers["Content-Type"].startswith("application/json")
    for match in (etag(manifest), f"W/{etag(manifest)}", f'"other", {etag(manifest)}', "*"):
        again = await hub.get("/v1/views/auth/manifest", reader, **{"If-None-Match": match})
        assert again.status == 304 and again.body == b""
        assert again.headers["ETag"] == etag(manifest)
    stale = await hub.get("/v1/views/auth/manifest", reader, **{"If-None-Match": etag(b"x")})
    assert stale.status == 200

    pkg = await hub.get("/v1/views/auth/package", reader)
    assert pkg.status == 200 and pkg.body == package
    assert pkg.headers["ETag"] == etag(package)
    assert pkg.headers["Content-Type"] == "application/zip"
    assert int(pkg.headers["Content-Length"]) == len(package)
    cached = await hub.get("/v1/views/auth/package", reader, **{"If-None-Match": etag(package)})
    assert cached.status == 304 and cached.headers["ETag"] == etag(package)

    retry = await hub.publish("auth", *build("auth", 1, "first"))  # re-signed, same package
    assert retry.status == 200
    assert PublishResult.model_validate_json(retry.body).status == "unchanged"
    other = await hub.publish("auth", *build("auth", 1, "changed"))
    assert other.status == 409 and other.code == "equivocation"

    assert (await hub.publish("auth", *build("auth", 5, "fifth"))).status == 201
    lower = await hub.publish("auth", *build("auth", 3, "third"))
    assert lower.status == 409 and lower.code == "rollback"
    assert (await hub.publish("auth", *build("auth", 1, "first"))).status == 200  # old retry
    now = await hub.get("/v1/views/auth/manifest", reader, **{"If-None-Match": etag(manifest)})
    assert now.status == 200 and now.json()["signed"]["revision"] == 5


async def test_revision_urls_are_immutable_copies(hub: Hub) -> None:
    reader = hub.token("read:auth")
    first, first_pkg = build("auth", 1, "one")
    second, _ = build("auth", 2, "two")
    assert (await hub.publish("auth", first, first_pkg)).status == 201
    assert (await hub.publish("auth", second, build("auth", 2, "two")[1])).status == 201
    old = await hub.get("/v1/views/auth/revisions/1/manifest", reader)
    assert old.status == 200 and old.body == first
    assert old.headers["Cache-Control"] == "public, max-age=31536000, immutable"
    assert old.headers["ETag"] == etag(first)
    old_pkg = await hub.get("/v1/views/auth/revisions/1/package", reader)
    assert old_pkg.body == first_pkg and old_pkg.headers["ETag"] == etag(first_pkg)
    assert "immutable" in old_pkg.headers["Cache-Control"]
    for bad in ("01", "3", "99999999999999999999", "-1", "x"):
        assert (await hub.get(f"/v1/views/auth/revisions/{bad}/manifest", reader)).status == 404
    stored = hub.data / "views" / "auth" / "revisions"
    assert sorted(p.name for p in stored.iterdir()) == ["1", "2"]
    assert (stored / "1" / "manifest").read_bytes() == first


async def test_oversized_uploads_are_refused_and_nothing_is_stored(hub: Hub) -> None:
    await restart(hub, max_upload=64 * 1024)
    url = hub.url
    big = os.urandom(100 * 1024)
    manifest, _ = build("auth", 1)
    form = aiohttp.FormData()
    form.add_field("manifest", manifest, filename="manifest")
    form.add_field("package", big, filename="package")
    async with hub.session.post(
        f"{url}/v1/views/auth/revisions", data=form, headers=bearer(hub.admin)
    ) as resp:
        assert resp.status == 413
        assert ErrorBody.model_validate_json(await resp.read()).error.code == "too-large"

    boundary = "memsyncboundary"
    body = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="manifest"\r\n\r\n'.encode()
        + manifest
        + f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="package"\r\n\r\n'.encode()
        + big
        + f"\r\n--{boundary}--\r\n".encode()
    )

    async def trickle() -> AsyncIterator[bytes]:  # chunked: no Content-Length to trust
        for offset in range(0, len(body), 8192):
            yield body[offset : offset + 8192]

    headers = {**bearer(hub.admin), "Content-Type": f"multipart/form-data; boundary={boundary}"}
    async with hub.session.post(
        f"{url}/v1/views/auth/revisions", data=trickle(), headers=headers
    ) as resp:
        assert resp.status == 413
    assert not (hub.data / "views" / "auth").exists()
    assert list((hub.data / "tmp").iterdir()) == []


async def test_invalid_uploads_are_422_with_problems(hub: Hub) -> None:
    manifest, package = build("auth", 1)
    garbage = await hub.publish("auth", b'{"signed": {}, "signed": {}}', package)
    assert garbage.status == 422 and garbage.code == "signature-invalid"
    wrong = await hub.publish("other", manifest, package)
    assert wrong.status == 422 and wrong.code == "wrong-view"
    _, other_package = build("auth", 1, "different bytes")
    mismatch = await hub.publish("auth", manifest, other_package)
    assert mismatch.status == 422
    codes = {p.code for p in ErrorBody.model_validate_json(mismatch.body).problems or []}
    assert "hash-mismatch" in codes
    expired = await hub.publish("auth", *build("auth", 1, expires=timedelta(days=-2)))
    assert expired.status == 422 and expired.code == "expired"
    files = package_files("auth")
    del files["dist/manifest.toml"]
    broken = await hub.publish("auth", *build("auth", 1, files=files))
    assert broken.status == 422
    problems = ErrorBody.model_validate_json(broken.body).problems or []
    assert "package-layout" in {p.code for p in problems}
    not_zip_files = package_files("auth")
    bad_zip_manifest, _ = build("auth", 1, files=not_zip_files)
    missing_field = aiohttp.FormData()
    missing_field.add_field("manifest", bad_zip_manifest, filename="manifest")
    async with hub.session.post(
        f"{hub.url}/v1/views/auth/revisions", data=missing_field, headers=bearer(hub.admin)
    ) as resp:
        assert resp.status == 400
    async with hub.session.post(
        f"{hub.url}/v1/views/auth/revisions", json={"x": 1}, headers=bearer(hub.admin)
    ) as resp:
        assert resp.status == 415
    assert not (hub.data / "views" / "auth").exists()
    assert (await hub.publish("auth", manifest, package)).status == 201


# -- events ---------------------------------------------------------------------------------


class Stream:
    """A Server-Sent Events reader over one open response."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def next(self, *, pings: bool = False, timeout: float = 5.0) -> tuple[str, str]:
        event, data = "", []
        async with asyncio.timeout(timeout):
            while True:
                line = (await self.response.content.readline()).decode()
                if not line:
                    return ("eof", "")
                line = line.rstrip("\n")
                if line.startswith(":"):
                    if pings:
                        return ("comment", line[1:].strip())
                elif line.startswith("event:"):
                    event = line.partition(":")[2].strip()
                elif line.startswith("data:"):
                    data.append(line.partition(":")[2].strip())
                elif not line and event:
                    return (event, "\n".join(data))


async def subscribe(hub: Hub, token: str, query: str = "") -> tuple[Stream, aiohttp.ClientResponse]:
    response = await hub.session.get(f"{hub.url}/v1/events{query}", headers=bearer(token))
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/event-stream")
    return Stream(response), response


async def test_events_are_filtered_by_query_and_by_scope(hub: Hub) -> None:
    auth_reader = await subscribe(hub, hub.token("read:auth"), "?view=auth")
    ops_reader = await subscribe(hub, hub.token("read:ops"))
    everything = await subscribe(hub, hub.admin)
    team = await subscribe(hub, hub.token("root:team"), "?root=team")
    manifest, package = build("auth", 1)
    assert (await hub.publish("auth", manifest, package)).status == 201
    accepted = await hub.notify("team", {"commit": "a" * 40})
    assert accepted.status == 202 and accepted.json() == {"root": "team", "commit": "a" * 40}
    assert (await hub.publish("ops", *build("ops", 1))).status == 201

    revision = {"view_id": "auth", "revision": 1, "sha256": hashlib.sha256(package).hexdigest()}
    kind, data = await auth_reader[0].next()
    assert kind == "revision" and json.loads(data) == revision
    assert (await everything[0].next())[0] == "revision"
    kind, data = await everything[0].next()
    assert kind == "upstream" and json.loads(data) == {"root": "team", "commit": "a" * 40}
    kind, data = await team[0].next()
    assert kind == "upstream" and json.loads(data)["root"] == "team"
    kind, data = await ops_reader[0].next()  # never saw auth's revision nor team's upstream
    assert kind == "revision" and json.loads(data)["view_id"] == "ops"
    for _, response in (auth_reader, ops_reader, everything, team):
        response.close()


async def test_events_heartbeat_and_end_when_the_token_is_revoked(hub: Hub) -> None:
    token_id, raw = hub.store.create(["read:*"])
    stream, response = await subscribe(hub, raw)
    assert await stream.next(pings=True) == ("comment", "ping")
    hub.store.revoke(token_id)
    while (item := await stream.next(pings=True)) == ("comment", "ping"):
        pass
    assert item == ("eof", "")
    response.close()


async def test_notify_rules(hub: Hub) -> None:
    sha = "0123456789abcdef" * 4
    assert (await hub.notify("team", {"commit": sha}, hub.token("notify:team"))).status == 202
    assert (await hub.notify("team", {"commit": sha}, hub.token("notify:*"))).status == 202
    for scope in ("read:team", "publish:team", "publish:*", "root:team", "root:*"):
        refused = await hub.notify("team", {"commit": sha}, hub.token(scope))
        assert (refused.status, refused.code) == (403, "forbidden"), scope
    assert (await hub.notify("ops", {"commit": sha}, hub.token("notify:team"))).status == 403
    for body in ({"commit": "xyz"}, {"commit": sha, "more": 1}, {"commit": sha.upper()}, [1]):
        assert (await hub.notify("team", body)).status == 400
    assert (await hub.notify("team", {"commit": "f" * 5000})).status == 413


# -- secrecy and persistence ------------------------------------------------------------------


async def test_tokens_never_reach_logs_or_the_database(
    hub: Hub, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    reader = hub.token("read:auth")
    publisher = hub.token("publish:auth")
    assert (await hub.publish("auth", *build("auth", 1), token=publisher)).status == 201
    await hub.get("/v1/views/auth/manifest", reader)
    await hub.get(f"/v1/views/auth/manifest?access_token={reader}&view=auth")
    await hub.get(f"/v1/events?root={reader}")
    await hub.get(f"/v1/views/{reader}/manifest", reader)
    await hub.get("/v1/views", "msk_" + "0" * 16 + "_" + reader.split("_", 2)[2])
    await hub.get("/v1/views", **{"Authorization": reader})
    await restart(hub)  # drains background writes (audit, last-used)
    access = [r for r in caplog.records if r.name == "memsync.hub.access"]
    assert len(access) >= 6
    text = caplog.text
    secrets_ = [t.split("_", 2)[2] for t in (reader, publisher, hub.admin)]
    for secret in secrets_:
        assert secret not in text
        assert secret[:12] not in text
    data = b"".join(p.read_bytes() for p in hub.data.glob(DB_NAME + "*"))
    for secret in secrets_:
        assert secret.encode() not in data
    refusals = [e for e in hub.store.audit_events() if e.action == "auth.refuse"]
    assert refusals and all(reader not in repr(e) for e in refusals)


async def test_state_survives_a_restart(hub: Hub) -> None:
    reader = hub.token("read:auth")
    manifest, package = build("auth", 1)
    assert (await hub.publish("auth", manifest, package)).status == 201
    (hub.data / "views" / "auth" / "revisions" / ".tmp-crashed").mkdir()
    await restart(hub)
    got = await hub.get("/v1/views/auth/manifest", reader, **{"If-None-Match": etag(manifest)})
    assert got.status == 304
    assert not (hub.data / "views" / "auth" / "revisions" / ".tmp-crashed").exists()
    assert (await hub.publish("auth", manifest, package)).status == 200
    assert (await hub.publish("auth", *build("auth", 2))).status == 201


async def test_one_server_per_data_dir(hub: Hub) -> None:
    in_flight = hub.data / "tmp" / "upload-in-flight"
    in_flight.write_bytes(b"partial")  # the running hub's upload: a second one must not touch it
    runner = hub_runner(make_app(hub.data))
    with pytest.raises(UsageError):
        await runner.setup()
    await runner.cleanup()
    assert in_flight.exists()
    assert (await hub.get("/v1/health")).status == 200


def test_run_hub_logs_its_url_and_stops_on_sigterm(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    hub_init(data)
    script = (
        "import logging, sys; from pathlib import Path; "
        "from memsync.hub.serve import run_hub; "
        "logging.basicConfig(level=logging.INFO, stream=sys.stderr); "
        "run_hub(Path(sys.argv[1]), '127.0.0.1:0')"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(data)], stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert "memsync hub serving" in line and "http://127.0.0.1:" in line
        url = line.split("on ", 1)[1].strip()

        async def health() -> int:
            async with aiohttp.ClientSession() as session, session.get(url + "/v1/health") as r:
                return r.status

        assert asyncio.run(health()) == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_a_revision_far_past_the_current_one_is_refused(hub: Hub) -> None:
    """One upload must not burn the revision space and block every later publication."""
    manifest, package = build("jump", MAX_JUMP + 1)
    refused = await hub.publish("jump", manifest, package)
    assert refused.status == 422
    manifest, package = build("jump", 1)
    assert (await hub.publish("jump", manifest, package)).status == 201


# -- the fast lane ----------------------------------------------------------------------------


def _aiohttp_parse(data: bytes) -> list[Any] | None:
    """The messages aiohttp's own (C) parser reads from `data`, or None if it refuses it."""
    loop = asyncio.new_event_loop()
    try:
        parser = HttpRequestParser(
            BaseProtocol(loop), loop, 2**16, max_line_size=8190, max_field_size=8190
        )
        try:
            messages, _upgraded, _tail = parser.feed_data(data)
        except HttpProcessingError:
            return None
        return [message for message, _payload in messages]
    finally:
        loop.close()


_HEAD_LINES = st.sampled_from(
    [
        b"Host: hub.example:8765",
        b"Authorization: Bearer msk_0123456789abcdef_" + b"A" * 43,
        b'If-None-Match: "sha256:ab"',
        b'If-None-Match: W/"x", "y"',
        b"Accept: */*",
        b"Connection: keep-alive",
        b"Connection: close",
        b"Content-Length: 5",
        b"Transfer-Encoding: chunked",
        b"X-Thing:  padded \t",
        b" folded",
        b"Authorization : Bearer x",
        b"Host: a b",
        b"Bad\x00: x",
        b"Caf\xc3\xa9: x",
        b"Upgrade: h2c",
        b"Authorization: Bearer msk_fedcba9876543210_" + b"B" * 43,
        b'If-None-Match: "other"',
        b"Host: second.example",
    ]
)
_REQUEST_LINES = st.one_of(
    st.sampled_from(
        [b"GET /v1/views/auth/manifest HTTP/1.1", b"GET /v1/views/auth/package HTTP/1.1"]
    ),
    st.sampled_from(
        [
            b"GET /v1/views/auth/manifest?x=1 HTTP/1.1",
            b"GET /v1/views/a%2Fb/manifest HTTP/1.1",
            b"GET /v1/views/auth/manifest HTTP/1.0",
            b"HEAD /v1/views/auth/manifest HTTP/1.1",
            b"GET  /v1/views/auth/manifest HTTP/1.1",
            b"GET /v1/views/../manifest HTTP/1.1",
        ]
    ),
)
_REQUIRED = [
    b"Host: hub.example:8765",
    b"Authorization: Bearer msk_0123456789abcdef_" + b"A" * 43,
    b'If-None-Match: "sha256:ab"',
]


@st.composite
def _heads(draw: st.DrawFn) -> bytes:
    """A request head: the lines a lane request needs, some dropped, others added, shuffled,
    sometimes with a few random bytes put in anywhere."""
    lines = [line for line in _REQUIRED if draw(st.integers(0, 9))]  # usually all three
    lines = draw(st.permutations(lines + draw(st.lists(_HEAD_LINES, max_size=2))))
    head = b"\r\n".join([draw(_REQUEST_LINES), *lines])
    if draw(st.integers(0, 3)) == 0:
        at = draw(st.integers(0, len(head)))
        head = head[:at] + draw(st.binary(min_size=1, max_size=3)) + head[at:]
    return head


@given(head=_heads())
def test_the_fast_lane_answers_only_requests_aiohttp_reads_the_same(head: bytes) -> None:
    """Whatever head the lane accepts, aiohttp parses as the same one GET without a body,
    with the same path and the same Authorization and If-None-Match, ending where the
    lane's ends: the lane never answers a request aiohttp would frame another way."""
    accepted = parse_head(head)
    if accepted is None:
        return
    parsed = _aiohttp_parse(head + b"\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n")
    assert parsed is not None, head
    assert [m.path for m in parsed][1:] == ["/next"]  # the request ends where the lane's does
    message = parsed[0]
    view, what, auth, match = accepted
    assert (message.method, message.version) == ("GET", (1, 1))
    assert message.path == f"/v1/views/{view}/{what}"
    assert message.headers.getall("Authorization") == [auth.decode()]
    assert message.headers.getall("If-None-Match") == [match.decode()]
    assert "Content-Length" not in message.headers and not message.chunked


async def _raw(hub: Hub, data: bytes, answers: int = 1) -> list[bytes]:
    """Send `data` on one new connection; read `answers` whole answers."""
    reader, writer = await asyncio.open_connection(*hub.url.removeprefix("http://").split(":"))
    writer.write(data)
    got = []
    for _ in range(answers):
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(h.split(b":")[1])
                for h in head.split(b"\r\n")
                if h.lower().startswith(b"content-length:")
            ),
            0,
        )
        got.append(head + await reader.readexactly(length))
    writer.close()
    return got


def _request(token: str, tag: str, path: str = "/v1/views/auth/manifest", *extra: str) -> bytes:
    lines = [f"GET {path} HTTP/1.1", "Host: hub", f"Authorization: Bearer {token}"]
    if tag:
        lines.append(f"If-None-Match: {tag}")
    return ("\r\n".join([*lines, *extra]) + "\r\n\r\n").encode()


def _answer(raw: bytes) -> tuple[bytes, dict[str, str]]:
    head, _, _ = raw.partition(b"\r\n\r\n")
    status, *lines = head.decode().split("\r\n")
    fields = {name.lower(): value for name, value in (line.split(": ", 1) for line in lines)}
    fields.pop("date")
    return status.encode(), fields


async def test_the_fast_lane_answers_as_aiohttp_does_and_hands_over_the_rest(hub: Hub) -> None:
    manifest, package = build("auth", 1)
    assert (await hub.publish("auth", manifest, package)).status == 201
    reader = hub.token("read:auth")
    lanes = hub.runners[0].app[LANES]
    fast = (await _raw(hub, _request(reader, etag(manifest))))[0]
    query = "/v1/views/auth/manifest?view=auth"  # not the lane's: aiohttp answers it
    slow = (await _raw(hub, _request(reader, etag(manifest), query)))[0]
    assert _answer(fast) == _answer(slow)
    assert _answer(fast)[0] == b"HTTP/1.1 304 Not Modified"
    # the lane holds a connection until a request needs aiohttp
    stream, writer = await asyncio.open_connection(*hub.url.removeprefix("http://").split(":"))
    writer.write(_request(reader, etag(manifest)))
    assert b" 304 " in await stream.readuntil(b"\r\n\r\n")
    assert len(lanes) == 1
    writer.write(_request(reader, etag(manifest), query))
    assert b" 304 " in await stream.readuntil(b"\r\n\r\n")
    assert not lanes
    writer.close()
    # pipelined: 304 (lane), 200 with the body (aiohttp takes over), 304 (aiohttp now)
    answers = await _raw(
        hub,
        _request(reader, etag(manifest))
        + _request(reader, "")
        + _request(reader, f'"x", W/{etag(package)}', "/v1/views/auth/package"),
        answers=3,
    )
    assert [a.split(b"\r\n")[0] for a in answers] == [
        b"HTTP/1.1 304 Not Modified",
        b"HTTP/1.1 200 OK",
        b"HTTP/1.1 304 Not Modified",
    ]
    assert answers[1].endswith(manifest)
    # refusals and misses are aiohttp's, with their JSON bodies
    for request, status in (
        (_request("msk_0123456789abcdef_" + "A" * 43, etag(manifest)), b"401"),
        (_request(hub.token("read:ops"), etag(manifest)), b"404"),
        (_request(reader, '"other"'), b"200"),
        (_request(reader, etag(manifest), "/v1/views/auth/manifest", "Connection: close"), b"304"),
    ):
        answer = (await _raw(hub, request))[0]
        assert answer.split(b" ")[1] == status, answer
    # a revoked token is refused at once, in the lane too
    token_id, raw = hub.store.create(["read:auth"])
    assert _answer((await _raw(hub, _request(raw, etag(manifest))))[0])[0].endswith(
        b"304 Not Modified"
    )
    hub.store.revoke(token_id)
    assert b" 401 " in (await _raw(hub, _request(raw, etag(manifest))))[0]
    await restart(hub)
    assert not lanes  # connections the lane still held were closed at shutdown
