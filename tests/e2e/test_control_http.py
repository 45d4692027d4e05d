"""The control socket speaks the HTTP its clients speak, whatever serves it (issue 18: no
web framework at rest): routes and methods answered with JSON errors, HEAD, keep-alive,
bodies by Content-Length or chunked, `Expect: 100-continue`, bounds on the body and the
head, and junk that ends its own connection only. Checked on a real `memsync run` with raw
sockets, so what a client sees is what is pinned."""

from __future__ import annotations

import json
import signal
import socket
import time
from pathlib import Path

from memsync.daemon.server import SHUTDOWN_GRACE
from tests.conftest import Team
from tests.e2e.daemons import launcher, write_config


def exchange(path: Path, data: bytes, *, shut: bool = False) -> bytes:
    """Send `data` on a new connection; everything the daemon answers until it closes."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
        client.settimeout(30)
        client.connect(str(path))
        client.sendall(data)
        if shut:
            client.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := client.recv(65536):
            answer += chunk
    return answer


def responses(raw: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Each response in `raw` (bodies by Content-Length): status, headers, body."""
    out = []
    while raw:
        head, _, rest = raw.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines)}
        length = int(headers.get("content-length", "0"))
        out.append((int(status_line.split()[1]), headers, rest[:length]))
        raw = rest[length:]
    return out


def error_of(body: bytes) -> tuple[str, str]:
    error = json.loads(body)["error"]
    return error["code"], error["message"]


def test_the_control_socket_speaks_http_as_its_clients_do(team: Team, tmp_path: Path) -> None:
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    with launcher(tmp_path) as launch:
        daemon = launch(config)
        sock = daemon.socket
        close = "Host: memsync\r\nConnection: close\r\n"

        # Two requests on one kept-alive connection, then a closing one.
        raw = exchange(
            sock,
            b"GET /v1/daemon HTTP/1.1\r\nHost: memsync\r\n\r\n"
            + f"HEAD /v1/daemon HTTP/1.1\r\n{close}\r\n".encode(),
        )
        (first, headers, body), (second, head_headers, head_body) = responses(raw)
        assert (first, second) == (200, 200)
        assert headers["content-type"] == "application/json; charset=utf-8"
        assert json.loads(body)["pid"] == daemon.proc.pid
        assert head_body == b"" and int(head_headers["content-length"]) > 0

        for request, status, code, message in (
            (f"GET /v1/nope HTTP/1.1\r\n{close}\r\n", 404, "http", "Not Found"),
            (f"GET /v1/cycles/ HTTP/1.1\r\n{close}\r\n", 404, "http", "Not Found"),
            (f"GET /v1/sync HTTP/1.1\r\n{close}\r\n", 405, "http", "Method Not Allowed"),
            (f"POST /v1/status HTTP/1.1\r\n{close}\r\n", 405, "http", "Method Not Allowed"),
            (
                f"POST /v1/sync HTTP/1.1\r\n{close}Content-Length: 70000\r\n\r\n{'[' * 70000}",
                413,
                "http",
                "Request Entity Too Large",
            ),
        ):
            ((got, _, body),) = responses(exchange(sock, request.encode()))
            assert (got, *error_of(body)) == (status, code, message), request

        # A body sent in chunks, and one sent after `100 Continue`: read as any other.
        chunked = (
            f"POST /v1/sync HTTP/1.1\r\n{close}Transfer-Encoding: chunked\r\n\r\n"
            '7\r\n{"roots\r\n7;ext=1\r\n": ["no\r\n5\r\npe"]}\r\n0\r\n\r\n'
        )
        ((got, _, body),) = responses(exchange(sock, chunked.encode()))
        assert (got, *error_of(body)) == (400, "usage", "unknown root(s): nope")
        raw = exchange(
            sock,
            f"POST /v1/sync HTTP/1.1\r\n{close}Expect: 100-continue\r\nContent-Length: 17\r\n\r\n"
            '{"roots": [true]}'.encode(),
        )
        assert raw.startswith(b"HTTP/1.1 100 Continue\r\n\r\n")
        ((got, _, body),) = responses(raw.removeprefix(b"HTTP/1.1 100 Continue\r\n\r\n"))
        assert got == 400 and error_of(body)[0] == "bad-request"
        assert "1 validation error for SyncRequest" in error_of(body)[1]

        # Junk and a head past every bound end their own connection; the daemon goes on.
        for junk in (
            b"\x00\xffGARBAGE\r\n\r\n",
            b"GET /v1/status HTTP/1.1\r\nX: " + b"a" * 70_000 + b"\r\n\r\n",
            b"GET /v1/status HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
            b"GET /v1/sta",
        ):
            answer = exchange(sock, junk, shut=True)
            if answer:
                assert int(answer.split()[1]) == 400, answer[:200]
        ((got, _, body),) = responses(
            exchange(sock, f"GET /v1/status HTTP/1.1\r\n{close}\r\n".encode())
        )
        assert got == 200 and json.loads(body)["daemon"]["running"] is True
        assert daemon.proc.poll() is None

        # A kept-alive connection with no request under way does not hold up a stop.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
            idle.settimeout(30)
            idle.connect(str(sock))
            idle.sendall(b"GET /v1/daemon HTTP/1.1\r\nHost: memsync\r\n\r\n")
            assert idle.recv(65536).startswith(b"HTTP/1.1 200 ")
            started = time.monotonic()
            daemon.proc.send_signal(signal.SIGTERM)
            assert daemon.proc.wait(timeout=30) == 0
            assert time.monotonic() - started < SHUTDOWN_GRACE
