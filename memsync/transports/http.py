"""The HTTP box: the only module that talks to a hub or a view server.

One `aiohttp.ClientSession` (one connector) per `HttpClient`, shared by every view. Each
`get` is bounded by an absolute deadline on the event loop's clock (a trickling server is
cut off), a hard byte cap checked against `Content-Length` before reading and against the
bytes as they arrive, and redirects followed here, at most five, so that the Bearer token
goes to the original origin only and https never downgrades to http. Every URL, and every
redirect target, passes the one rule of `hubrule.url_problem` before any I/O: a token only
over https or to loopback, plain http to other hosts only when allowed and never with a
token. A hub's event stream (`stream`) and its push notification (`post_json`) go through
here too; a stream is never decompressed. Bodies stream into a temp file next
to `dest` that is fsynced and renamed only once complete; on any failure it is removed.
Responses are taken as served (no decompression), so `sha256` is the hash of the bytes on
the wire. A `304` says only "unchanged": the caller still re-checks what it has cached.
Tokens and query strings never reach a message or the log. Retries are `get_with_retry`'s
alone, except that aiohttp re-sends an idempotent request once when the connection drops
before any response (RFC 9112 9.3.1.1).

https is verified against the system's trust store with a TLS context this module builds
on the first https request (`_verified`): aiohttp's own default contexts, which read the CA
bundle when aiohttp is imported (~30 ms of CPU), are never used, so aiohttp loads here
without them (`tlstrust`) and a process that only speaks plain http or to loopback (a test
hub, `views pull` from an http hub) never reads the bundle.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import hashlib
import io
import logging
import os
import re
import secrets
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from memsync.tlstrust import no_trust_store

with no_trust_store(verifying=True):  # aiohttp's default contexts: unused here (`_verified`)
    import aiohttp
    from aiohttp import hdrs
from yarl import URL

from memsync.atomicfile import fsync_dir
from memsync.errors import InternalError, MemsyncError
from memsync.transports.httpkind import ErrorKind
from memsync.transports.hubrule import url_problem

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl

__all__ = ["ErrorKind", "Fetched", "HttpClient", "HttpError", "Posted", "redact_url"]

log = logging.getLogger("memsync.http")

MAX_REDIRECTS = 5
MEMORY_CAP = 4 * 1024 * 1024  # bodies kept in memory (manifests) never exceed this
CHUNK = 64 * 1024
BACKOFF_BASE = 0.2
BACKOFF_CAP = 5.0
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_RANDOM = secrets.SystemRandom()


_TRANSIENT = frozenset({"timeout", "truncated", "rate-limited", "server", "connection"})


class HttpError(MemsyncError):
    """A request failed; `url` is redacted, `transient` says whether a retry may help."""

    def __init__(
        self,
        kind: ErrorKind,
        url: str,
        detail: str,
        status: int | None = None,
        *,
        method: str = "GET",
        transient: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(f"{method} {url}: {detail}")
        self.kind = kind
        self.detail = detail  # the reason alone, without the method and URL
        self.method = method
        self.url = url
        self.status = status
        self.transient = kind in _TRANSIENT if transient is None else transient
        self.retry_after = retry_after
        self.attempts = 1  # how many requests were made before this failure was final


@dataclass(frozen=True)
class Fetched:
    """A completed request: `200` with what was written, or `304` (nothing written)."""

    status: int
    etag: str | None
    length: int
    sha256: str | None
    path: Path | None = None
    body: bytes | None = None


@dataclass(frozen=True)
class Posted:
    """A POST's last answer (`status`, `body`) and how many attempts it took."""

    status: int
    body: bytes
    attempts: int


def redact_url(url: str | URL) -> str:
    """`url` without user-info, query values or fragment: safe for messages and logs."""
    parsed = URL(url) if isinstance(url, str) else url
    if not parsed.absolute:
        return "<relative url>"
    clean = parsed.with_user(None).with_query(None).with_fragment(None)
    return str(clean) + ("?…" if parsed.query_string else "")


def _origin(url: URL) -> tuple[str, str, int | None]:
    return (url.scheme, (url.host or "").lower(), url.port)


def _retry_after(value: str | None, now_wall: float) -> float | None:
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    with contextlib.suppress(TypeError, ValueError, IndexError):
        return max(0.0, email.utils.parsedate_to_datetime(value).timestamp() - now_wall)
    return None


@dataclass(kw_only=True, eq=False)
class HttpClient:
    """`async with HttpClient() as client:` one session for every request of a daemon run."""

    allow_http: bool = False  # plain http to non-loopback hosts (loopback is always allowed)
    user_agent: str = "memsync"
    connect_timeout: float = 10.0
    _session: aiohttp.ClientSession | None = field(default=None, init=False, repr=False)

    async def __aenter__(self) -> HttpClient:
        self._session = aiohttp.ClientSession(
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout),
            headers={hdrs.USER_AGENT: self.user_agent, hdrs.ACCEPT_ENCODING: "identity"},
            cookie_jar=aiohttp.DummyCookieJar(),  # nothing carried from one origin to another
            auto_decompress=False,
            trust_env=False,  # no .netrc credentials, no proxies from the environment
        )
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def under(self, *, allow_http: bool) -> HttpClient:
        """This box's open session under another http-vs-https choice: one connection pool
        for every view of a pull, each view's own `allow_http`. Closed with this box."""
        other = HttpClient(
            allow_http=allow_http, user_agent=self.user_agent, connect_timeout=self.connect_timeout
        )
        other._session = self._open()
        return other

    def check_url(
        self,
        url: URL,
        previous: URL | None = None,
        *,
        method: str = "GET",
        token: bool = False,
    ) -> None:
        """Refuse, before any I/O, a URL (or a redirect target) we must not request (with a
        token when `token`): the one rule of `hubrule.url_problem`."""
        problem = url_problem(
            str(url),
            token=token,
            allow_http=self.allow_http,
            previous=None if previous is None else str(previous),
        )
        if problem is not None:
            raise HttpError(ErrorKind.REFUSED, redact_url(url), problem, method=method)

    async def get(
        self,
        url: str,
        *,
        dest: Path | None,
        token: str | None,
        etag: str | None,
        max_bytes: int,
        deadline: float,
        expected_length: int | None = None,
        on_bytes: Callable[[int], None] | None = None,
    ) -> Fetched:
        """GET `url` into `dest` (or memory when None), conditional on `etag`, by `deadline`.
        `on_bytes` is told how many bytes of the body arrived so far, after each chunk."""
        start = _parse(url)
        self.check_url(start, token=token is not None)
        where = redact_url(start)
        cap = max_bytes if dest is not None else min(max_bytes, MEMORY_CAP)
        if expected_length is not None:
            if expected_length > cap:
                raise HttpError(ErrorKind.TOO_LARGE, where, f"declared {expected_length} > {cap}")
            cap = expected_length
        if asyncio.get_running_loop().time() >= deadline:
            raise HttpError(ErrorKind.TIMEOUT, where, "no time left before the deadline")
        try:
            async with asyncio.timeout_at(deadline):
                fetched, sink = await self._follow(
                    start, dest, token, etag, cap, expected_length, on_bytes
                )
        except TimeoutError as exc:
            raise HttpError(ErrorKind.TIMEOUT, where, "deadline passed") from exc
        if sink is not None:
            # Outside the deadline's reach: once the rename happens, the request succeeded.
            try:
                sink.commit()
            except BaseException:
                sink.discard()
                raise
        return fetched

    async def get_with_retry(
        self,
        url: str,
        *,
        dest: Path | None,
        token: str | None,
        etag: str | None,
        max_bytes: int,
        deadline: float,
        expected_length: int | None = None,
        attempts: int = 4,
        on_bytes: Callable[[int], None] | None = None,
    ) -> Fetched:
        """`get`, retrying transient failures with full-jitter backoff while time remains.

        A `Retry-After` longer than the time left ends the retries at once.
        """
        loop = asyncio.get_running_loop()
        for attempt in range(attempts):
            try:
                return await self.get(
                    url,
                    dest=dest,
                    token=token,
                    etag=etag,
                    max_bytes=max_bytes,
                    deadline=deadline,
                    expected_length=expected_length,
                    on_bytes=on_bytes,
                )
            except HttpError as exc:
                delay = _RANDOM.uniform(0, min(BACKOFF_CAP, BACKOFF_BASE * 2**attempt))
                delay = max(delay, exc.retry_after or 0.0)
                if not exc.transient or attempt + 1 >= attempts or loop.time() + delay >= deadline:
                    raise
                # DEBUG: a retry is not news; the verdict is (a view's status transition).
                log.debug("retrying %s in %.2fs after %s", exc.url, delay, exc.kind)
                await asyncio.sleep(delay)
        raise InternalError("internal: get_with_retry made no attempt")

    async def post_form(
        self,
        url: str,
        *,
        fields: Mapping[str, tuple[bytes, str]],
        token: str | None,
        deadline: float,
        max_response: int = 1024 * 1024,
    ) -> tuple[int, bytes]:
        """POST a multipart form (name -> (bytes, content type)); (status, response body).

        Never follows redirects (a publish must reach the hub it names) and never retries:
        the hub makes a repeated upload of the same revision idempotent, the caller decides.
        """
        form = aiohttp.FormData()
        for name, (data, content_type) in fields.items():
            form.add_field(name, data, filename=name, content_type=content_type)
        return await self._post(url, form, token, deadline, max_response)

    async def post_json(
        self,
        url: str,
        *,
        document: Mapping[str, object],
        token: str | None,
        deadline: float,
        max_response: int = 64 * 1024,
        headers: Mapping[str, str] | None = None,
        refuse_larger: bool = False,
    ) -> tuple[int, bytes]:
        """POST a JSON document; (status, response body). Like `post_form`: no redirect is
        followed, nothing is retried. The answer is read up to `max_response` bytes: the
        rest is left unread, or, with `refuse_larger`, a `too-large` error (with the status)
        as soon as the answer declares or sends more. `headers` must be printable ASCII."""
        body = aiohttp.JsonPayload(dict(document))
        return await self._post(
            url, body, token, deadline, max_response, headers or {}, refuse_larger
        )

    async def post_json_retrying(
        self,
        url: str,
        *,
        document: Mapping[str, object],
        token: str | None,
        deadline: float,
        attempts: int,
        backoff: float,
    ) -> Posted:
        """`post_json`, tried up to `attempts` times while a failure may pass (a transient
        error, a 5xx, a 429): `backoff` seconds before the second attempt, doubled each
        time, with jitter (x0.5 to x1.5); never a wait that ends past `deadline`. For a
        receiver that takes the same document twice (a webhook): the final answer, or the
        final error with its `attempts`."""
        loop = asyncio.get_running_loop()
        for attempt in range(1, attempts + 1):
            try:
                status, body = await self.post_json(
                    url, document=document, token=token, deadline=deadline
                )
            except HttpError as exc:
                exc.attempts = attempt
                if not exc.transient or not await _wait(loop, attempt, attempts, backoff, deadline):
                    raise
                continue
            passing = status >= 500 or status == 429
            if not passing or not await _wait(loop, attempt, attempts, backoff, deadline):
                return Posted(status, body, attempt)
        raise InternalError("internal: post_json_retrying made no attempt")

    async def _post(
        self,
        url: str,
        data: object,
        token: str | None,
        deadline: float,
        max_response: int,
        headers: Mapping[str, str] | None = None,
        refuse_larger: bool = False,
    ) -> tuple[int, bytes]:
        session = self._open()
        post = "POST"
        target = _parse(url, method=post)
        self.check_url(target, method=post, token=token is not None)
        where = redact_url(target)
        sent = _with_headers(_bearer(token, where, method=post), headers or {}, where, post)
        try:
            async with asyncio.timeout_at(deadline):
                async with session.post(
                    target, data=data, headers=sent, allow_redirects=False, ssl=_tls(target)
                ) as resp:
                    if not refuse_larger:
                        return resp.status, await resp.content.read(max_response)
                    return resp.status, await _read_capped(resp, where, max_response, post)
        except TimeoutError as exc:
            raise HttpError(ErrorKind.TIMEOUT, where, "deadline passed", method=post) from exc
        except aiohttp.ClientError as exc:
            raise _client_error(where, exc, method=post) from exc

    @contextlib.asynccontextmanager
    async def stream(
        self,
        url: str,
        *,
        token: str | None,
        headers: Mapping[str, str],
        read_timeout: float,
    ) -> AsyncIterator[aiohttp.StreamReader]:
        """GET a long-lived stream (a hub's Server-Sent Events) and yield its body.

        The URL rule and the token rule as for every request; no redirect is followed (a
        redirect is an error, so the token never reaches another URL); `headers` must be
        printable ASCII; the body is taken only as served: `Accept-Encoding: identity`, and
        an answer with any other `Content-Encoding` is refused (nothing decompresses a
        hub's stream, so its bytes on the wire are all the bytes there are). Errors while
        reading the body in the `async with` come out as `HttpError`s too.
        """
        session = self._open()
        start = _parse(url)
        self.check_url(start, token=token is not None)
        where = redact_url(start)
        sent = _with_headers(_bearer(token, where), headers, where)
        sent[hdrs.ACCEPT_ENCODING] = "identity"
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.connect_timeout, sock_read=read_timeout
        )
        try:
            async with session.get(
                start, headers=sent, allow_redirects=False, timeout=timeout, ssl=_tls(start)
            ) as resp:
                if resp.status != 200:
                    raise _status_error(resp.status, where, resp.headers.get(hdrs.RETRY_AFTER))
                encoding = resp.headers.get(hdrs.CONTENT_ENCODING, "").strip().lower()
                if encoding not in ("", "identity"):
                    detail = f"a compressed stream is refused (Content-Encoding {encoding[:20]})"
                    raise HttpError(ErrorKind.PROTOCOL, where, detail, 200)
                yield resp.content
        except aiohttp.ClientError as exc:
            raise _client_error(where, exc) from exc

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:
            raise InternalError("internal: HttpClient used outside `async with`")
        return self._session

    async def _follow(
        self,
        start: URL,
        dest: Path | None,
        token: str | None,
        etag: str | None,
        cap: int,
        expected: int | None,
        on_bytes: Callable[[int], None] | None = None,
    ) -> tuple[Fetched, _Sink | None]:
        session = self._open()
        current, previous = start, None
        with_token = token is not None
        for _ in range(MAX_REDIRECTS + 1):
            # Once a redirect leaves the original origin the token is never sent again.
            with_token = with_token and _origin(current) == _origin(start)
            self.check_url(current, previous, token=with_token)
            where = redact_url(current)
            headers = _bearer(token if with_token else None, where)
            if etag:
                headers[hdrs.IF_NONE_MATCH] = etag
            try:
                async with session.get(
                    current, headers=headers, allow_redirects=False, ssl=_tls(current)
                ) as resp:
                    log.debug("GET %s -> %d", where, resp.status)
                    location = resp.headers.get(hdrs.LOCATION)
                    if resp.status not in _REDIRECTS or not location:
                        try:
                            return await self._answer(
                                resp, where, dest, etag, cap, expected, on_bytes
                            )
                        except BaseException:
                            resp.close()  # never hand a half-read connection back to the pool
                            raise
                    resp.close()
            except aiohttp.ClientError as exc:
                raise _client_error(where, exc) from exc
            try:
                previous, current = current, current.join(URL(location))
            except ValueError as exc:
                raise HttpError(ErrorKind.PROTOCOL, where, "unusable redirect target") from exc
        raise HttpError(ErrorKind.REFUSED, redact_url(start), f"over {MAX_REDIRECTS} redirects")

    async def _answer(
        self,
        resp: aiohttp.ClientResponse,
        where: str,
        dest: Path | None,
        etag: str | None,
        cap: int,
        expected: int | None,
        on_bytes: Callable[[int], None] | None = None,
    ) -> tuple[Fetched, _Sink | None]:
        status = resp.status
        if status == 304 and etag:
            return Fetched(304, resp.headers.get(hdrs.ETAG, etag), 0, None), None
        if status != 200:
            raise _status_error(status, where, resp.headers.get(hdrs.RETRY_AFTER))
        declared = resp.content_length
        if declared is not None and declared > cap:
            raise HttpError(ErrorKind.TOO_LARGE, where, f"Content-Length {declared} > {cap}", 200)
        if declared is not None and expected is not None and declared < expected:
            detail = f"Content-Length {declared}, expected {expected}"
            raise HttpError(ErrorKind.TRUNCATED, where, detail, 200)
        sink = _Sink(dest, where)
        try:
            async for chunk in resp.content.iter_chunked(CHUNK):
                if sink.size + len(chunk) > cap:
                    raise HttpError(ErrorKind.TOO_LARGE, where, f"body over {cap} bytes", 200)
                sink.write(chunk)
                if on_bytes is not None:
                    on_bytes(sink.size)
            if expected is not None and sink.size < expected:
                detail = f"body has {sink.size} bytes, expected {expected}"
                raise HttpError(ErrorKind.TRUNCATED, where, detail, 200)
            await sink.finish()
        except BaseException:
            sink.discard()
            raise
        etag_out = resp.headers.get(hdrs.ETAG)
        fetched = Fetched(200, etag_out, sink.size, sink.hexdigest, dest, sink.body())
        return fetched, sink if dest is not None else None


async def _wait(
    loop: asyncio.AbstractEventLoop, attempt: int, attempts: int, backoff: float, deadline: float
) -> bool:
    """Sleep before attempt `attempt + 1`; False (no sleep) when there is none to make."""
    wait = backoff * 2 ** (attempt - 1) * _RANDOM.uniform(0.5, 1.5)
    if attempt >= attempts or loop.time() + wait >= deadline:
        return False
    await asyncio.sleep(wait)
    return True


class _Sink:
    """Where a body goes: memory, or a temp file next to `dest` renamed over it at the end.

    Local OSErrors become `storage` HttpErrors; `discard` leaves no temp file behind.
    """

    def __init__(self, dest: Path | None, where: str) -> None:
        self.where, self.dest, self.size = where, dest, 0
        self._digest = hashlib.sha256()
        self._file: IO[bytes] = io.BytesIO()
        self._tmp: Path | None = None
        self._handed_off = False  # a worker thread owns (and closes) the file
        if dest is not None:
            with self._local():
                fd, name = tempfile.mkstemp(
                    prefix=f".{dest.name}.", suffix=".part", dir=dest.parent
                )
                self._tmp, self._file = Path(name), os.fdopen(fd, "wb")

    @property
    def hexdigest(self) -> str:
        return self._digest.hexdigest()

    def body(self) -> bytes | None:
        return self._file.getvalue() if isinstance(self._file, io.BytesIO) else None

    @contextlib.contextmanager
    def _local(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            detail = f"cannot write the download ({exc.strerror or type(exc).__name__})"
            raise HttpError(ErrorKind.STORAGE, self.where, detail) from exc

    def write(self, chunk: bytes) -> None:
        self.size += len(chunk)
        self._digest.update(chunk)
        with self._local():
            self._file.write(chunk)

    async def finish(self) -> None:
        """Flush and fsync the temp file in a thread (which closes it too)."""
        if self._tmp is not None:
            self._handed_off = True
            with self._local():
                await asyncio.to_thread(_flush_close, self._file)

    def commit(self) -> None:
        """Rename the complete temp file over `dest`, then make the rename durable."""
        if self._tmp is None or self.dest is None:
            return
        with self._local():
            self._tmp.replace(self.dest)
            self._tmp = None
            fsync_dir(self.dest.parent)

    def discard(self) -> None:
        if not self._handed_off:
            self._file.close()
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)


def _flush_close(handle: IO[bytes]) -> None:
    with handle:
        handle.flush()
        os.fsync(handle.fileno())


# A header value memsync sends: printable ASCII (no control character, no line break).
_HEADER_VALUE = re.compile(r"[\x20-\x7e]{0,8192}")


def _tls(url: URL) -> ssl.SSLContext | bool:
    """What a request to `url` verifies its peer with: the system's trust store for https
    (`_verified`); nothing to verify for plain http (aiohttp's default, never consulted)."""
    return _verified() if url.scheme == "https" else True


@functools.cache
def _verified() -> ssl.SSLContext:
    """The context every https request verifies with, built once, on the first one: the
    system's CA certificates, hostname checked, http/1.1 offered (as aiohttp's own)."""
    import ssl  # noqa: PLC0415 - aiohttp loaded it already

    context = ssl.create_default_context()
    context.set_alpn_protocols(("http/1.1",))
    return context


def _parse(url: str, *, method: str = "GET") -> URL:
    try:
        return URL(url)
    except ValueError as exc:
        raise HttpError(
            ErrorKind.REFUSED, "<invalid url>", "not a valid URL", method=method
        ) from exc


def _bearer(token: str | None, where: str, *, method: str = "GET") -> dict[str, str]:
    """The `Authorization` header for `token` (none for None); a token a header cannot
    carry is refused here too, whatever resolved it (never quoting it)."""
    if not token:
        return {}
    if not _HEADER_VALUE.fullmatch(token) or " " in token:
        detail = "the token holds a character a header cannot carry"
        raise HttpError(ErrorKind.REFUSED, where, detail, method=method)
    return {hdrs.AUTHORIZATION: f"Bearer {token}"}


def _with_headers(
    sent: dict[str, str], headers: Mapping[str, str], where: str, method: str = "GET"
) -> dict[str, str]:
    """`sent` plus `headers`, each value printable ASCII (refused otherwise, unquoted)."""
    for name, value in headers.items():
        if not _HEADER_VALUE.fullmatch(value):
            raise HttpError(ErrorKind.REFUSED, where, f"unsafe {name} header value", method=method)
        sent[name] = value
    return sent


async def _read_capped(resp: aiohttp.ClientResponse, where: str, cap: int, method: str) -> bytes:
    """The whole answer, or `too-large` (with the status) once it declares or sends more
    than `cap` bytes: reading stops there, not at the deadline."""
    declared = resp.content_length
    if declared is not None and declared > cap:
        detail = f"answered {declared} bytes (cap {cap})"
        raise HttpError(ErrorKind.TOO_LARGE, where, detail, resp.status, method=method)
    received = bytearray()
    async for chunk in resp.content.iter_any():
        received += chunk
        if len(received) > cap:
            detail = f"answered over {cap} bytes"
            raise HttpError(ErrorKind.TOO_LARGE, where, detail, resp.status, method=method)
    return bytes(received)


def _status_error(status: int, where: str, retry_after: str | None) -> HttpError:
    if status == 429:
        wait = _retry_after(retry_after, time.time())
        return HttpError(ErrorKind.RATE_LIMITED, where, "rate limited", status, retry_after=wait)
    kinds = {401: ErrorKind.UNAUTHORIZED, 403: ErrorKind.FORBIDDEN, 404: ErrorKind.NOT_FOUND}
    kind = ErrorKind.SERVER if status >= 500 else kinds.get(status, ErrorKind.PROTOCOL)
    return HttpError(kind, where, f"HTTP {status}", status)


def _client_error(where: str, exc: aiohttp.ClientError, *, method: str = "GET") -> HttpError:
    """aiohttp's error as ours; never its text, which may carry the full URL."""
    name = type(exc).__name__
    if isinstance(exc, TimeoutError):
        kind, detail = ErrorKind.TIMEOUT, f"timed out ({name})"
    elif isinstance(exc, aiohttp.ClientSSLError | aiohttp.ServerFingerprintMismatch):
        kind, detail = ErrorKind.REFUSED, f"TLS failed ({name})"
    elif isinstance(exc, aiohttp.ClientPayloadError):  # the connection broke mid-body
        kind, detail = ErrorKind.TRUNCATED, f"body cut short ({name})"
    elif isinstance(exc, aiohttp.ClientConnectionError):
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else name
        kind, detail = ErrorKind.CONNECTION, f"connection failed ({reason})"
    else:
        kind, detail = ErrorKind.PROTOCOL, f"malformed response ({name})"
    return HttpError(kind, where, detail, method=method)
