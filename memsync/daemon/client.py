"""The CLI side of the control socket: HTTP over a unix socket, standard library only.

`sync-now`, `views pull` and `status` ask the running daemon first and fall back to doing
the work in their own process when no daemon answers. This module must stay cheap to
import (no aiohttp, no daemon stack): people type `memsync status` all day.
"""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path
from typing import Any

from memsync.errors import MemsyncError


class DaemonUnavailable(Exception):
    """No daemon answers on the socket (none runs, or a stale socket file)."""


class DaemonError(MemsyncError):
    """The daemon answered with an error document."""


class _UnixConnection(http.client.HTTPConnection):
    def __init__(self, path: Path, timeout: float) -> None:
        super().__init__("memsync", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(str(self._path))
        except OSError:
            sock.close()
            raise
        self.sock = sock


def call(
    socket_path: Path, method: str, path: str, body: object = None, *, timeout: float = 3600
) -> Any:
    """One request to the daemon; the decoded JSON answer.

    Raises DaemonUnavailable when nothing listens (the caller falls back to in-process
    work) and DaemonError when the daemon refused the request.
    """
    if not socket_path.exists():
        raise DaemonUnavailable(f"no control socket at {socket_path}")
    connection = _UnixConnection(socket_path, timeout)
    try:
        payload = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": "application/json"} if payload is not None else {}
        try:
            connection.request(method, path, body=payload, headers=headers)
        except (ConnectionRefusedError, FileNotFoundError) as exc:
            raise DaemonUnavailable(f"no daemon answers on {socket_path}") from exc
        response = connection.getresponse()
        data = response.read()
    except (ConnectionResetError, http.client.RemoteDisconnected) as exc:
        raise DaemonError(
            f"the daemon closed the connection during {method} {path}",
            hint="see the daemon's log (journalctl --user -u memsync)",
        ) from exc
    finally:
        connection.close()
    try:
        answer = json.loads(data) if data else None
    except ValueError as exc:
        raise DaemonError(f"the daemon sent something that is not JSON for {path}") from exc
    if response.status >= 400:
        error = answer.get("error", {}) if isinstance(answer, dict) else {}
        raise DaemonError(
            f"the daemon refused {method} {path}: {error.get('message', response.reason)}",
            hint=error.get("hint"),
        )
    return answer


def answers(socket_path: Path) -> bool:
    """True when a daemon answers on `socket_path` (used to take over stale sockets)."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(2)
    try:
        sock.connect(str(socket_path))
    except OSError:
        return False
    finally:
        sock.close()
    return True
