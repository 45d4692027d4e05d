"""A view served over HTTP(S): a hub, or any static host of a `views build` export.

`<url>/manifest` is fetched conditionally (`If-None-Match` with the ETag of the last
answer; a `304` is "unchanged") and `<url>/package` streamed under the cap, both by the
hub client (`transports/hubclient.py`) on the HTTP box, which own the URLs, retries,
redirects, the token's origin and the byte caps on the wire. Its errors come out as
`SourceError`s with the same kind and text.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from memsync.progress import NO_PROGRESS, ByteCounter, Progress
from memsync.secrets import SecretRef, resolve_header
from memsync.transports.http import HttpClient, HttpError
from memsync.transports.hubclient import HubClient
from memsync.transports.process import Deadline
from memsync.views.archive import ArchiveLimits
from memsync.views.manifest import MAX_MANIFEST_BYTES
from memsync.views.source import ManifestFetch, PackageFetch, SourceError, package_cap


class HttpSource:
    """`url` is the view's base (`https://hub/v1/views/ID`); `token` a secret reference,
    resolved at each request and sent to `url`'s origin only."""

    label = "the view server"

    def __init__(
        self,
        client: HttpClient,
        url: str,
        token: SecretRef | None = None,
        where: str = "",
        progress: Progress = NO_PROGRESS,
        phase: str = "Downloading package",
        *,
        allow_http: bool = False,
    ) -> None:
        """`progress` is shown the package's bytes as they arrive, as `phase`; `allow_http`
        is the view's own (plain http to a non-loopback host, never with a token)."""
        self.hub = HubClient.over(client, allow_http=allow_http)
        self.url = url.rstrip("/")
        self.token = token
        self.where = where or "the view's source.token"  # the config key, for messages
        self.progress, self.phase = progress, phase

    async def manifest(self, *, etag: str | None, deadline: Deadline) -> ManifestFetch:
        try:
            got = await self.hub.manifest(
                self.url,
                token=self._token(),
                etag=etag,
                max_bytes=MAX_MANIFEST_BYTES,
                deadline=_on_loop(deadline),
            )
        except HttpError as exc:
            raise SourceError(exc.kind, exc.message) from exc
        if got.status == 304:
            return ManifestFetch(None, got.etag or etag, unchanged=True)
        return ManifestFetch(got.body or b"", got.etag)

    async def package(
        self,
        dest: Path,
        *,
        limits: ArchiveLimits,
        expected_length: int | None,
        deadline: Deadline,
    ) -> PackageFetch:
        counter = ByteCounter(self.progress, self.phase, expected_length)
        try:
            got = await self.hub.package(
                self.url,
                dest,
                token=self._token(),
                max_bytes=package_cap(limits, None),
                deadline=_on_loop(deadline),
                expected_length=expected_length,
                on_bytes=counter.at if self.progress.enabled else None,
            )
        except HttpError as exc:
            raise SourceError(exc.kind, exc.message) from exc
        return PackageFetch(got.length, got.sha256 or "")

    def _token(self) -> str | None:
        if self.token is None:
            return None
        return resolve_header(self.token, where=self.where)


def _on_loop(deadline: Deadline) -> float:
    """`deadline` on the event loop's clock, which the HTTP box measures by."""
    return asyncio.get_running_loop().time() + deadline.remaining()
