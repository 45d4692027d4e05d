"""The daemon's configuration, validated in a short child process (issue 18).

The schema (pydantic, ~10 MB resident once loaded) decides what a configuration file
loads into; a daemon runs for months and would hold it all that time. So when the file's
current bytes are not in the settings memo (`config.settingsmemo`), the daemon hands them
to a child that runs the very load every command runs and writes the memo; the daemon then
recalls them from the memo (`App.settings`), and its memory is returned when the child
exits. At start-up, while the daemon is one thread, the child is a fork of it: it has the
interpreter and the daemon's modules already and loads only the schema (about half the CPU
of a new interpreter, ~0.12 s at every start). Later (a reload, with the daemon's threads
running) it is `python -m memsync.daemon.configcheck PATH`, a new interpreter.

The memo decides nothing the schema would not (it is written only after a full load, and
only when reading it back gives equal settings); whenever the child's way does not give
settings (no cache directory, a secret written inline, which the memo never holds, the
child failing to start), `App.settings` loads the file in the daemon itself, as before. A
file the schema refuses gives the daemon the child's `ConfigError` (its message, hint,
problems and source, the same the daemon would have made; a reload logs them), or, for any
other error, the daemon's own load makes it.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import select
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from memsync.config import settingsmemo
from memsync.config.paths import MAX_CONFIG_BYTES, read_config
from memsync.configproblem import Located
from memsync.errors import ConfigError
from memsync.transports.process import run_process

if TYPE_CHECKING:
    from memsync.config.model import Settings

log = logging.getLogger(__name__)

CHILD_TIMEOUT = 120.0  # seconds: a schema load takes well under one
MAX_ANSWER = 4 * 1024 * 1024  # the child's error document (its problems, each bounded)
REFUSED = 2  # the child's exit status when the schema refused the file (JSON on stdout)


class App(Protocol):
    """What loads the configuration for the daemon (the command line's app context, above
    this layer: it passes itself in)."""

    def config_file(self) -> Path: ...

    def settings(self) -> Settings: ...


def daemon_settings(app: App) -> Settings:
    """`app.settings()`, with the schema run in a child when these bytes have no memo."""
    path = app.config_file()
    raw = read_config(path)
    if settingsmemo.recall(path, raw) is None:
        refusal = check_in_child(path, raw)
        if refusal is not None:
            raise refusal
    return app.settings()


def check_in_child(path: Path, raw: bytes, *, fork: bool | None = None) -> ConfigError | None:
    """Validate `raw` (the bytes of `path`) in a child, which memoizes the settings: the
    `ConfigError` the schema raised, or None (then `App.settings` recalls or loads).

    The child is a fork of this process when `fork`, or by default when this process runs
    one thread (a fork copies no other thread, nor any lock one might hold); else a new
    interpreter."""
    if fork is None:
        fork = threading.active_count() == 1
    answer = _forked(path, raw) if fork else _spawned(path, raw)
    if answer is None:
        return None
    try:
        return _error(json.loads(answer))
    except (ValueError, TypeError, KeyError):
        return None


def _spawned(path: Path, raw: bytes) -> bytes | None:
    """`python -m memsync.daemon.configcheck PATH` on `raw`: its refusal, or None."""
    try:
        done = run_process(
            [sys.executable, "-m", "memsync.daemon.configcheck", str(path)],
            # The daemon's own directory and environment: the load must see what the
            # daemon's would (a relative --config, `~`, $XDG_*: the memo's key holds them).
            cwd=Path.cwd(),
            env=os.environ,
            seconds=CHILD_TIMEOUT,
            input=raw,
            keep=MAX_ANSWER,
        )
    except OSError as exc:
        log.debug("configuration check in a child failed (%s); loading here", exc)
        return None
    if done.expired or done.returncode != REFUSED or (done.stdout_total or 0) > MAX_ANSWER:
        return None
    return done.stdout


def _forked(path: Path, raw: bytes) -> bytes | None:
    """`_check` in a fork of this process (its directory and environment are the daemon's):
    its refusal, or None. The child answers on a pipe, within CHILD_TIMEOUT and MAX_ANSWER,
    and leaves by `os._exit` (nothing of the daemon's runs or is flushed in it)."""
    read_end, write_end = os.pipe()
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_end)
        os.close(write_end)
        log.debug("configuration check in a child failed (%s); loading here", exc)
        return None
    if pid == 0:  # pragma: no cover - the child (coverage does not follow a fork)
        code = 1
        try:
            os.close(read_end)
            quiet = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):  # what the load might print goes nowhere, as before
                os.dup2(quiet, fd)
            gc.freeze()  # the daemon's objects are not walked (their pages stay shared)
            code, said = _check(path, raw)
            with os.fdopen(write_end, "wb") as out:
                out.write(said.encode())
        finally:
            os._exit(code)
    os.close(write_end)
    answer: bytes | None = None
    try:
        answer = _read(read_end, time.monotonic() + CHILD_TIMEOUT)
    finally:
        os.close(read_end)
        if answer is None:  # late or too long: it is not waited for
            os.kill(pid, signal.SIGKILL)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    return answer if code == REFUSED else None


def _read(fd: int, deadline: float) -> bytes | None:
    """All of `fd` until its end, or None past `deadline` or MAX_ANSWER bytes."""
    chunks: list[bytes] = []
    total = 0
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not poller.poll(left * 1000):
            return None
        chunk = os.read(fd, 65536)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > MAX_ANSWER:
            return None


def _error(data: Any) -> ConfigError:
    problems = [
        Located(str(p["location"]), str(p["message"]), _line(p["line"])) for p in data["problems"]
    ]
    hint, source = data["hint"], data["source"]
    return ConfigError(
        str(data["message"]),
        problems=problems,
        source=source if isinstance(source, str) else None,
        hint=hint if isinstance(hint, str) else None,
    )


def _line(value: object) -> int | None:
    return value if type(value) is int else None


def _document(exc: ConfigError) -> dict[str, Any]:
    return {
        "message": exc.message,
        "hint": exc.hint,
        "source": exc.source,
        "problems": [
            {"location": p.location, "message": p.message, "line": p.line} for p in exc.problems
        ],
    }


def _check(path: Path, raw: bytes) -> tuple[int, str]:
    """Load `raw` as the file `path`, memoize the settings: 0 and "" when they loaded (the
    memo written when it can be), REFUSED and the `ConfigError` as JSON when the schema
    refused them (only that exact class: any other error is the daemon's own load to
    make, 1)."""
    from memsync.config.load import load_config_bytes  # noqa: PLC0415 - pydantic, here only
    from memsync.config.model import settings_from  # noqa: PLC0415

    try:
        settings = settings_from(load_config_bytes(raw, path), path)
    except ConfigError as exc:
        if type(exc) is not ConfigError:
            return 1, ""
        return REFUSED, json.dumps(_document(exc))
    settingsmemo.remember(path, raw, settings)
    return 0, ""


def main(argv: list[str]) -> int:
    """The spawned child: `_check` the bytes on stdin as the file `argv[0]`; its answer
    on stdout."""
    code, answer = _check(Path(argv[0]), sys.stdin.buffer.read(MAX_CONFIG_BYTES + 1))
    sys.stdout.write(answer)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
