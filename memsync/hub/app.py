"""The hub's HTTP side: an aiohttp application serving signed view revisions and events.

Endpoints, statuses and bodies are CONTRACT §5. Reads are answered from memory (current
manifests and ETags) or with sendfile (packages) after one cached token lookup; nothing is
written on a read but `last_used_at`, at most once a minute per token and off the event
loop. Uploads are read under a byte cap (`upload.py`; the rest of a body over the cap is
never read: the 413 goes out and the connection is closed), checked with the consumers' own
check and stored immutably (`state.py`). Tokens are accepted only in the `Authorization`
header, and the access log redacts anything token-like in a URL.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import IO, Any

from aiohttp import hdrs, web
from aiohttp.abc import AbstractAccessLogger, AbstractStreamWriter
from prometheus_client import CONTENT_TYPE_LATEST

from memsync import timefmt
from memsync.errors import UsageError
from memsync.hub.errors import ApiError
from memsync.hub.events import Subscriber
from memsync.hub.fastlane import LANES, FastSite, close_lanes, matches
from memsync.hub.guard import Gate, HeadGuard, Limits
from memsync.hub.metrics import UNMATCHED, HubMetrics
from memsync.hub.peers import Peers
from memsync.hub.revisions import (
    Revision,
    RevisionConflict,
    RevisionExists,
    UploadRefused,
    check_upload,
)
from memsync.hub.state import HubState, PackageCheck
from memsync.hub.tokens import TokenInfo, redact
from memsync.hub.upload import receive_upload
from memsync.names import is_name
from memsync.validators.problems import Problem
from memsync.wire import hubanswers as answers

log = logging.getLogger("memsync.hub")
access_log = logging.getLogger("memsync.hub.access")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_NOTIFY = 4096
IMMUTABLE = "public, max-age=31536000, immutable"
_SHOWN = frozenset({"root", "view"})  # query keys whose (valid) values the access log shows
_AUTH_MESSAGES = {
    "missing": "this endpoint needs `Authorization: Bearer msk_…`",
    "malformed": "the bearer token is not of the form msk_<id>_<secret>",
    "unknown": "the bearer token is not known to this hub",
    "expired": "the bearer token has expired; ask for a new one",
    "revoked": "the bearer token has been revoked",
    "in-url": "send the token in the Authorization header, never in the URL",
}


def _json(body: bytes, status: int = 200) -> web.Response:
    """An answer whose body is a document of `wire.hub` (written by `wire.hubanswers`)."""
    return web.Response(body=body, status=status, content_type="application/json")


def _error(status: int, code: str, message: str, problems: Sequence[Problem] = ()) -> web.Response:
    return _json(answers.error_body(code, message, problems), status)


def _not_found(what: str = "no such view") -> ApiError:
    return ApiError(404, "not-found", what)


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """JSON errors everywhere: ours, aiohttp's (404, 405, 413…), and unexpected ones (500)."""
    try:
        return await handler(request)
    except ApiError as exc:
        response = _error(exc.status, exc.code, exc.message, exc.problems)
        response.headers.update(exc.headers)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        codes = {404: "not-found", 405: "method-not-allowed", 413: "too-large"}
        response = _error(exc.status, codes.get(exc.status, "bad-request"), exc.reason)
        if hdrs.ALLOW in exc.headers:
            response.headers[hdrs.ALLOW] = exc.headers[hdrs.ALLOW]
    except ConnectionError:  # the client went away: nobody to answer
        raise
    except Exception:
        log.exception("internal error on %s %s", request.method, _loggable(request))
        response = _error(500, "internal", "internal error; see the hub's log")
    if response.status == 413:
        response.force_close()  # do not read the rest of an oversized body
    return response


def _loggable(request: web.BaseRequest) -> str:
    """The path and query with token-like text redacted; unknown query values hidden."""
    if not request.query_string:
        return redact(request.path)
    shown = [
        f"{redact(key)}={redact(value) if key in _SHOWN and is_name(value) else 'REDACTED'}"
        for key, value in request.query.items()
    ]
    return f"{redact(request.path)}?{'&'.join(shown)}"


def _route(request: web.BaseRequest) -> str:
    """The template of the route that answered (`/v1/views/{id}/manifest`), never the raw
    path; `unmatched` for a path no route knows or a request aiohttp refused unrouted."""
    try:
        info = request.match_info  # type: ignore[attr-defined]
    except (AttributeError, AssertionError):  # a BaseRequest, or one refused before routing
        return UNMATCHED
    resource = info.route.resource if info is not None else None
    return resource.canonical if resource is not None else UNMATCHED


class HubAccessLogger(AbstractAccessLogger):
    """One line per request; never the Authorization header, never a token in the URL.
    Every request is counted in `metrics` (set by `hub_runner`), logged or not."""

    metrics: HubMetrics | None = None

    def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
        if self.metrics is not None:
            sent = response.body_length + getattr(response, "sendfile_bytes", 0)
            self.metrics.request(_route(request), response.status, sent)
        self.logger.info(
            '%s "%s %s" %d %d %.1fms',
            request.remote,
            request.method,
            _loggable(request),
            response.status,
            response.body_length,
            time * 1000,
        )


HUB = web.AppKey("memsync.hub", HubState)
GATE = web.AppKey("memsync.hub.gate", Gate)


def _authorize(request: web.Request) -> TokenInfo:
    """The request's token, or 401 (missing, malformed, unknown, expired, revoked, in URL)."""
    hub = request.app[HUB]
    keys = request.query.keys() if request.query_string else ()
    found = hub.authenticate(request.headers.get(hdrs.AUTHORIZATION), request.query_string, keys)
    if isinstance(found, TokenInfo):
        return found
    hub.metrics.token_failure(found)
    code = f"token-{found}" if found == "in-url" else f"{found}-token"
    hub.note_refusal(request.remote or "-", code, redact(request.path))
    challenge = 'Bearer realm="memsync-hub"'
    if found != "missing":
        challenge += ', error="invalid_token"'
    headers: dict[str, str] = {hdrs.WWW_AUTHENTICATE: challenge}
    raise ApiError(401, code, _AUTH_MESSAGES[found], headers=headers)


def _readable(request: web.Request, token: TokenInfo, view_id: str) -> Revision:
    """The current revision of a view the token may read; 404 alike for absent and hidden."""
    hub = request.app[HUB]
    current = hub.fresh().current(view_id) if token.may_read(view_id) else None
    if current is None:
        raise _not_found()
    return current


# -- reads ----------------------------------------------------------------------------------


def _not_modified(etag: str, cache: str) -> web.Response:
    return web.Response(status=304, headers={hdrs.ETAG: etag, hdrs.CACHE_CONTROL: cache})


def _manifest_response(request: web.Request, rev: Revision, cache: str) -> web.Response:
    if matches(request.headers.get(hdrs.IF_NONE_MATCH), rev.manifest_etag):
        return _not_modified(rev.manifest_etag, cache)
    headers = {hdrs.ETAG: rev.manifest_etag, hdrs.CACHE_CONTROL: cache}
    return web.Response(body=rev.manifest, content_type="application/json", headers=headers)


class _StoredFile(web.FileResponse):
    """A FileResponse (sendfile) whose ETag is the content hash, not aiohttp's mtime-size,
    and which knows the bytes it handed to sendfile (`body_length` counts only what went
    through aiohttp's writer: the head, or everything when aiohttp fell back to writes)."""

    def __init__(self, path: Path, etag: str, cache: str) -> None:
        super().__init__(
            path, headers={hdrs.CONTENT_TYPE: "application/zip", hdrs.CACHE_CONTROL: cache}
        )
        self._content_etag = etag
        self.sendfile_bytes = 0

    async def _sendfile(
        self, request: web.BaseRequest, fobj: IO[Any], offset: int, count: int
    ) -> AbstractStreamWriter:
        self.sendfile_bytes = count
        return await super()._sendfile(request, fobj, offset, count)

    async def _sendfile_fallback(
        self, writer: AbstractStreamWriter, fobj: IO[Any], offset: int, count: int
    ) -> AbstractStreamWriter:
        self.sendfile_bytes = 0  # written through the writer: in `body_length` already
        return await super()._sendfile_fallback(writer, fobj, offset, count)

    @property
    def etag(self) -> Any:
        return super().etag

    @etag.setter
    def etag(self, value: Any) -> None:
        self._headers[hdrs.ETAG] = self._content_etag


def _package_response(request: web.Request, rev: Revision, cache: str) -> web.StreamResponse:
    if matches(request.headers.get(hdrs.IF_NONE_MATCH), rev.package_etag):
        return _not_modified(rev.package_etag, cache)
    return _StoredFile(rev.package_path, rev.package_etag, cache)


async def health(request: web.Request) -> web.Response:
    return _json(answers.HEALTH)


async def metrics(request: web.Request) -> web.Response:
    """The hub's totals in the Prometheus text format, for a token with scope `metrics` or
    `admin` (the page names every view)."""
    hub = request.app[HUB]
    if not _authorize(request).may_scrape():
        raise ApiError(403, "forbidden", "the hub's metrics need a token with scope metrics")
    views = [(rev.view_id, rev.revision) for rev in hub.fresh().all_current()]
    body = await asyncio.to_thread(hub.metrics.exposition, views)
    return web.Response(body=body, headers={hdrs.CONTENT_TYPE: CONTENT_TYPE_LATEST})


async def list_views(request: web.Request) -> web.Response:
    token = _authorize(request)
    current = request.app[HUB].fresh().all_current()
    entries = [rev.document() for rev in current if token.may_read(rev.view_id)]
    return _json(answers.view_list(entries))


async def current_manifest(request: web.Request) -> web.Response:
    rev = _readable(request, _authorize(request), request.match_info["id"])
    return _manifest_response(request, rev, "no-cache")


async def current_package(request: web.Request) -> web.StreamResponse:
    rev = _readable(request, _authorize(request), request.match_info["id"])
    return _package_response(request, rev, "no-cache")


def _stored_revision(request: web.Request) -> Revision:
    hub = request.app[HUB]
    view_id, number = request.match_info["id"], request.match_info["n"]
    _readable(request, _authorize(request), view_id)
    found = hub.revisions.revision(view_id, int(number)) if number == str(int(number)) else None
    if found is None:
        raise _not_found("no such revision")
    return found


async def revision_manifest(request: web.Request) -> web.Response:
    return _manifest_response(request, _stored_revision(request), IMMUTABLE)


async def revision_package(request: web.Request) -> web.StreamResponse:
    return _package_response(request, _stored_revision(request), IMMUTABLE)


async def events(request: web.Request) -> web.StreamResponse:
    """Server-Sent Events until the client leaves, the token stops working, or shutdown."""
    hub = request.app[HUB]
    token = _authorize(request)
    roots, views = request.query.getall("root", []), request.query.getall("view", [])
    if not all(is_name(name) for name in (*roots, *views)):
        raise ApiError(400, "bad-request", "root and view filters must be valid names")
    for root in roots:  # roots hold nothing to hide: say so rather than stay silent forever
        if not token.may_watch(root):
            raise ApiError(403, "forbidden", f"this token may not receive events of root {root}")
    if not hub.streams.open(token.id):
        cap = hub.streams.cap
        raise ApiError(
            429,
            "too-many-streams",
            f"this token already holds {cap} event streams, the most allowed "
            "(hub.max_streams_per_token); close one first",
            headers={hdrs.RETRY_AFTER: str(round(hub.heartbeat) + 1)},
        )
    try:
        return await _stream(request, hub, Subscriber(token, frozenset(roots), frozenset(views)))
    finally:
        hub.streams.close(token.id)


async def _stream(
    request: web.Request, hub: HubState, subscriber: Subscriber
) -> web.StreamResponse:
    response = web.StreamResponse(
        headers={
            hdrs.CONTENT_TYPE: "text/event-stream",
            hdrs.CACHE_CONTROL: "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    token = subscriber.token
    loop = asyncio.get_running_loop()
    hub.events.subscribers.add(subscriber)
    if isinstance(request.protocol, HeadGuard):  # a client that leaves ends its stream now
        request.protocol.on_lost.append(subscriber.close)
    hub.metrics.streams.inc()
    try:
        await response.prepare(request)
        await response.write(b"retry: 5000\n\n")
        next_ping = loop.time() + hub.heartbeat
        while True:
            try:
                timeout = max(0.0, next_ping - loop.time())
                item = await asyncio.wait_for(subscriber.queue.get(), timeout)
            except TimeoutError:
                item, next_ping = ("", b""), loop.time() + hub.heartbeat
            if item is None or hub.tokens.active(token.id) is None:
                break
            kind, data = item
            await response.write(
                b"event: %s\ndata: %s\n\n" % (kind.encode(), data) if kind else b": ping\n\n"
            )
    except ConnectionError:  # the client went away
        pass
    finally:
        hub.events.subscribers.discard(subscriber)
        hub.metrics.streams.dec()
    return response


# -- writes ---------------------------------------------------------------------------------


async def notify(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    token = _authorize(request)
    root = request.match_info["name"]
    if not is_name(root):
        raise _not_found("no such root")
    if not token.may_notify(root):
        raise ApiError(403, "forbidden", f"this token may not notify root {root}")
    too_large = ApiError(413, "too-large", f"a notify body is at most {MAX_NOTIFY} bytes")
    if request.content_length is not None and request.content_length > MAX_NOTIFY:
        raise too_large
    body = b""
    while chunk := await request.content.read(MAX_NOTIFY):  # `read` may return less
        body += chunk
        if len(body) > MAX_NOTIFY:
            raise too_large
    commit = answers.notify_commit(body)
    if commit is None:
        raise ApiError(400, "bad-request", 'expected {"commit": "<40 or 64 hex digits>"}')
    hub.upstream(root, commit)
    hub.audit(token, request.remote, "root.notify", root, commit)
    return _json(answers.notify_accepted(root, commit), 202)


async def publish(request: web.Request) -> web.Response:
    hub = request.app[HUB]
    token = _authorize(request)
    view_id = request.match_info["id"]
    if not is_name(view_id):
        raise _not_found()
    if not token.may_publish(view_id):
        _readable(request, token, view_id)  # 404 unless the token can see the view
        hub.metrics.upload(403)
        raise ApiError(403, "forbidden", f"this token may not publish view {view_id}")
    hub.uploading()
    fd, path = hub.revisions.new_upload()
    try:
        with os.fdopen(fd, "wb") as out:
            manifest, length, sha256 = await receive_upload(request, hub.max_upload, out)
        response = await _publish(hub, view_id, manifest, path, length, sha256)
    except ApiError as exc:
        hub.metrics.upload(exc.status)
        hub.audit(token, request.remote, "view.publish", view_id, f"{exc.status} {exc.code}")
        raise
    finally:
        path.unlink(missing_ok=True)
    hub.metrics.upload(response.status)
    hub.audit(token, request.remote, "view.publish", view_id, str(response.status))
    return response


async def _publish(
    hub: HubState, view_id: str, data: bytes, package: Path, length: int, sha256: str
) -> web.Response:
    try:
        manifest = check_upload(view_id, data, length, sha256, timefmt.now())
        signed = manifest.signed
        outcome = (view_id, signed.revision, signed.package.sha256)
        unchanged = answers.publish_result("unchanged", *outcome)
        retry = hub.fresh().judge(manifest) == "same"
        if not retry:
            problems = await asyncio.to_thread(hub.package_check, manifest, package, length, sha256)
            if problems:
                raise UploadRefused(problems, "the package fails the consumers' checks")
        async with hub.publication(view_id) as revisions:
            if revisions.judge(manifest) == "same":
                # A retry; if the first attempt stored the revision but failed before making
                # it current (an error after the rename, a cancelled handler), finish now.
                existing = revisions.revision(view_id, signed.revision)
                if existing is not None:
                    hub.adopt(existing)
                return _json(unchanged)
            stored = await asyncio.to_thread(revisions.store, manifest, data, package)
            hub.adopt(stored)
    except UploadRefused as exc:
        raise ApiError(422, exc.code, exc.message, problems=exc.problems) from exc
    except (RevisionConflict, RevisionExists) as exc:
        raise ApiError(409, getattr(exc, "code", "conflict"), exc.message) from exc
    log.info("view %s: published revision %d", view_id, signed.revision)
    return _json(answers.publish_result("created", *outcome), 201)


# -- application and server -----------------------------------------------------------------


def make_app(
    data_dir: Path,
    *,
    package_check: PackageCheck | None = None,
    max_upload: int = 12 * 1024 * 1024,
    heartbeat: float = 15.0,
    peers: Peers | None = None,
    limits: Limits | None = None,
) -> web.Application:
    """The hub application over an initialised data dir (`TokenError` if it is not one).

    Alone, it takes the data dir's lock and cleans up after a crash when it starts; as one
    of several workers (`peers`), the supervisor has done both (`workers.py`).
    """
    app = web.Application(middlewares=[_errors], client_max_size=max_upload)
    app[HUB] = HubState(data_dir, package_check, max_upload, heartbeat, peers, limits)
    app[GATE] = Gate(app[HUB].limits.connections(), app[HUB].metrics.connection_closed)
    app[LANES] = set()
    app.cleanup_ctx.append(_lifetime)
    app.on_shutdown.append(_close_streams)
    app.on_shutdown.append(close_lanes)
    add = app.router
    add.add_get("/v1/health", health)
    add.add_get("/metrics", metrics)
    add.add_get("/v1/views", list_views)
    add.add_get("/v1/views/{id}/manifest", current_manifest)
    add.add_get("/v1/views/{id}/package", current_package)
    add.add_post("/v1/views/{id}/revisions", publish)
    add.add_get("/v1/views/{id}/revisions/{n:[0-9]{1,19}}/manifest", revision_manifest)
    add.add_get("/v1/views/{id}/revisions/{n:[0-9]{1,19}}/package", revision_package)
    add.add_post("/v1/roots/{name}/notify", notify)
    add.add_get("/v1/events", events)
    return app


async def _lifetime(app: web.Application) -> AsyncIterator[None]:
    """One server per data dir (an flock), and a clean close: writes drained, DB closed."""
    hub = app[HUB]
    if hub.peers is not None:
        await asyncio.to_thread(hub.revisions.scan)
        hub.peers.listen(asyncio.get_running_loop(), hub.heard)
        try:
            yield
        finally:
            hub.peers.close(asyncio.get_running_loop())
            await hub.drain()
            hub.tokens.close()
        return
    try:
        fd = lock_data_dir(hub.data_dir)
    except UsageError:
        hub.tokens.close()
        raise
    try:
        await asyncio.to_thread(hub.revisions.load)
        await asyncio.to_thread(hub.tokens.prune_audit)
        yield
    finally:
        await hub.drain()
        hub.tokens.close()
        os.close(fd)


def lock_data_dir(data_dir: Path) -> int:
    """Hold the data dir's lock (one hub per data dir); the descriptor keeps it."""
    fd = os.open(data_dir / "hub.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise UsageError(f"another hub is already serving {data_dir}") from None
    return fd


async def _close_streams(app: web.Application) -> None:
    app[HUB].events.close_all()


def hub_site(runner: web.AppRunner, sock: socket.socket) -> FastSite:
    """A site serving `runner`'s hub on a bound socket, conditional GETs in the fast lane
    (`fastlane.py`); use it rather than a bare `TCPSite` or `SockSite`."""
    return FastSite(runner, sock, runner.app[HUB], runner.app[LANES], runner.app[GATE])


def hub_runner(app: web.Application) -> web.AppRunner:
    """A runner with the redacting access log; use it rather than a bare `AppRunner`.

    No lingering close: a request answered before its body is in (a 413 at the cap, a 401
    or 403 on an upload) gets its answer and then the connection is closed. aiohttp would
    otherwise read and discard the rest of the body for up to 10 s, however large it is.
    A connection waiting for its next request is closed after `hub.idle_timeout`.
    """

    class CountingAccessLogger(HubAccessLogger):
        pass

    CountingAccessLogger.metrics = app[HUB].metrics
    return web.AppRunner(
        app,
        keepalive_timeout=app[HUB].limits.idle_timeout,
        access_log_class=CountingAccessLogger,
        access_log=access_log,
        shutdown_timeout=5.0,
        lingering_time=0,
    )
