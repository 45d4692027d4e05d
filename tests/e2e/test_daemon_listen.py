"""A listener the daemon cannot open is a configuration error naming the setting and the
address (exit 2, one line), never `internal error … please report it` (issue 17, item 5):
systemd restarts a daemon that exits 3 every few seconds, and this one would never start."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.daemons import Daemon, launcher
from tests.e2e.test_control_socket import plain_config


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


def _said(daemon: Daemon) -> list[str]:
    return [line for line in daemon.log.read_text().splitlines() if line.strip()]


def test_a_busy_http_listen_port_is_a_configuration_error_naming_the_address(
    tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    place = tmp_path / "run" / "memsync.sock"
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        config = plain_config(tmp_path, place)
        config.write_text(config.read_text() + f"http: {{listen: 127.0.0.1:{port}}}\n")
        daemon = start(config, wait=False)
        assert daemon.proc.wait(timeout=60) == 2
    said = _said(daemon)
    assert len(said) == 1, said
    assert f"http.listen 127.0.0.1:{port}: cannot listen: the address is already in use" in said[0]
    assert "internal error" not in said[0] and "set http.listen" in said[0]
    assert not place.exists()  # the control socket it had opened is gone with it


def test_a_control_socket_path_too_long_to_bind_is_a_configuration_error(
    tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    place = tmp_path / ("d" * 60) / ("e" * 60) / "memsync.sock"  # past AF_UNIX's 108 bytes
    daemon = start(plain_config(tmp_path, place), wait=False)
    assert daemon.proc.wait(timeout=60) == 2
    said = _said(daemon)
    assert len(said) == 1, said
    assert f"control.socket {place}: cannot listen:" in said[0], said
    assert "internal error" not in said[0]
