"""The CLI side of the control socket: HTTP over a unix socket, standard library only.

`sync-now`, `views pull`, `cycle`, `pause`, `resume` and `status` ask the running daemon
first and fall back to doing the work in their own process when no daemon answers, or when
the daemon that answers serves another configuration file (`serves`: same resolved path,
or same device and inode). This module must stay cheap to
import (no aiohttp, no daemon stack, not even `http.client`, whose email parser and ssl
cost more than the rest of `memsync status`): people type `memsync status` all day. It
speaks the little HTTP/1.1 the daemon's own server answers: one request per connection
(`Connection: close`), a body delimited by Content-Length, chunked or the end of the stream.

It talks only to a daemon it can trust (`peer`): the socket's directory must be this
user's alone and the process that answers must run as this user; anything else is
`SocketRefused` (exit 2), never a verdict and never a silent fallback. A daemon that does
not answer within the wait is `DaemonTimeout`, said in words (`MEMSYNC_CONTROL_TIMEOUT`
shortens or lengthens every wait).
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from memsync.errors import ConfigError, MemsyncError

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:  # loaded once a socket file is there to connect to
    import socket
    from typing import Any

MAX_ANSWER = 64 * 1024 * 1024  # a status document of many roots is KiBs; a bound all the same
TIMEOUT_ENV = "MEMSYNC_CONTROL_TIMEOUT"  # seconds: overrides every wait for the daemon
LOG_HINT = "check `journalctl --user -u memsync` or retry"
SAFE_SOCKET_HINT = (
    "set control.socket to a path in a directory only you can write "
    "(the default, $XDG_RUNTIME_DIR/memsync.sock, is one)"
)


class DaemonUnavailable(Exception):
    """No daemon answers on the socket (none runs, or a stale socket file)."""


class OtherConfig(DaemonUnavailable):
    """A daemon answers on the socket, but it serves another configuration file: this
    command runs in its own process, as if no daemon ran."""

    def __init__(self, socket_path: Path, served: str | None, pid: object) -> None:
        what = served or "a configuration it does not name"
        super().__init__(f"the daemon on {socket_path} serves {what}")
        self.served = served
        self.pid = pid if isinstance(pid, int) else None


class DaemonError(MemsyncError):
    """The daemon answered with an error document."""


class DaemonTimeout(DaemonError):
    """The daemon accepted nothing or answered nothing within the wait."""


class SocketRefused(ConfigError):
    """The control socket is not one this user's daemon could be behind: it lives where
    others can write, or another user's process answers on it."""


def call(
    socket_path: Path, method: str, path: str, body: object = None, *, timeout: float = 3600
) -> Any:
    """One request to the daemon; the decoded JSON answer. A callable `body` is called for
    the document only once a socket is there to send it to (a command with no daemon loads
    no wire module for a body it never sends).

    Raises DaemonUnavailable when nothing listens (the caller falls back to in-process
    work), SocketRefused when the socket is not trustworthy, DaemonTimeout when the daemon
    does not answer within `timeout` seconds (or `$MEMSYNC_CONTROL_TIMEOUT`), and
    DaemonError when the daemon refused the request.
    """
    wait = _timeout(timeout)
    try:
        os.lstat(socket_path)
    except FileNotFoundError as exc:
        raise DaemonUnavailable(f"no control socket at {socket_path}") from exc
    except OSError as exc:
        raise DaemonUnavailable(f"cannot reach {socket_path}: {exc.strerror}") from exc
    from memsync.daemon.peer import socket_directory_refusal  # noqa: PLC0415 - a socket is there

    refusal = socket_directory_refusal(socket_path)
    if refusal is not None:
        raise SocketRefused(
            f"memsync will not use the control socket {socket_path}: {refusal}",
            hint=SAFE_SOCKET_HINT,
        )
    if callable(body):
        body = body()
    payload = None if body is None else json.dumps(body).encode()
    head = f"{method} {path} HTTP/1.1\r\nHost: memsync\r\nConnection: close\r\n"
    if payload is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
    import socket  # noqa: PLC0415 - a socket file is there: no daemon, no socket module

    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(wait)
    try:
        try:
            _connect(sock, socket_path, wait)
        except (ConnectionRefusedError, FileNotFoundError) as exc:
            raise DaemonUnavailable(f"no daemon answers on {socket_path}") from exc
        except TimeoutError as exc:
            raise _silent(socket_path, wait) from exc
        _check_peer(sock, socket_path)
        try:
            sock.sendall(head.encode("ascii") + b"\r\n" + (payload or b""))
            raw = _read_all(sock)
        except (ConnectionResetError, BrokenPipeError) as exc:
            raise _closed(method, path) from exc
        except TimeoutError as exc:
            raise _silent(socket_path, wait) from exc
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


def serves(daemon: object, config: Path) -> bool:
    """Whether a daemon block (`GET /v1/daemon`, `status`'s `daemon`) names `config` as the
    file it serves: the same resolved path, or the same file (device and inode) reached
    another way. A daemon that names none serves no file of ours."""
    served = daemon.get("config") if isinstance(daemon, dict) else None
    if not isinstance(served, str) or not served:
        return False
    if os.path.realpath(served) == os.path.realpath(config):
        return True
    try:
        return Path(served).samefile(config)
    except (OSError, ValueError):
        return False


def call_serving(
    socket_path: Path,
    config: Path | None,
    method: str,
    path: str,
    body: object = None,
    *,
    timeout: float = 3600,
) -> Any:
    """`call`, only when the daemon on the socket serves `config` (`GET /v1/daemon` first);
    else OtherConfig (a DaemonUnavailable: the caller runs the command in process)."""
    if config is not None:
        try:
            daemon = call(socket_path, "GET", "/v1/daemon", timeout=30)
        except DaemonTimeout:
            raise
        except DaemonError as exc:  # a daemon from before /v1/daemon: it names no file
            raise OtherConfig(socket_path, None, None) from exc
        if not serves(daemon, config):
            served = daemon.get("config") if isinstance(daemon, dict) else None
            pid = daemon.get("pid") if isinstance(daemon, dict) else None
            raise OtherConfig(socket_path, served if isinstance(served, str) else None, pid)
    return call(socket_path, method, path, body, timeout=timeout)


def _connect(sock: socket.socket, socket_path: Path, wait: float) -> None:
    """Connect within `wait` seconds (TimeoutError after): a daemon whose backlog is full
    refuses with EAGAIN at once rather than making the caller wait, so ask again."""
    deadline = time.monotonic() + wait
    while True:
        try:
            sock.connect(str(socket_path))
            return
        except BlockingIOError as exc:
            if time.monotonic() >= deadline:
                raise TimeoutError from exc
            time.sleep(0.05)


def _check_peer(sock: socket.socket, socket_path: Path) -> None:
    """SocketRefused unless the process behind the socket runs as this user."""
    from memsync.daemon.peer import peer_refusal, peer_uid  # noqa: PLC0415

    try:
        refusal = peer_refusal(peer_uid(sock), os.geteuid(), serving=False)
    except OSError as exc:
        refusal = f"its peer cannot be identified ({exc.strerror})"
    if refusal is not None:
        raise SocketRefused(
            f"memsync will not trust the control socket {socket_path}: {refusal}; "
            "another user may be posing as the daemon",
            hint=SAFE_SOCKET_HINT,
        )


def _timeout(default: float) -> float:
    """`$MEMSYNC_CONTROL_TIMEOUT` when set (a positive number of seconds), else `default`."""
    raw = os.environ.get(TIMEOUT_ENV, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(
            f"{TIMEOUT_ENV}={raw!r} is not a positive number of seconds",
            hint=f"unset {TIMEOUT_ENV}, or set it to e.g. 30",
        )
    return value


def _silent(socket_path: Path, wait: float) -> DaemonTimeout:
    shown = f"{wait:g}"
    return DaemonTimeout(
        f"the daemon at {socket_path} did not answer within {shown} s", hint=LOG_HINT
    )


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
