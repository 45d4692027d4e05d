"""sd_notify against real datagram sockets: a path in tmp_path and an abstract name."""

from __future__ import annotations

import logging
import os
import socket
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.daemon.notify import STATUS_MAX, Notifier

RECV_DEADLINE = 5.0  # seconds a receiver waits for a datagram before the test fails


class Receiver:
    """A bound AF_UNIX datagram socket standing in for the service manager."""

    def __init__(self, sock: socket.socket, address: str) -> None:
        self.sock = sock
        self.address = address  # as $NOTIFY_SOCKET spells it
        sock.settimeout(RECV_DEADLINE)

    def message(self) -> dict[str, str]:
        return _parse(self.sock.recv(4096))

    def message_with_sender(self) -> tuple[dict[str, str], int]:
        """The next message and the pid the kernel vouches for (what NotifyAccess= checks)."""
        size = socket.CMSG_SPACE(struct.calcsize("3i"))
        data, ancillary, _, _ = self.sock.recvmsg(4096, size)
        for level, kind, payload in ancillary:
            if (level, kind) == (socket.SOL_SOCKET, socket.SCM_CREDENTIALS):
                pid, _uid, _gid = struct.unpack("3i", payload[: struct.calcsize("3i")])
                return _parse(data), pid
        raise AssertionError("no SCM_CREDENTIALS on the datagram")

    def nothing_queued(self) -> bool:
        self.sock.setblocking(False)
        try:
            self.sock.recv(4096)
        except BlockingIOError:
            return True
        finally:
            self.sock.settimeout(RECV_DEADLINE)
        return False


def _parse(data: bytes) -> dict[str, str]:
    lines = data.decode().split("\n")
    fields = dict(line.split("=", 1) for line in lines)
    assert len(fields) == len(lines), f"repeated or malformed lines in {data!r}"
    return fields


@pytest.fixture
def path_receiver(tmp_path: Path) -> Iterator[Receiver]:
    path = tmp_path / "notify"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(path))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        yield Receiver(sock, str(path))


@pytest.fixture
def abstract_receiver() -> Iterator[Receiver]:
    name = f"memsync-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        yield Receiver(sock, f"@{name}")


@pytest.fixture(params=["path", "abstract"])
def receiver(request: pytest.FixtureRequest) -> Receiver:
    chosen: Receiver = request.getfixturevalue(f"{request.param}_receiver")
    return chosen


def test_the_daemon_life_cycle_reaches_the_manager(receiver: Receiver) -> None:
    notifier = Notifier.from_env({"NOTIFY_SOCKET": receiver.address})
    assert notifier.enabled

    notifier.ready("2 roots ok, 1 view")
    assert receiver.message() == {"READY": "1", "STATUS": "2 roots ok, 1 view"}

    notifier.watchdog()
    assert receiver.message() == {"WATCHDOG": "1"}

    notifier.status("root team: dirty")
    assert receiver.message() == {"STATUS": "root team: dirty"}

    before = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    notifier.reloading()
    after = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
    reloading = receiver.message()
    assert reloading["RELOADING"] == "1"
    assert before <= int(reloading["MONOTONIC_USEC"]) <= after
    assert reloading["STATUS"]

    notifier.ready()
    assert receiver.message() == {"READY": "1"}

    notifier.stopping()
    assert receiver.message()["STOPPING"] == "1"
    assert receiver.nothing_queued()


def test_the_kernel_names_this_process_as_the_sender(receiver: Receiver) -> None:
    """With NotifyAccess=main, systemd only believes datagrams from the main pid."""
    Notifier(receiver.address).ready("up")
    fields, pid = receiver.message_with_sender()
    assert fields["READY"] == "1"
    assert pid == os.getpid()


def test_status_is_one_short_line(path_receiver: Receiver) -> None:
    notifier = Notifier(path_receiver.address)
    notifier.status("root a: ok\nroot b: offline\r\n\tview c: stale")
    assert path_receiver.message() == {"STATUS": "root a: ok root b: offline view c: stale"}

    notifier.status("x" * 5000 + "\nREADY=1")
    status = path_receiver.message()  # _parse refuses a smuggled second line
    assert set(status) == {"STATUS"}
    assert len(status["STATUS"]) == STATUS_MAX
    assert status["STATUS"].endswith("…")


def test_a_child_reads_its_notify_socket_from_the_environment(path_receiver: Receiver) -> None:
    """What systemd does: the variables in the environment of a fresh process."""
    program = (
        "from memsync.daemon.notify import Notifier\n"
        "n = Notifier.from_env()\n"
        "print(n.watchdog_interval())\n"
        "n.ready('from the child')\n"
    )
    env = {
        **os.environ,
        "NOTIFY_SOCKET": path_receiver.address,
        "WATCHDOG_USEC": "30000000",
    }
    env.pop("WATCHDOG_PID", None)
    child = subprocess.run(
        [sys.executable, "-c", program], env=env, capture_output=True, text=True, check=True
    )
    assert child.stdout.strip() == "15.0"
    fields, pid = path_receiver.message_with_sender()
    assert fields == {"READY": "1", "STATUS": "from the child"}
    assert pid not in (os.getpid(), 0)


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({}, None),
        ({"WATCHDOG_USEC": "30000000"}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid())}, 15.0),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": str(os.getpid() + 1)}, None),
        ({"WATCHDOG_USEC": "30000000", "WATCHDOG_PID": "init"}, None),
        ({"WATCHDOG_USEC": "0"}, None),
        ({"WATCHDOG_USEC": "-5"}, None),
        ({"WATCHDOG_USEC": "thirty"}, None),
        ({"WATCHDOG_USEC": "1000"}, 0.0005),
    ],
)
def test_the_watchdog_interval_is_half_of_watchdog_usec_for_this_process(
    env: dict[str, str], expected: float | None
) -> None:
    assert Notifier.from_env(env).watchdog_interval() == expected


@pytest.mark.parametrize("address", [None, "", "relative/notify", "vsock:2:1234"])
def test_without_a_usable_notify_socket_every_call_is_a_no_op(address: str | None) -> None:
    env = {} if address is None else {"NOTIFY_SOCKET": address}
    notifier = Notifier.from_env(env)
    assert not notifier.enabled
    notifier.ready("x")
    notifier.reloading()
    notifier.status("x")
    notifier.watchdog()
    notifier.stopping()


def test_a_missing_or_dead_manager_is_logged_never_raised(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="memsync.daemon.notify")
    gone = tmp_path / "gone"
    Notifier(str(gone)).ready("x")  # no such socket
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(str(tmp_path / "closed"))
    Notifier(str(tmp_path / "closed")).watchdog()  # bound once, nobody listening now
    Notifier(f"@memsync-test-{uuid.uuid4().hex}").stopping()  # abstract name nobody holds
    failures = [r for r in caplog.records if "sd_notify" in r.getMessage()]
    assert len(failures) == 3
    assert all(r.levelno == logging.DEBUG for r in failures)


def test_a_full_manager_queue_never_blocks_the_loop(
    path_receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    """A manager that does not read: the message is dropped at once, not waited on."""
    caplog.set_level(logging.DEBUG, logger="memsync.daemon.notify")
    filler = bytes(1024)
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.setblocking(False)
        with pytest.raises(BlockingIOError):  # fill until the kernel says full
            for _ in range(100_000):
                sock.sendto(filler, path_receiver.address)
    # In a thread, so that a send that does block fails this test instead of hanging it.
    sender = threading.Thread(target=Notifier(path_receiver.address).watchdog, daemon=True)
    started = time.monotonic()
    sender.start()
    sender.join(RECV_DEADLINE)
    assert not sender.is_alive(), "the notifier waited on a full queue"
    assert time.monotonic() - started < 1.0
    assert any("sd_notify" in r.getMessage() for r in caplog.records)
