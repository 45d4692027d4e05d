"""The process box: every child process memsync starts (git, role executors) runs here.

A child gets the environment its caller builds (never the daemon's own), its own process
group, stdin closed unless input is given, and a deadline: one watchdog thread for the
whole process kills the child's entire group (git and its ssh or helper children, an
agent CLI and whatever it spawned) when its time is up. Time is handed down as an absolute
`Deadline`, so a cycle that runs many processes is bounded as a whole, not per process.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Deadline:
    """An absolute point on the monotonic clock; `seconds` is the budget it was made with."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def cap(self, seconds: float | None) -> float:
        """What a step may take: the time left, or less when `seconds` is smaller."""
        left = self.remaining()
        return left if seconds is None else min(left, seconds)


@dataclass(frozen=True)
class Completed:
    returncode: int
    stdout: bytes
    stderr: bytes
    expired: bool  # the deadline passed and the process group was killed
    # How many bytes each output had in all (`stdout`/`stderr` may hold only the last ones).
    stdout_total: int | None = None
    stderr_total: int | None = None


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    seconds: float,
    input: bytes | None = None,
    keep: int | None = None,
    on_start: Callable[[int], None] | None = None,
) -> Completed:
    """Run `argv` to completion or until `seconds` pass (then its whole group is killed).

    With `keep` (a program we do not trust to be quiet or tidy: a role's agent), only the
    last `keep` bytes of each output are held while it runs, and when it exits whatever it
    left running in its group is killed too. FileNotFoundError propagates when the program
    does not exist; the caller names it. `on_start` is told the child's pid once it runs.
    """
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=dict(env),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    # communicate() without a timeout avoids subprocess's polling wait; the watchdog
    # thread enforces the deadline instead.
    ticket = _WATCHDOG.watch(proc, max(seconds, 0.0))
    try:
        if on_start is not None:
            on_start(proc.pid)
        totals: list[int] = []
        if keep is None:
            out, err = proc.communicate(input)
        else:
            out, err = _drain(proc, input, keep, totals)
            # The leader has exited but is not reaped: its group id cannot have been given
            # to anyone else, so this reaches exactly what it left behind.
            os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
            kill_group(proc)
            _WATCHDOG.finish(ticket)  # before the reap frees the id: no late kill reaches it
            proc.wait()
    except BaseException:
        kill_group(proc)
        if keep is None:
            proc.communicate()
        else:
            proc.wait()  # the pipes may be closed already; the group is dead
        raise
    finally:
        ticket.done = True
    return Completed(proc.returncode, out, err, ticket.expired, *(totals or (None, None)))


def _drain(
    proc: subprocess.Popen[bytes], input: bytes | None, keep: int, totals: list[int]
) -> tuple[bytes, bytes]:
    """Feed `input` and read both outputs until they close, holding at most the last
    `keep` (+1, so a cut shows) bytes of each; `totals` gets how many each had."""
    held: dict[int, bytearray] = {}
    counted: dict[int, int] = {}
    pending = memoryview(input or b"")
    with selectors.DefaultSelector() as selector:
        for pipe in (proc.stdout, proc.stderr):
            if pipe is not None:
                held[pipe.fileno()] = bytearray()
                selector.register(pipe.fileno(), selectors.EVENT_READ)
        if proc.stdin is not None:
            if pending:
                os.set_blocking(proc.stdin.fileno(), False)
                selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
            else:
                proc.stdin.close()
        while selector.get_map():
            for key, _events in selector.select():
                fd = key.fd
                if fd not in held:  # stdin
                    try:
                        pending = pending[os.write(fd, pending[:65536]) :]
                    except (BrokenPipeError, BlockingIOError) as exc:
                        if isinstance(exc, BlockingIOError):
                            continue
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(fd)
                        proc.stdin.close()  # type: ignore[union-attr]
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    selector.unregister(fd)
                    continue
                counted[fd] = counted.get(fd, 0) + len(chunk)
                buffer = held[fd]
                buffer += chunk
                if len(buffer) > 2 * (keep + 1):
                    del buffer[: len(buffer) - keep - 1]
    outs = [
        bytes(held.get(p.fileno(), b"")[-(keep + 1) :]) if p else b""
        for p in (proc.stdout, proc.stderr)
    ]
    totals += [counted.get(p.fileno(), 0) if p else 0 for p in (proc.stdout, proc.stderr)]
    for pipe in (proc.stdout, proc.stderr):
        if pipe is not None:
            pipe.close()
    return outs[0], outs[1]


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class _Ticket:
    __slots__ = ("done", "expired", "proc")

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.done = False
        self.expired = False


class _Watchdog:
    """One thread for every deadline in the process (a thread per call costs ~1 ms)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Ticket]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, proc: subprocess.Popen[bytes], seconds: float) -> _Ticket:
        ticket = _Ticket(proc)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._seq), ticket))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="process-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return ticket

    def finish(self, ticket: _Ticket) -> None:
        """Stop watching `ticket` (under the lock the kill is made with)."""
        with self._cond:
            ticket.done = True

    def _loop(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, _, ticket = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                ticket.expired = True
                kill_group(ticket.proc)


_WATCHDOG = _Watchdog()
