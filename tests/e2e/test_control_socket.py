"""The control socket's edges (issue 16, items 7, 17, 19): `memsync run` removes only a
socket it proved stale, listens only where no other user can write, answers only its own
user; the client trusts only a daemon of its own user and says in words when one is silent.
Real daemons, real sockets; the cross-user cases run when the tests run as root."""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.daemons import Daemon, launcher, write_config
from tests.e2e.test_cli import memsync

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


def plain_config(tmp_path: Path, socket_path: Path, filename: str = "config.yaml") -> Path:
    """A config with one root that is a plain directory: the daemon has nothing to sync."""
    plain = tmp_path / "plain"
    plain.mkdir(exist_ok=True)
    return write_config(
        tmp_path, {"bob": {"path": plain}}, socket_path=socket_path, filename=filename
    )


@contextlib.contextmanager
def listening(path: Path) -> Iterator[socket.socket]:
    """A unix socket of ours at `path` that never accepts (connections wait in its backlog)."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(8)
    try:
        yield server
    finally:
        server.close()


def pending(server: socket.socket) -> bool:
    """Whether a client connected to `server` (a connection waits to be accepted)."""
    return bool(select.select([server], [], [], 0)[0])


# -- item 7: only a socket proven stale is ever unlinked ---------------------------------------


def _regular(path: Path) -> Callable[[], object]:
    path.write_bytes(b"my notes\n\x00binary too\n")
    return path.read_bytes


def _directory(path: Path) -> Callable[[], object]:
    path.mkdir()
    (path / "inside.txt").write_text("kept\n")
    return (path / "inside.txt").read_text


def _fifo(path: Path) -> Callable[[], object]:
    os.mkfifo(path)
    return lambda: path.lstat().st_mode


def _link_to_file(path: Path) -> Callable[[], object]:
    target = path.parent.parent / "notes.md"
    target.write_text("the target\n")
    path.symlink_to(target)
    return lambda: (os.readlink(path), target.read_text())


def _link_to_stale_socket(path: Path) -> Callable[[], object]:
    target = path.parent.parent / "elsewhere.sock"
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(target))
    leftover.close()  # stale: nobody listens; still not the daemon's to remove through a link
    path.symlink_to(target)
    return lambda: (os.readlink(path), target.lstat().st_ino)


@pytest.mark.parametrize(
    ("make", "kind"),
    [
        (_regular, "a regular file"),
        (_directory, "a directory"),
        (_fifo, "a FIFO"),
        (_link_to_file, "a symbolic link"),
        (_link_to_stale_socket, "a symbolic link"),
    ],
)
def test_whatever_is_not_a_socket_at_the_socket_path_is_left_and_refused(
    tmp_path: Path,
    start: Callable[..., Daemon],
    make: Callable[[Path], Callable[[], object]],
    kind: str,
) -> None:
    place = tmp_path / "run" / "memsync.sock"
    place.parent.mkdir(mode=0o700)
    snapshot = make(place)
    before = snapshot()
    daemon = start(plain_config(tmp_path, place), wait=False)
    assert daemon.proc.wait(timeout=30) == 2
    said = daemon.log.read_text()
    assert f"control.socket {place} is {kind}, not a socket" in said, said
    assert snapshot() == before  # byte for byte, link for link


def test_a_live_socket_too_busy_to_accept_is_not_taken_for_stale(
    tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    place = tmp_path / "run" / "memsync.sock"
    place.parent.mkdir(mode=0o700)
    with silent(place, "full"):  # a listener that has fallen behind
        identity = place.lstat().st_ino
        daemon = start(plain_config(tmp_path, place), wait=False)
        assert daemon.proc.wait(timeout=30) == 2
        assert "cannot tell whether something listens on it" in daemon.log.read_text()
        assert place.lstat().st_ino == identity  # the live listener keeps its socket


def test_at_exit_the_daemon_removes_only_the_socket_it_bound(
    tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    place = tmp_path / "run" / "memsync.sock"
    daemon = start(plain_config(tmp_path, place))
    place.unlink()
    place.write_text("written there while the daemon ran\n")
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(timeout=30) == 0
    assert place.read_text() == "written there while the daemon ran\n"


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to chown a socket to another user")
def test_a_stale_socket_of_another_user_is_left_and_refused(
    tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    place = tmp_path / "run" / "memsync.sock"
    place.parent.mkdir(mode=0o700)
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(place))
    leftover.close()
    os.chown(place, NOBODY, NOBODY)
    daemon = start(plain_config(tmp_path, place), wait=False)
    assert daemon.proc.wait(timeout=30) == 2
    assert f"socket of uid {NOBODY}" in daemon.log.read_text()
    assert place.lstat().st_uid == NOBODY


# -- item 17: a directory others can write; the peer on both sides ---------------------------


@pytest.mark.parametrize("mode", [0o777, 0o1777, 0o770, 0o702])
def test_the_daemon_refuses_a_socket_directory_others_can_write(
    tmp_path: Path, start: Callable[..., Daemon], mode: int
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(mode)
    daemon = start(plain_config(tmp_path, shared / "memsync.sock"), wait=False)
    assert daemon.proc.wait(timeout=30) == 2
    said = daemon.log.read_text()
    assert f"its directory {shared} is writable by other users" in said, said
    assert "directory only you can write" in said
    assert not (shared / "memsync.sock").exists()


@pytest.mark.parametrize("command", [("status",), ("sync-now", "--json")])
def test_the_client_does_not_talk_to_a_socket_where_others_can_write(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    config = plain_config(tmp_path, shared / "memsync.sock")
    with listening(shared / "memsync.sock") as server:  # whoever bound it first
        done = memsync("--config", str(config), *command, env={"XDG_CACHE_HOME": str(tmp_path)})
        assert done.returncode == 2, done.stderr
        assert f"will not use the control socket {shared / 'memsync.sock'}" in done.stderr
        assert "writable by other users" in done.stderr
        assert not pending(server)  # not even a connection


FORGED = (
    b'{"results": [{"root": "bob", "status": "pushed", "message": "forged", "head": null,'
    b' "upstream": null, "files": [], "problems": [], "rescue_ref": null,'
    b' "operation_id": null, "duration_ms": 1}]}'
)

# Binds as root (in root's own 0700 directory), then listens as another user: the
# listener's credentials, which the client reads, are that user's.
FORGER = rf"""
import os, socket, sys
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
os.setgid({NOBODY}); os.setuid({NOBODY})
server.listen(8)
print("listening", flush=True)
server.settimeout(60)
conn, _ = server.accept()
conn.settimeout(10)
got = b""
try:
    while b"\r\n\r\n" not in got and (chunk := conn.recv(4096)):
        got += chunk
    body = {FORGED!r}
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
except OSError:
    pass
print("request bytes", len(got), flush=True)
"""


@as_root
def test_the_client_refuses_a_daemon_of_another_user(tmp_path: Path) -> None:
    place = tmp_path / "run" / "memsync.sock"
    place.parent.mkdir(mode=0o700)
    forger = subprocess.Popen(
        [sys.executable, "-c", FORGER, str(place)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert forger.stdout is not None and forger.stdout.readline() == "listening\n"
        config = plain_config(tmp_path, place)
        done = memsync("--config", str(config), "sync-now", "--json")
        assert done.returncode == 2, (done.stdout, done.stderr)
        assert f"runs as uid {NOBODY}, not as this user" in done.stderr
        assert "posing as the daemon" in done.stderr
        assert "forged" not in done.stdout and "pushed" not in done.stdout
        out, _ = forger.communicate(timeout=30)
        assert "request bytes 0" in out  # the request never left the client
    finally:
        if forger.poll() is None:
            forger.kill()
            forger.wait(timeout=10)


# Connects as another user and asks for the status.
INTRUDER = rf"""
import os, socket, sys
os.setgid({NOBODY}); os.setuid({NOBODY})
client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
client.settimeout(20)
client.connect(sys.argv[1])
client.sendall(b"GET /v1/status HTTP/1.1\r\nHost: memsync\r\nConnection: close\r\n\r\n")
got = b""
while chunk := client.recv(65536):
    got += chunk
sys.stdout.write(got.decode("latin-1"))
"""


@as_root
def test_the_daemon_answers_no_other_user_even_through_a_loosened_socket(
    tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    # Outside pytest's 0700 tree, so another user can reach the socket once it is loosened.
    run = Path(tempfile.mkdtemp(prefix="memsync-peer-"))
    try:
        place = run / "memsync.sock"
        daemon = start(plain_config(tmp_path, place))
        run.chmod(0o711)
        place.chmod(0o666)
        asked = subprocess.run(
            [sys.executable, "-c", INTRUDER, str(place)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert asked.returncode == 0, asked.stderr
        assert asked.stdout.startswith("HTTP/1.1 403"), asked.stdout
        assert f"answers only its own user: it runs as uid {NOBODY}" in asked.stdout
        assert '"roots"' not in asked.stdout
        assert "refused a request" in daemon.log.read_text()
        place.chmod(0o600)
        assert daemon.status().daemon.running  # its own user is still answered
    finally:
        shutil.rmtree(run, ignore_errors=True)


# -- item 19: a daemon that does not answer --------------------------------------------------


@contextlib.contextmanager
def silent(path: Path, how: str) -> Iterator[None]:
    """A listener of ours that never answers: it accepts and holds (`accepts`), leaves the
    connection queued (`queues`), or has a full backlog (`full`: connecting says EAGAIN)."""
    done = threading.Event()
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(0 if how == "full" else 8)
    held: list[socket.socket] = []

    def hold() -> None:
        server.settimeout(0.1)
        while not done.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=hold, daemon=True)
    if how == "accepts":
        thread.start()
    while how == "full":  # fill the backlog until the next connect would say EAGAIN
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        client.setblocking(False)
        try:
            client.connect(str(path))
        except BlockingIOError:
            client.close()
            break
        held.append(client)
    try:
        yield
    finally:
        done.set()
        if how == "accepts":
            thread.join(10)
        for conn in held:
            conn.close()
        server.close()


@pytest.mark.parametrize("how", ["accepts", "queues", "full"])
@pytest.mark.parametrize("command", [("status",), ("sync-now",), ("status", "--json")])
def test_a_silent_daemon_is_said_in_words(
    tmp_path: Path, command: tuple[str, ...], how: str
) -> None:
    place = tmp_path / "run" / "memsync.sock"
    place.parent.mkdir(mode=0o700)
    config = plain_config(tmp_path, place)
    env = {"MEMSYNC_CONTROL_TIMEOUT": "0.5", "XDG_CACHE_HOME": str(tmp_path)}
    with silent(place, how):
        done = memsync("--config", str(config), *command, env=env)
    assert done.returncode == 3, done.stderr
    assert f"the daemon at {place} did not answer within 0.5 s" in done.stderr
    assert "journalctl --user -u memsync" in done.stderr
    assert "internal error" not in done.stderr and "Error" not in done.stderr


def test_a_wait_that_is_not_a_number_is_a_usage_error(tmp_path: Path) -> None:
    config = plain_config(tmp_path, tmp_path / "run" / "memsync.sock")
    done = memsync("--config", str(config), "status", env={"MEMSYNC_CONTROL_TIMEOUT": "soon"})
    assert done.returncode == 2
    assert "MEMSYNC_CONTROL_TIMEOUT='soon' is not a positive number of seconds" in done.stderr
