"""Running `memsync hub serve` as a real process on loopback for end-to-end tests."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.helpers import wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def running_hub(data: Path) -> Iterator[tuple[str, list[str]]]:
    """A hub serving `data`; yields its URL and, once it stopped, its stderr lines."""
    url = f"http://127.0.0.1:{free_port()}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memsync",
            "hub",
            "serve",
            "--data",
            str(data),
            "--listen",
            url.removeprefix("http://"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def healthy() -> bool:
        assert proc.poll() is None, proc.communicate()
        try:
            with urllib.request.urlopen(f"{url}/v1/health", timeout=1) as answer:
                return bool(json.load(answer) == {"status": "ok"})
        except OSError:
            return False

    log: list[str] = []
    try:
        wait_for(healthy, 15, "the hub to come up")
        yield url, log
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=15)
        log += err.splitlines()
