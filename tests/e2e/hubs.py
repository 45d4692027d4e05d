"""Running `memsync hub serve` as a real process on loopback for end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class HubProcess:
    proc: subprocess.Popen[bytes]
    url: str
    port: int
    stderr: Path

    def log(self) -> list[str]:
        return self.stderr.read_text(errors="replace").splitlines()

    def fds(self, pid: int | None = None) -> int:
        """Open descriptors of the hub (or of one of its workers), as /proc shows them."""
        return len(os.listdir(f"/proc/{pid or self.proc.pid}/fd"))

    def healthy(self) -> bool:
        assert self.proc.poll() is None, "\n".join(self.log())
        try:
            with urllib.request.urlopen(f"{self.url}/v1/health", timeout=1) as answer:
                return bool(json.load(answer) == {"status": "ok"})
        except OSError:
            return False


@contextlib.contextmanager
def hub_process(
    data: Path, *options: str, nofile: int | None = None, config: Path | None = None
) -> Iterator[HubProcess]:
    """A hub serving `data` with `hub serve` `options` (and, given `nofile`, that
    descriptor limit; given `config`, with that configuration file rather than `--data`),
    its stderr in a file next to `data`; stopped (SIGTERM, then SIGKILL of its whole group)
    when the block ends."""
    port = free_port()
    stderr = data.parent / f"hub-{port}.log"

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    with stderr.open("wb") as err:
        proc = subprocess.Popen(
            [
                *(sys.executable, "-m", "memsync"),
                *(("--config", str(config)) if config else ()),
                *("hub", "serve", *(() if config else ("--data", str(data)))),
                *("--listen", f"127.0.0.1:{port}", *options),
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            preexec_fn=limit,  # noqa: PLW1509 (no thread of the test runs while it forks)
            start_new_session=True,
        )
    hub = HubProcess(proc, f"http://127.0.0.1:{port}", port, stderr)
    try:
        wait_for(hub.healthy, 15, "the hub to come up")
        yield hub
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # workers left behind, if any
            proc.wait()


@contextlib.contextmanager
def running_hub(data: Path) -> Iterator[tuple[str, list[str]]]:
    """A hub serving `data`; yields its URL and, once it stopped, its stderr lines."""
    log: list[str] = []
    with hub_process(data) as hub:
        try:
            yield hub.url, log
        finally:
            hub.proc.terminate()
            hub.proc.wait(timeout=15)
            log += hub.log()
