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

from memsync.config import settingsmemo
from memsync.config.load import load_config_bytes
from memsync.config.model import settings_from
from memsync.config.paths import find_config_path
from memsync.daemon.client import call
from memsync.errors import MemsyncError
from memsync.wire import DaemonStatus, StatusReport
from memsync.wire.cli import ScheduleEntry
from tests.e2e.test_cli import memsync
from tests.kit import GIT_ENV, wait_for


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

    def wait_status(
        self,
        check: Callable[[StatusReport], bool],
        timeout: float,
        what: str,
        *,
        interval: float = 0.1,
    ) -> None:
        """Wait until `check` holds for the status report, asked every `interval` seconds
        (each answer runs `git status` in every root: a tighter poll costs the daemon more
        than it finds sooner)."""
        wait_for(lambda: check(self.status()), timeout, what, interval=interval)

    def entry(self, name: str) -> ScheduleEntry:
        """The schedule entry of root or view `name`, from `GET /v1/daemon` (no git)."""
        block = DaemonStatus.model_validate(call(self.socket, "GET", "/v1/daemon", timeout=30))
        return next(e for e in block.schedule if e.name == name)

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
    """The control socket `config` names (`tmp_path/run/memsync.sock` when it names none,
    or is not a file that parses)."""
    default = tmp_path / "run" / "memsync.sock"
    if not config.is_file():
        return default
    try:
        document = yaml.safe_load(config.read_bytes())
    except yaml.YAMLError:
        return default
    control = document.get("control") if isinstance(document, dict) else None
    path = control.get("socket") if isinstance(control, dict) else None
    return Path(path) if isinstance(path, str) else default


# What the daemon's environment may change that the settings memo's key or place holds.
MEMO_ENV = ("HOME", "PYTHONPATH")


def remember_settings(config: Path, env: dict[str, str]) -> None:
    """Write the settings memo of `config`'s bytes, as a command run on that file (or an
    earlier start) would have: the daemon then recalls its settings, as at any start after
    the first, instead of validating them in a child (~0.14 s CPU). Nothing is written for
    a file that does not load, nor when `env` moves the memo's key or place (the first
    start's own path keeps its tests: test_lean_starts, test_daemon_memory)."""
    if any(k in MEMO_ENV or k.startswith("XDG_") for k in env) or not config.is_file():
        return
    path = find_config_path(str(config))
    if path is None:
        return
    raw = path.read_bytes()
    try:
        settings = settings_from(load_config_bytes(raw, path), path)
    except MemsyncError:
        return
    settingsmemo.remember(path, raw, settings)


@contextlib.contextmanager
def launcher(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Start `memsync run` processes (waiting for READY=1); all are killed at the end."""
    started: list[Daemon] = []

    def launch(
        config: Path, *, env: dict[str, str] | None = None, wait: bool = True, memo: bool = True
    ) -> Daemon:
        """`memsync run` on `config`; with `memo`, its settings memo written first."""
        if memo:
            remember_settings(config, env or {})
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
