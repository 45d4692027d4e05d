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
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
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


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    seconds: float,
    input: bytes | None = None,
) -> Completed:
    """Run `argv` to completion or until `seconds` pass (then its whole group is killed).

    FileNotFoundError propagates when the program does not exist; the caller names it.
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
        out, err = proc.communicate(input)
    except BaseException:
        kill_group(proc)
        proc.communicate()
        raise
    finally:
        ticket.done = True
    return Completed(proc.returncode, out, err, ticket.expired)


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
