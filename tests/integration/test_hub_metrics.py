"""The hub's `GET /metrics` as a scraper sees it: a real hub on loopback, real requests
(refused, answered by aiohttp, answered by the fast lane), real uploads and event streams;
the page is read with prometheus-client's own parser and checked by promtool."""

from __future__ import annotations

import asyncio

import aiohttp
import pytest

from memsync.hub.tokens import TokenError, check_scope
from tests.helpers import metric, metric_samples, promtool_check
from tests.integration.test_hub import Hub, bearer, build, hub, subscribe
from tests.integration.test_hub_workers import pair

__all__ = ["hub", "pair"]  # fixtures of test_hub.py and test_hub_workers.py, found by name

ROUTES = {
    "/metrics",
    "/v1/health",
    "/v1/views",
    "/v1/views/{id}/manifest",
    "/v1/views/{id}/package",
    "/v1/views/{id}/revisions",
    "/v1/views/{id}/revisions/{n}/manifest",
    "/v1/views/{id}/revisions/{n}/package",
    "/v1/roots/{name}/notify",
    "/v1/events",
    "unmatched",
}


async def scrape(hub: Hub, token: str | None = None) -> str:
    answer = await hub.get("/metrics", token or hub.token("metrics"))
    assert answer.status == 200, answer.body
    assert answer.headers["Content-Type"].startswith("text/plain; version=")
    return answer.body.decode()


def requests(text: str, route: str, status: int) -> float:
    return metric(text, "memsync_hub_requests_total", route=route, status=str(status)) or 0.0


async def test_metrics_need_a_token_with_scope_metrics_or_admin(hub: Hub) -> None:
    assert check_scope("metrics") == "metrics"
    with pytest.raises(TokenError):
        check_scope("metrics:auth")
    missing = await hub.get("/metrics")
    assert missing.status == 401 and missing.code == "missing-token"
    reader = await hub.get("/metrics", hub.token("read:*", "publish:*", "notify:*"))
    assert reader.status == 403 and reader.code == "forbidden"
    assert (await hub.get("/metrics", hub.admin)).status == 200
    metrics_only = hub.token("metrics")
    assert (await hub.get("/metrics", metrics_only)).status == 200
    assert (await hub.get("/v1/views", metrics_only)).json() == {"views": []}  # nothing else


async def test_requests_bytes_uploads_streams_refusals_and_revisions_are_counted(
    hub: Hub,
) -> None:
    reader = hub.token("read:*")
    manifest, package = build("auth", 1)
    assert (await hub.publish("auth", manifest, package)).status == 201
    assert (await hub.publish("auth", manifest, package)).status == 200  # a retry: unchanged
    assert (await hub.publish("auth", *build("auth", 1, "other"))).status == 409
    assert (await hub.publish("auth", b"{}", package)).status == 422
    assert (await hub.publish("auth", manifest, package, reader)).status == 403
    for _ in range(3):
        assert (await hub.get("/v1/views")).status == 401  # missing
    assert (await hub.get("/v1/views", "not-a-token")).status == 401  # malformed
    assert (await hub.get(f"/v1/views?token={reader}", reader)).status == 401  # in-url
    got = await hub.get("/v1/views/auth/manifest", reader)
    assert got.status == 200
    tag = got.headers["ETag"]
    async with aiohttp.ClientSession() as fresh:  # a new connection: the fast lane's
        for _ in range(2):  # both answered by the lane itself, never seen by aiohttp
            headers = {**bearer(reader), "If-None-Match": tag}
            async with fresh.get(f"{hub.url}/v1/views/auth/manifest", headers=headers) as got:
                assert got.status == 304
    assert (await hub.get("/v1/views/auth/package", reader)).status == 200
    assert (await hub.get("/v1/views/auth/revisions/1/manifest", reader)).status == 200
    secret_path = f"/v1/nothing/{reader}/here"
    assert (await hub.get(secret_path, reader)).status == 404
    assert (await hub.get("/v1/views/auth/revisions/9/manifest", reader)).status == 404
    _stream, response = await subscribe(hub, reader)
    try:
        text = await scrape(hub)
        assert metric(text, "memsync_hub_event_streams_open") == 1
    finally:
        response.close()

    async def closed() -> str:
        async with asyncio.timeout(10):
            while True:  # the hub notices the stream is gone at its next write (heartbeat)
                page = await scrape(hub)
                if metric(page, "memsync_hub_event_streams_open") == 0:
                    return page
                await asyncio.sleep(0.05)

    text = await closed()
    promtool_check(text)
    assert requests(text, "/v1/views", 401) == 5
    assert requests(text, "/v1/views/{id}/manifest", 200) == 1
    assert requests(text, "/v1/views/{id}/manifest", 304) == 2  # the fast lane's own
    assert requests(text, "/v1/views/{id}/package", 200) == 1
    assert requests(text, "/v1/views/{id}/revisions/{n}/manifest", 200) == 1
    assert requests(text, "/v1/views/{id}/revisions/{n}/manifest", 404) == 1
    assert requests(text, "unmatched", 404) == 1
    assert requests(text, "/v1/views/{id}/revisions", 201) == 1
    assert requests(text, "/v1/events", 200) == 1
    sent = metric(text, "memsync_hub_response_bytes_total", route="/v1/views/{id}/package")
    assert sent is not None and len(package) < sent < len(package) + 1024  # head and package
    failures = {
        dict(labels)["reason"]: value
        for (name, labels), value in metric_samples(text).items()
        if name == "memsync_hub_token_failures_total"
    }
    assert failures == {
        "missing": 3,
        "malformed": 1,
        "in-url": 1,
        "unknown": 0,
        "expired": 0,
        "revoked": 0,
    }
    uploads = {
        dict(labels)["result"]: value
        for (name, labels), value in metric_samples(text).items()
        if name == "memsync_hub_uploads_total"
    }
    assert uploads == {"created": 1, "unchanged": 1, "conflict": 1, "refused": 1, "forbidden": 1}
    assert metric(text, "memsync_hub_view_revision", view="auth") == 1
    routes = {
        dict(labels)["route"]
        for (name, labels), _ in metric_samples(text).items()
        if name == "memsync_hub_requests_total"
    }
    assert routes <= ROUTES  # templates only: never a raw path
    assert reader not in text and reader.split("_", 2)[2] not in text  # the secret may hold "_"
    assert "nothing" not in text and "revisions/9" not in text


async def test_a_new_revision_moves_the_view_gauge(hub: Hub) -> None:
    for revision in (1, 2):
        manifest, package = build("ops", revision, str(revision))
        assert (await hub.publish("ops", manifest, package)).status == 201
        assert metric(await scrape(hub), "memsync_hub_view_revision", view="ops") == revision
    assert (await hub.get("/v1/views", hub.admin)).status == 200
    text = await scrape(hub, hub.admin)
    assert requests(text, "/v1/views", 200) == 1
    assert bearer(hub.admin)["Authorization"].split()[1] not in text


async def test_a_worker_reports_a_revision_another_worker_stored(
    pair: tuple[str, str, str],
) -> None:
    """Two workers in this process (their datagrams lost): the second one's page shows the
    revision the first one stored, read from the data dir at scrape time."""
    first, second, admin = pair
    manifest, package = build("auth", 1)
    form = aiohttp.FormData()
    form.add_field("manifest", manifest, filename="manifest", content_type="application/json")
    form.add_field("package", package, filename="package", content_type="application/zip")
    async with aiohttp.ClientSession() as session:
        url = f"{first}/v1/views/auth/revisions"
        async with session.post(url, data=form, headers=bearer(admin)) as answer:
            assert answer.status == 201
        async with session.get(f"{second}/metrics", headers=bearer(admin)) as answer:
            assert answer.status == 200
            text = await answer.text()
    assert metric(text, "memsync_hub_view_revision", view="auth") == 1
    promtool_check(text)
