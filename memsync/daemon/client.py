"""The CLI side of the control socket: HTTP over a unix socket, standard library only.

`sync-now`, `views pull` and `status` ask the running daemon first and fall back to doing
the work in their own process when no daemon answers. This module must stay cheap to
import (no aiohttp, no daemon stack, not even `http.client`, whose email parser and ssl
cost more than the rest of `memsync status`): people type `memsync status` all day. It
speaks the little HTTP/1.1 the daemon's own server answers: one request per connection
(`Connection: close`), a body delimited by Content-Length, chunked or the end of the stream.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

from memsync.errors import MemsyncError

MAX_ANSWER = 64 * 1024 * 1024  # a status document of many roots is KiBs; a bound all the same


class DaemonUnavailable(Exception):
    """No daemon answers on the socket (none runs, or a stale socket file)."""


class DaemonError(MemsyncError):
    """The daemon answered with an error document."""


def call(
    socket_path: Path, method: str, path: str, body: object = None, *, timeout: float = 3600
) -> Any:
    """One request to the daemon; the decoded JSON answer.

    Raises DaemonUnavailable when nothing listens (the caller falls back to in-process
    work) and DaemonError when the daemon refused the request.
    """
    if not socket_path.exists():
        raise DaemonUnavailable(f"no control socket at {socket_path}")
    payload = None if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: memsync\r\nConnection: close\r\n"
    if payload is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        try:
            sock.connect(str(socket_path))
        except (ConnectionRefusedError, FileNotFoundError) as exc:
            raise DaemonUnavailable(f"no daemon answers on {socket_path}") from exc
        try:
            sock.sendall(head.encode("ascii") + b"\r\n" + (payload or b""))
            raw = _read_all(sock)
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise _closed(method, path) from exc
    finally:
        sock.close()
    status, reason, data = _response(raw, method, path)
    try:
        answer = json.loads(data) if data else None
    except ValueError as exc:
        raise DaemonError(f"the daemon sent something that is not JSON for {path}") from exc
    if status >= 400:
        error = answer.get("error", {}) if isinstance(answer, dict) else {}
        raise DaemonError(
            f"the daemon refused {method} {path}: {error.get('message', reason)}",
            hint=error.get("hint"),
        )
    return answer


def _read_all(sock: socket.socket) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while data := sock.recv(65536):
        chunks.append(data)
        size += len(data)
        if size > MAX_ANSWER:
            raise DaemonError(f"the daemon's answer is larger than {MAX_ANSWER} bytes")
    return b"".join(chunks)


def _closed(method: str, path: str) -> DaemonError:
    return DaemonError(
        f"the daemon closed the connection during {method} {path}",
        hint="see the daemon's log (journalctl --user -u memsync)",
    )


def _response(raw: bytes, method: str, path: str) -> tuple[int, str, bytes]:
    """Status, reason and body of one HTTP/1.x response read to the end of the stream."""
    head, blank, rest = raw.partition(b"\r\n\r\n")
    status_line, *lines = head.decode("latin-1").split("\r\n")
    version, _, after = status_line.partition(" ")
    code, _, reason = after.partition(" ")
    if not blank or not version.startswith("HTTP/1.") or not code.isdigit():
        raise _closed(method, path)
    headers = {}
    for line in lines:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = _unchunk(rest)
        if body is None:
            raise _closed(method, path)
        return int(code), reason, body
    length = headers.get("content-length")
    if length is not None:
        if not length.isdigit() or len(rest) < int(length):
            raise _closed(method, path)
        return int(code), reason, rest[: int(length)]
    return int(code), reason, rest


def _unchunk(data: bytes) -> bytes | None:
    """A chunked body decoded; None when it ends before its last chunk."""
    out: list[bytes] = []
    while True:
        size_line, crlf, data = data.partition(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0], 16)
        except ValueError:
            return None
        if not crlf or size < 0 or len(data) < size + 2:
            return None
        if size == 0:
            return b"".join(out)
        out.append(data[:size])
        data = data[size + 2 :]


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
