"""The daemon's control socket: HTTP over a unix socket (mode 0600), CONTRACT §6.

`GET /v1/status`, `POST /v1/sync` (answers after the cycles finish, with exactly the
`sync-now --json` document), `POST /v1/views/pull`, `POST /v1/cycles/{prune|insight}`
(`{"root", "force"}`: one maintenance turn, answered with the `cycle --json` document).
Junk requests get a JSON error and the daemon goes on; a client
that disconnects mid-request does not cancel the cycle it asked for (others may share it).
A stale socket file from a killed daemon is taken over only when nothing answers on it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, ValidationError

from memsync.daemon.client import answers
from memsync.errors import UsageError

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

    async def sync(self, request: SyncRequest) -> BaseModel: ...

    async def pull(self, request: PullRequest) -> BaseModel: ...

    async def cycle(self, kind: str, request: CycleRequest) -> BaseModel: ...


class SocketInUse(UsageError):
    """Another daemon answers on the control socket."""


def _error(status: int, code: str, message: str) -> web.Response:
    return web.json_response({"error": {"code": code, "message": message}}, status=status)


def control_app(controller: Controller) -> web.Application:
    async def status(request: web.Request) -> web.Response:
        return _json(await controller.status())

    async def sync(request: web.Request) -> web.Response:
        body = await _body(request, SyncRequest)
        if isinstance(body, web.Response):
            return body
        try:
            return _json(await controller.sync(body))
        except UsageError as exc:
            return _error(400, "usage", exc.message)

    async def pull(request: web.Request) -> web.Response:
        body = await _body(request, PullRequest)
        if isinstance(body, web.Response):
            return body
        try:
            return _json(await controller.pull(body))
        except UsageError as exc:
            return _error(400, "usage", exc.message)

    async def cycles(request: web.Request) -> web.Response:
        kind = request.match_info["cycle"]
        if kind not in ("prune", "insight"):
            return _error(404, "not-found", f"no cycle {kind!r}: prune or insight")
        body = await _body(request, CycleRequest)
        if isinstance(body, web.Response):
            return body
        try:
            return _json(await controller.cycle(kind, body))
        except UsageError as exc:
            return _error(400, "usage", exc.message)

    app = web.Application(client_max_size=64 * 1024, middlewares=[_errors])
    app.router.add_get("/v1/status", status)
    app.router.add_post("/v1/sync", sync)
    app.router.add_post("/v1/views/pull", pull)
    app.router.add_post("/v1/cycles/{cycle}", cycles)
    return app


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


async def _body(request: web.Request, model: type[M]) -> M | web.Response:
    raw = await request.read()
    try:
        data: Any = json.loads(raw) if raw.strip() else {}
        return model.model_validate(data)
    except (ValueError, ValidationError) as exc:
        first = str(exc).splitlines()[0][:200]
        return _error(400, "bad-request", f"not a valid request: {first}")


@dataclass
class ControlSocket:
    """The control socket's site on the daemon's runner."""

    path: Path
    runner: web.AppRunner

    @classmethod
    async def start(cls, path: Path, controller: Controller) -> ControlSocket:
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        if path.exists() or path.is_symlink():
            if answers(path):
                raise SocketInUse(
                    f"another memsync daemon answers on {path}",
                    hint="stop it first (systemctl --user stop memsync), or set "
                    "control.socket to another path",
                )
            path.unlink()  # a stale socket left by a killed daemon
        runner = web.AppRunner(control_app(controller), access_log=None, handle_signals=False)
        await runner.setup()
        # Bind with a umask that leaves the socket 0600 from its first instant.
        old = os.umask(0o177)
        try:
            await web.UnixSite(runner, str(path)).start()
        finally:
            os.umask(old)
        return cls(path, runner)

    async def stop(self) -> None:
        await self.runner.cleanup()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
