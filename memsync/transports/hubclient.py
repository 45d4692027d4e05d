"""The hub client: every `/v1/` URL memsync calls on a hub (or a static view host).

A view is served at its base URL (`https://hub/v1/views/ID`, or `DIR/v1/views/ID` of a
`views build` export on any static host): `manifest` and `package` under it, and on a hub
`revisions` (uploads). A hub also serves `POST /v1/roots/ROOT/notify` and the event stream
`GET /v1/events?root=ROOT|view=ID`. The URLs are built here and nowhere else; the requests
go through the HTTP box (`http.py`), which owns the session, deadlines, byte caps,
redirects and the URL/token rule (`hubrule.py`). What each call may do is decided here, not
by its caller: a manifest or package is fetched with retries and followed across at most
five redirects (the token to its origin only), an upload or a notification is sent once
and never redirected, an event stream is never redirected nor decompressed.

Importing this module is cheap (no aiohttp, no yarl): the daemon works out its event URLs
at rest and loads the box only once it talks to a hub.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import parse_qs, quote, urlsplit

if TYPE_CHECKING:
    import aiohttp

    from memsync.transports.http import Fetched, HttpClient

__all__ = ["HubClient", "events_name_root", "notify_url", "view_events_url", "view_url"]

VIEWS = "/v1/views/"
NOTIFY_ANSWER = 64 * 1024  # bytes of a notification's answer read at most
UPLOAD_ANSWER = 1024 * 1024  # bytes of an upload's answer (its problems) read at most


def view_url(hub: str, view_id: str) -> str:
    """A view's base on a hub: `https://hub` + `auth` -> `https://hub/v1/views/auth`."""
    return f"{hub.rstrip('/')}{VIEWS}{view_id}"


def notify_url(hub: str, root: str) -> str:
    """Where a push is announced: `https://hub/v1/roots/ROOT/notify`."""
    return f"{hub.rstrip('/')}/v1/roots/{quote(root, safe='')}/notify"


def view_events_url(url: str) -> str | None:
    """The event stream of the hub serving the view at `url`:
    `https://hub/v1/views/auth` -> `https://hub/v1/events?view=auth`; None when `url` is
    not a hub's view URL (a static host has no events)."""
    parts = urlsplit(url)
    if VIEWS not in parts.path:
        return None
    base, rest = parts.path.split(VIEWS, 1)
    view_id = rest.split("/", 1)[0]
    return f"{parts.scheme}://{parts.netloc}{base}/v1/events?view={view_id}"


def events_name_root(url: str, root: str) -> bool:
    """Whether the event stream at `url` (`…/v1/events?root=ROOT`) carries `root`'s
    `upstream` events: its `root` parameter names it, or it names no root at all."""
    return root in parse_qs(urlsplit(url).query).get("root", [root])


class HubClient:
    """A hub's calls over one HTTP box: `async with HubClient(allow_http=…) as hub:` opens
    its own, `HubClient.over(client)` shares one (every view of a pull on one session).

    `allow_http` is the one http-vs-https choice a caller makes: plain http to a
    non-loopback host (never with a token; loopback http is always allowed)."""

    def __init__(self, *, allow_http: bool = False) -> None:
        self.allow_http = allow_http
        self._client: HttpClient | None = None
        self._owned = True

    @classmethod
    def over(cls, client: HttpClient, *, allow_http: bool | None = None) -> HubClient:
        """A hub client on an open box's session; `allow_http` its own choice (the box's
        when None). Closed with the box, not by this client."""
        if allow_http is not None and allow_http != client.allow_http:
            client = client.under(allow_http=allow_http)
        hub = cls(allow_http=client.allow_http)
        hub._client, hub._owned = client, False
        return hub

    async def __aenter__(self) -> HubClient:
        from memsync.transports.http import HttpClient  # noqa: PLC0415 - aiohttp when used

        if self._client is None:
            self._client = await HttpClient(allow_http=self.allow_http).__aenter__()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._owned and self._client is not None:
            client, self._client = self._client, None
            await client.__aexit__(*exc_info)

    @property
    def client(self) -> HttpClient:
        from memsync.errors import InternalError  # noqa: PLC0415 - a programming error

        if self._client is None:
            raise InternalError("internal: HubClient used outside `async with`")
        return self._client

    async def manifest(
        self,
        base: str,
        *,
        token: str | None,
        etag: str | None,
        max_bytes: int,
        deadline: float,
    ) -> Fetched:
        """`GET base/manifest` into memory, conditional on `etag`, retried while time
        remains."""
        return await self.client.get_with_retry(
            f"{base.rstrip('/')}/manifest",
            dest=None,
            token=token,
            etag=etag,
            max_bytes=max_bytes,
            deadline=deadline,
        )

    async def package(
        self,
        base: str,
        dest: Path,
        *,
        token: str | None,
        max_bytes: int,
        expected_length: int | None,
        deadline: float,
        on_bytes: Callable[[int], None] | None = None,
    ) -> Fetched:
        """`GET base/package` streamed into `dest` (complete or not at all), retried."""
        return await self.client.get_with_retry(
            f"{base.rstrip('/')}/package",
            dest=dest,
            token=token,
            etag=None,
            max_bytes=max_bytes,
            deadline=deadline,
            expected_length=expected_length,
            on_bytes=on_bytes,
        )

    async def upload(
        self, base: str, *, manifest: bytes, package: bytes, token: str, deadline: float
    ) -> tuple[int, bytes]:
        """`POST base/revisions` (the signed manifest and the package), once; the status
        and the hub's answer."""
        return await self.client.post_form(
            f"{base.rstrip('/')}/revisions",
            fields={
                "manifest": (manifest, "application/json"),
                "package": (package, "application/zip"),
            },
            token=token,
            deadline=deadline,
            max_response=UPLOAD_ANSWER,
        )

    async def notify(
        self, hub: str, root: str, commit: str, *, token: str | None, deadline: float
    ) -> int:
        """`POST hub/v1/roots/ROOT/notify` with the pushed commit, once; the status."""
        status, _ = await self.client.post_json(
            notify_url(hub, root),
            document={"commit": commit},
            token=token,
            deadline=deadline,
            max_response=NOTIFY_ANSWER,
        )
        return status

    def events(
        self, url: str, *, token: str | None, last_id: str | None, read_timeout: float
    ) -> AbstractAsyncContextManager[aiohttp.StreamReader]:
        """`GET url` (a hub's `/v1/events?…`) as a Server-Sent Events stream, resuming
        after `last_id`; the body is yielded as served."""
        headers: Mapping[str, str] = {"Accept": "text/event-stream"} | (
            {"Last-Event-ID": last_id} if last_id else {}
        )
        return self.client.stream(url, token=token, headers=headers, read_timeout=read_timeout)
