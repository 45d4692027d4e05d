"""Starting `memsync run` as a real process for end-to-end tests."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import yaml

from memsync.daemon.client import call
from memsync.wire import StatusReport
from tests.e2e.test_cli import memsync
from tests.kit import GIT_ENV


@dataclass
class Daemon:
    proc: subprocess.Popen[str]
    config: Path
    socket: Path
    notify: socket.socket
    log: Path

    def messages(self, timeout: float = 20.0) -> list[str]:
        """sd_notify datagrams received so far (waits for at least one)."""
        self.notify.settimeout(timeout)
        got = [self.notify.recv(4096).decode()]
        self.notify.setblocking(False)
        while True:
            try:
                got.append(self.notify.recv(4096).decode())
            except BlockingIOError:
                return got

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any("READY=1" in m for m in self.messages(deadline - time.monotonic())):
                return
        raise AssertionError(f"no READY=1; log:\n{self.log.read_text()}")

    def status(self) -> StatusReport:
        """The daemon's status report, asked on its control socket from this process (a
        test polling it spawns no process each time; `cli_status` is the command)."""
        return StatusReport.model_validate(call(self.socket, "GET", "/v1/status", timeout=30))

    def cli_status(self) -> StatusReport:
        """What `memsync status --json` prints through this daemon."""
        done = memsync("--config", str(self.config), "status", "--json")
        assert done.returncode == 0, done.stderr
        return StatusReport.model_validate_json(done.stdout)


def write_config(
    tmp_path: Path,
    roots: dict[str, dict[str, object]],
    extra: str = "",
    *,
    socket_path: Path | None = None,
    filename: str = "config.yaml",
) -> Path:
    lines = [
        "version: 1",
        f"state_dir: {tmp_path / 'state'}",
        f"control: {{socket: {socket_path or tmp_path / 'run' / 'memsync.sock'}}}",
        "roots:",
    ]
    for name, options in roots.items():
        lines += [
            f"  {name}:",
            f"    path: {options['path']}",
            f"    watch: {options.get('watch', 'false')}",
        ]
        lines.append(
            f"    sync: {{interval: {options.get('interval', '60s')}, "
            f"timeout: {options.get('timeout', '20s')}"
            + (", autocommit: true}" if options.get("autocommit") else "}")
        )
    path = tmp_path / filename
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


def control_socket(config: Path, tmp_path: Path) -> Path:
    """The control socket `config` names (`tmp_path/run/memsync.sock` when it names none)."""
    control = (yaml.safe_load(config.read_text()) or {}).get("control") or {}
    return Path(control["socket"]) if "socket" in control else tmp_path / "run" / "memsync.sock"


@contextlib.contextmanager
def launcher(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Start `memsync run` processes (waiting for READY=1); all are killed at the end."""
    started: list[Daemon] = []

    def launch(config: Path, *, env: dict[str, str] | None = None, wait: bool = True) -> Daemon:
        notify_path = tmp_path / f"notify-{len(started)}.sock"
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        sock.bind(str(notify_path))
        log = tmp_path / f"daemon-{len(started)}.log"
        full_env = {**os.environ, **GIT_ENV, "NOTIFY_SOCKET": str(notify_path), **(env or {})}
        with log.open("w") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "memsync", "--config", str(config), "run"],
                stdout=out,
                stderr=subprocess.STDOUT,
                text=True,
                env=full_env,
            )
        daemon = Daemon(proc, config, control_socket(config, tmp_path), sock, log)
        started.append(daemon)
        if wait:
            daemon.wait_ready()
        return daemon

    try:
        yield launch
    finally:  # a failing test too: never leave a daemon running
        for daemon in started:
            if daemon.proc.poll() is None:
                daemon.proc.kill()
                daemon.proc.wait(timeout=10)
            daemon.notify.close()
