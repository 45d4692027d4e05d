"""What the tests and the benchmarks both use, kept once: the git environment and raw `git`
for arranging scenes (never our git box), a root's settings, polling, a free loopback port,
`memsync hub serve` as a real process and a view release signed as a provider would.

Importing it costs no test framework (bench imports it too: `python -m bench` from the
repository root); tests reach most of it through `tests/helpers.py`.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import resource
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.config.model import RootSettings, default_root

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Person",
    "GIT_AUTHOR_EMAIL": "test@example.invalid",
    "GIT_COMMITTER_NAME": "Test Person",
    "GIT_COMMITTER_EMAIL": "test@example.invalid",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_TERMINAL_PROMPT": "0",
}


def git(cwd: Path, *args: str, input: bytes | None = None, check: bool = True) -> str:
    """`git *args` in `cwd` with GIT_ENV; its stdout, stripped (an AssertionError naming
    git's stderr when it fails and `check`)."""
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(
        ["git", *args], cwd=cwd, env=env, input=input, capture_output=True, check=False
    )
    if check and done.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {done.stderr.decode()}")
    return done.stdout.decode("utf-8", "surrogateescape").strip()


def settings_for(name: str, path: Path, **overrides: object) -> RootSettings:
    """`roots: {name: {path: PATH}}` with the schema's defaults, no watcher, a 60s timeout:
    the settings a test or a benchmark starts from."""
    values: dict[str, object] = {"watch": False, "timeout": timedelta(seconds=60)}
    values.update(overrides)
    return default_root(name, path, **values)


def wait_for(
    predicate: Callable[[], bool],
    timeout: float = 10.0,
    what: str = "condition",
    *,
    interval: float = 0.02,
) -> None:
    """Poll `predicate` every `interval` seconds until it holds; AssertionError after
    `timeout` seconds.

    A predicate slower than `interval` (one that starts a process: `memsync status`, say) is
    asked again only after as long as it took, so a wait costs at most half a core however
    long it lasts; it still sees the change within one such round."""
    deadline = time.monotonic() + timeout
    while (asked := time.monotonic()) < deadline:
        if predicate():
            return
        time.sleep(max(interval, time.monotonic() - asked))
    raise AssertionError(f"timed out waiting for {what}")


def free_port() -> int:
    """A loopback TCP port nothing listens on (now)."""
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
            # Only a limit needs code run in the child: without one, no preexec_fn lets
            # Python vfork instead of copying the worker's page tables (~10 ms of CPU at
            # 300 MB).
            preexec_fn=limit if nofile is not None else None,  # noqa: PLW1509 (no thread of the caller runs while it forks)
            start_new_session=True,
        )
    hub = HubProcess(proc, f"http://127.0.0.1:{port}", port, stderr)
    try:
        wait_for(hub.healthy, 20, "the hub to come up")
        yield hub
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # workers left behind, if any
            proc.wait()


def signed_release(
    view_id: str,
    revision: int,
    files: Mapping[str, bytes],
    key: Ed25519PrivateKey,
    *,
    published_at: datetime,
    expires: datetime,
    archive: bytes | None = None,
) -> tuple[bytes, bytes]:
    """(manifest, package) of revision `revision` of view `view_id` holding `files`, signed
    with `key` as a provider would (`archive` stands for the package when given)."""
    from memsync.views.archive import write_zip  # noqa: PLC0415 (views load when used)
    from memsync.views.manifest import build_signed, sign_manifest  # noqa: PLC0415

    package = write_zip(files) if archive is None else archive
    signed = build_signed(
        view_id,
        revision,
        len(package),
        hashlib.sha256(package).hexdigest(),
        {path: hashlib.sha256(data).hexdigest() for path, data in files.items()},
        published_at=published_at,
        expires=expires,
    )
    return sign_manifest(signed, [key]), package
