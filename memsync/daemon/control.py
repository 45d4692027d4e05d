"""The daemon's control socket: HTTP over a unix socket (mode 0600), CONTRACT §6.

`GET /v1/status`, `GET /v1/daemon` (only the status document's `daemon` block: who
runs, and which configuration file it serves), `POST /v1/sync` (answers after the cycles
finish, with exactly the `sync-now --json` document), `POST /v1/views/pull`,
`POST /v1/cycles/{prune|insight}` (`{"root", "force"}`: one maintenance turn, answered with
the `cycle --json` document), `POST /v1/pause` (`{"name", "kind", "until"}`) and
`POST /v1/resume` (`{"name", "kind"}`), answered with the `pause --json` document. Junk
requests get a JSON error and the daemon goes on; a client that disconnects mid-request
does not cancel the cycle it asked for (others may share it).

Where the socket may be (`claim`): in a directory only this user can write (`peer`), else a
configuration error naming the path. What stands at the path is removed only when it is
proven to be a stale socket of this user's (a socket, ours, and connecting is refused);
any other kind of file, a socket of another user, or one whose state cannot be told stops
the start-up with a configuration error, and the file is left as it was. Each request's
peer is checked (SO_PEERCRED): only this user and root get an answer.

Served by `daemon.server` (asyncio alone, no web framework at rest); request bodies are
read by `wire.requests` and answers are JSON documents (`wire.documents`), so an idle
daemon holds neither aiohttp nor pydantic (issue 18).
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import socket
import stat
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from memsync.daemon.client import SAFE_SOCKET_HINT
from memsync.daemon.listen import listen_error
from memsync.daemon.peer import peer_refusal, peer_uid, socket_directory_refusal
from memsync.daemon.server import Request, Response, Server, error
from memsync.errors import ConfigError, UsageError
from memsync.regularfile import kind_of
from memsync.wire.requests import CycleRequest, PullRequest, SyncRequest, read

if TYPE_CHECKING:  # pydantic loads when a pause or resume is asked for (issue 18)
    from memsync.wire.pause import PauseRequest, ResumeRequest

log = logging.getLogger(__name__)

__all__ = ["CycleRequest", "PullRequest", "SyncRequest"]

MAX_BODY = 64 * 1024
CYCLES = "/v1/cycles/"
T = TypeVar("T")


class Answer(Protocol):
    """What the controller answers with: a wire model, or `wire.documents.Answer`."""

    def model_dump_json(self, *, indent: int | None = None) -> str: ...


class Controller(Protocol):
    """What the control socket asks of the daemon (answers are JSON-ready)."""

    async def status(self) -> Answer: ...

    async def daemon(self) -> Answer: ...

    async def sync(self, request: SyncRequest) -> Answer: ...

    async def pull(self, request: PullRequest) -> Answer: ...

    async def cycle(self, kind: str, request: CycleRequest) -> Answer: ...

    async def pause(self, request: PauseRequest) -> Answer: ...

    async def resume(self, request: ResumeRequest) -> Answer: ...


class SocketInUse(UsageError):
    """Another daemon answers on the control socket."""


class SocketPlaceError(ConfigError):
    """`control.socket` names a place the daemon will not bind or clear."""


REFUSAL_LOG_EVERY = 60.0  # seconds between two log lines about refused peers

Route = Callable[[Request], Awaitable[Response]]


def control_handler(controller: Controller) -> Route:
    """Every request: the peer checked, then routed (404, 405 as a JSON error), a body
    larger than `MAX_BODY` refused (413), a handler's failure logged and answered 500."""

    async def status(request: Request) -> Response:
        return _json(await controller.status())

    async def daemon(request: Request) -> Response:
        return _json(await controller.daemon())

    def cycles(kind: str) -> Route:
        return _posted(lambda data: read(CycleRequest, data), lambda r: controller.cycle(kind, r))

    gets: dict[str, Route] = {"/v1/status": status, "/v1/daemon": daemon}
    posts: dict[str, Route] = {
        "/v1/sync": _posted(lambda data: read(SyncRequest, data), controller.sync),
        "/v1/views/pull": _posted(lambda data: read(PullRequest, data), controller.pull),
        "/v1/pause": _posted(_pause_request, controller.pause),
        "/v1/resume": _posted(_resume_request, controller.resume),
    }
    refused = _peers()

    async def handle(request: Request) -> Response:
        refusal = refused(request)
        if refusal is not None:
            return refusal
        path = request.path
        route: Route
        kind = path.removeprefix(CYCLES)
        if path.startswith(CYCLES) and kind and "/" not in kind:
            if request.method != "POST":
                return _not_allowed("POST")
            if kind not in ("prune", "insight"):
                return error(404, "not-found", f"no cycle {kind!r}: prune or insight")
            route = cycles(kind)
        elif path in gets:
            if request.method not in ("GET", "HEAD"):
                return _not_allowed("GET,HEAD")
            route = gets[path]
        elif path in posts:
            if request.method != "POST":
                return _not_allowed("POST")
            route = posts[path]
        else:
            return error(404, "http", "Not Found")
        if request.method == "POST" and request.body is None:
            return error(413, "http", "Request Entity Too Large")
        try:
            return await route(request)
        except Exception:
            log.exception("control request %s %s failed", request.method, path)
            return error(500, "internal", "the daemon failed to answer; see its log")

    return handle


def _not_allowed(allow: str) -> Response:
    refusal = error(405, "http", "Method Not Allowed")
    return Response(refusal.status, refusal.body, headers=(("Allow", allow),))


def _peers() -> Callable[[Request], Response | None]:
    """Refuse every request whose peer is neither this user nor root (logged at most once a
    minute: a refused peer could otherwise fill the journal)."""
    own = os.geteuid()
    logged = [-REFUSAL_LOG_EVERY]

    def check(request: Request) -> Response | None:
        sock = request.sock
        try:
            refusal = (
                peer_refusal(peer_uid(sock), own, serving=True)
                if sock is not None
                else "its peer cannot be identified"
            )
        except OSError as exc:
            refusal = f"its peer cannot be identified ({exc.strerror})"
        if refusal is None:
            return None
        now = time.monotonic()
        if now - logged[0] >= REFUSAL_LOG_EVERY:
            logged[0] = now
            log.warning("control socket: refused a request: %s", refusal)
        return error(403, "forbidden", f"this daemon answers only its own user: {refusal}")

    return check


def _json(answer: Answer) -> Response:
    return Response(200, answer.model_dump_json().encode())


def _posted(parse: Callable[[Any], T], call: Callable[[T], Awaitable[Answer]]) -> Route:
    """A POST handler: the body read by `parse`, `call` answered as JSON; a request the
    controller refuses is a 400 with its words."""

    async def handle(request: Request) -> Response:
        raw = request.body or b""
        try:
            data: Any = json.loads(raw) if raw.strip() else {}
            body = parse(data)
        except ValueError as exc:  # not JSON, or requests.BadRequest
            first = str(exc).splitlines()[0][:200]
            return error(400, "bad-request", f"not a valid request: {first}")
        try:
            return _json(await call(body))
        except UsageError as exc:
            return error(400, "usage", exc.message)

    return handle


def _pause_request(data: Any) -> PauseRequest:
    from memsync.wire.pause import PauseRequest  # noqa: PLC0415 - pydantic, when asked

    return PauseRequest.model_validate(data)


def _resume_request(data: Any) -> ResumeRequest:
    from memsync.wire.pause import ResumeRequest  # noqa: PLC0415 - pydantic, when asked

    return ResumeRequest.model_validate(data)


def claim(path: Path) -> Path:
    """Make `path` free for the daemon's socket, or raise: the real path to bind.

    The directory is created (0700) when missing and must be this user's alone. A stale
    socket of this user's is unlinked; nothing else ever is.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise SocketPlaceError(
            f"control.socket {path}: cannot create its directory: {exc.strerror}",
            hint=SAFE_SOCKET_HINT,
        ) from exc
    refusal = socket_directory_refusal(path)
    if refusal is not None:
        raise SocketPlaceError(
            f"control.socket {path}: the daemon will not listen there: {refusal}",
            hint=SAFE_SOCKET_HINT,
        )
    real = Path(os.path.realpath(path.parent)) / path.name
    try:
        info = os.lstat(real)
    except FileNotFoundError:
        return real
    except OSError as exc:
        raise SocketPlaceError(f"control.socket {path}: {exc.strerror}") from exc
    if not stat.S_ISSOCK(info.st_mode):
        raise SocketPlaceError(
            f"control.socket {path} is {kind_of(info.st_mode)}, not a socket; memsync "
            "removes only a stale socket of its own and leaves this one as it is",
            hint="move it away, or set control.socket to another path",
        )
    if info.st_uid != os.geteuid():
        raise SocketPlaceError(
            f"control.socket {path} is a socket of uid {info.st_uid}, not of this user; "
            "memsync leaves it as it is",
            hint="remove it as its owner, or set control.socket to another path",
        )
    probe = _connect(real)
    if probe is None:
        raise SocketInUse(
            f"another memsync daemon answers on {path}",
            hint="stop it first (systemctl --user stop memsync), or set "
            "control.socket to another path",
        )
    if probe != errno.ECONNREFUSED:
        raise SocketPlaceError(
            f"control.socket {path}: cannot tell whether something listens on it "
            f"({os.strerror(probe)}); memsync leaves it as it is",
            hint="retry; if no daemon runs, remove the socket file",
        )
    real.unlink()  # a socket of ours that nobody listens on: a killed daemon's leftover
    return real


def _connect(path: Path) -> int | None:
    """None when something accepts a connection on `path`; else the errno that said no
    (ETIMEDOUT when it neither accepted nor refused within two seconds)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2)
    try:
        sock.connect(str(path))
    except TimeoutError:
        return errno.ETIMEDOUT
    except OSError as exc:
        return exc.errno or errno.EIO
    finally:
        sock.close()
    return None


@dataclass
class ControlSocket:
    """The control socket's server."""

    path: Path
    server: Server
    identity: tuple[int, int] | None  # (st_dev, st_ino) of the socket bound

    @classmethod
    async def start(cls, path: Path, controller: Controller) -> ControlSocket:
        real = claim(path)
        server = Server(control_handler(controller), max_body=MAX_BODY)
        # Bind with a umask that leaves the socket 0600 from its first instant.
        old = os.umask(0o177)
        try:
            await server.start_unix(str(real))
        except OSError as exc:  # a path too long for AF_UNIX, a race for the name
            raise listen_error("control.socket", str(path), exc) from exc
        finally:
            os.umask(old)
        return cls(real, server, _identity(real))

    async def stop(self) -> None:
        await self.server.stop()
        # Only the socket this daemon bound: whatever replaced it is someone else's.
        if self.identity is not None and _identity(self.path) == self.identity:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISSOCK(info.st_mode) else None
