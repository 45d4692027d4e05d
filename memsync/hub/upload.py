"""Reading an upload (`POST /v1/views/{id}/revisions`) under the hub's byte cap.

The multipart body is read through `_CappedBody`, which refuses the request (413) as soon
as more than the cap has arrived, wherever the multipart reader is (a preamble, part
headers, part data): nothing past the cap is read or buffered. The manifest goes to memory
(at most `MAX_MANIFEST_BYTES`), the package straight into the caller's file, hashed on the
way.
"""

from __future__ import annotations

import hashlib
from typing import IO, Any, cast

from aiohttp import BodyPartReader, MultipartReader, StreamReader, web
from aiohttp.http_exceptions import HttpProcessingError

from memsync.hub.errors import ApiError

CHUNK = 64 * 1024


def _too_large(cap: int) -> ApiError:
    return ApiError(413, "too-large", f"the upload is over the hub's {cap}-byte cap")


class _CappedBody:
    """The request body as the multipart reader reads it, refused once more than `cap`
    bytes have arrived, wherever the reader is (a preamble, part headers, part data)."""

    def __init__(self, content: StreamReader, cap: int) -> None:
        self._content, self._cap = content, cap

    def _check(self) -> None:
        if self._content.total_bytes > self._cap:  # bytes received, read or not
            raise _too_large(self._cap)

    async def readline(self, *, max_line_length: int | None = None) -> bytes:
        self._check()
        line = await self._content.readline(max_line_length=max_line_length)
        self._check()
        return line

    async def read(self, n: int = -1) -> bytes:
        self._check()
        data = await self._content.read(n)
        self._check()
        return data

    def at_eof(self) -> bool:
        return self._content.at_eof()

    def unread_data(self, data: bytes) -> None:
        self._content.unread_data(data)


async def receive_upload(request: web.Request, cap: int, out: IO[bytes]) -> tuple[bytes, int, str]:
    """Stream the multipart body under a byte cap: the manifest into memory, the package
    into `out`. Returns (manifest bytes, package length, package sha256)."""
    from memsync.views.manifest import MAX_MANIFEST_BYTES  # noqa: PLC0415 - uploads only

    if request.content_length is not None and request.content_length > cap:
        raise _too_large(cap)
    if request.content_type != "multipart/form-data":
        raise ApiError(415, "unsupported-media-type", "send multipart/form-data: manifest, package")
    manifest: bytearray | None = None
    package: Any = None
    try:
        body = cast("StreamReader", _CappedBody(request.content, cap))  # the methods it uses
        reader = MultipartReader(request.headers, body)
        while (part := await reader.next()) is not None:
            name = part.name if isinstance(part, BodyPartReader) else None
            if (
                not isinstance(part, BodyPartReader)
                or name not in ("manifest", "package")
                or (manifest if name == "manifest" else package) is not None
            ):
                raise ApiError(
                    400, "bad-request", "expected the fields manifest and package, once each"
                )
            buffer, digest, length = bytearray(), hashlib.sha256(), 0
            while chunk := await part.read_chunk(CHUNK):
                if name == "package":
                    out.write(chunk)
                    digest.update(chunk)
                    length += len(chunk)
                elif len(buffer) + len(chunk) > MAX_MANIFEST_BYTES:
                    raise ApiError(
                        413, "too-large", f"a manifest is at most {MAX_MANIFEST_BYTES} bytes"
                    )
                else:
                    buffer += chunk
            if name == "manifest":
                manifest = buffer
            else:
                package = (length, digest.hexdigest())
    except (ValueError, HttpProcessingError) as exc:  # broken multipart framing
        raise ApiError(400, "bad-request", f"unreadable multipart body: {exc}") from exc
    if manifest is None or package is None:
        raise ApiError(400, "bad-request", "both fields manifest and package are required")
    return bytes(manifest), package[0], package[1]
