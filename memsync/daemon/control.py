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
from typing import Any, Protocol, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from memsync.daemon.client import SAFE_SOCKET_HINT
from memsync.daemon.listen import listen_error
from memsync.daemon.peer import peer_refusal, peer_uid, socket_directory_refusal
from memsync.errors import ConfigError, UsageError
from memsync.regularfile import kind_of
from memsync.wire.pause import PauseRequest, ResumeRequest

log = logging.getLogger(__name__)

M = TypeVar("M", bound=BaseModel)


class SyncRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    roots: list[str] = []
    accept_rewrite: bool = False
    dry_run: bool = False
    no_push: bool = False


class PullRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    views: list[str] = []


class CycleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    root: str
    force: bool = False


class Controller(Protocol):
    """What the control socket asks of the daemon (answers are JSON-ready models)."""

    async def status(self) -> BaseModel: ...

    async def daemon(self) -> BaseModel: ...

    async def sync(self, request: SyncRequest) -> BaseModel: ...

    async def pull(self, request: PullRequest) -> BaseModel: ...

    async def cycle(self, kind: str, request: CycleRequest) -> BaseModel: ...

    async def pause(self, request: PauseRequest) -> BaseModel: ...

    async def resume(self, request: ResumeRequest) -> BaseModel: ...


class SocketInUse(UsageError):
    """Another daemon answers on the control socket."""


class SocketPlaceError(ConfigError):
    """`control.socket` names a place the daemon will not bind or clear."""


REFUSAL_LOG_EVERY = 60.0  # seconds between two log lines about refused peers


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def control_app(controller: Controller) -> web.Application:
    async def status(request: web.Request) -> web.Response:
        return _json(await controller.status())

    async def daemon(request: web.Request) -> web.Response:
        return _json(await controller.daemon())

    sync = _posted(SyncRequest, controller.sync)
    pull = _posted(PullRequest, controller.pull)
    pause = _posted(PauseRequest, controller.pause)
    resume = _posted(ResumeRequest, controller.resume)

    async def cycles(request: web.Request) -> web.Response:
        kind = request.match_info["cycle"]
        if kind not in ("prune", "insight"):
            return _error(404, "not-found", f"no cycle {kind!r}: prune or insight")
        return await _posted(CycleRequest, lambda body: controller.cycle(kind, body))(request)

    app = web.Application(client_max_size=64 * 1024, middlewares=[_peers(), _errors])
    app.router.add_get("/v1/status", status)
    app.router.add_get("/v1/daemon", daemon)
    app.router.add_post("/v1/sync", sync)
    app.router.add_post("/v1/views/pull", pull)
    app.router.add_post("/v1/cycles/{cycle}", cycles)
    app.router.add_post("/v1/pause", pause)
    app.router.add_post("/v1/resume", resume)
    return app


def _peers() -> Callable[..., Awaitable[web.StreamResponse]]:
    """Refuse every request whose peer is neither this user nor root (logged at most once a
    minute: a refused peer could otherwise fill the journal)."""
    own = os.geteuid()
    logged = [-REFUSAL_LOG_EVERY]

    @web.middleware
    async def check(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        transport = request.transport
        sock = transport.get_extra_info("socket") if transport is not None else None
        try:
            refusal = (
                peer_refusal(peer_uid(sock), own, serving=True)
                if sock is not None
                else "its peer cannot be identified"
            )
        except OSError as exc:
            refusal = f"its peer cannot be identified ({exc.strerror})"
        if refusal is None:
            return await handler(request)
        now = time.monotonic()
        if now - logged[0] >= REFUSAL_LOG_EVERY:
            logged[0] = now
            log.warning("control socket: refused a request: %s", refusal)
        return _error(403, "forbidden", f"this daemon answers only its own user: {refusal}")

    return check


@web.middleware
async def _errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    try:
        return await handler(request)
    except web.HTTPException as exc:
        return _error(exc.status, "http", exc.reason)
    except Exception:
        log.exception("control request %s %s failed", request.method, request.path)
        return _error(500, "internal", "the daemon failed to answer; see its log")


def _json(model: BaseModel) -> web.Response:
    return web.Response(text=model.model_dump_json(), content_type="application/json")


def _posted(
    model: type[M], call: Callable[[M], Awaitable[BaseModel]]
) -> Callable[[web.Request], Awaitable[web.Response]]:
    """A POST handler: the body read as `model`, `call` answered as JSON; a request the
    controller refuses is a 400 with its words."""

    async def handle(request: web.Request) -> web.Response:
        body = await _body(request, model)
        if isinstance(body, web.Response):
            return body
        try:
            return _json(await call(body))
        except UsageError as exc:
            return _error(400, "usage", exc.message)

    return handle


async def _body(request: web.Request, model: type[M]) -> M | web.Response:
    raw = await request.read()
    try:
        data: Any = json.loads(raw) if raw.strip() else {}
        return model.model_validate(data)
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0][:200]
        return _error(400, "bad-request", f"not a valid request: {first}")


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
    """The control socket's site on the daemon's runner."""

    path: Path
    runner: web.AppRunner
    identity: tuple[int, int] | None  # (st_dev, st_ino) of the socket bound

    @classmethod
    async def start(cls, path: Path, controller: Controller) -> ControlSocket:
        real = claim(path)
        runner = web.AppRunner(control_app(controller), access_log=None, handle_signals=False)
        await runner.setup()
        # Bind with a umask that leaves the socket 0600 from its first instant.
        old = os.umask(0o177)
        try:
            await web.UnixSite(runner, str(real)).start()
        except OSError as exc:  # a path too long for AF_UNIX, a race for the name
            await runner.cleanup()
            raise listen_error("control.socket", str(path), exc) from exc
        finally:
            os.umask(old)
        return cls(real, runner, _identity(real))

    async def stop(self) -> None:
        await self.runner.cleanup()
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
