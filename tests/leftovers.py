"""Processes a test left behind (issue 20, item 11): found, ended, and blamed on that test.

The test process makes itself a child subreaper (Linux `PR_SET_CHILD_SUBREAPER`): a process
whose parent exits is reparented to it instead of to init, so whatever a test started, however
deep and however detached (`setsid`, a killed daemon's agent, a double fork), is still its
child when the test ends. Children that were there before the test (session fixtures) are not
the test's. A finished orphan (a zombie) is reaped silently; a live one is given a short grace
to finish, then killed with its process group and reported.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
GRACE = 3.0  # seconds a leftover gets to finish on its own (a detached `git gc`, an exit)


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants; False where unsupported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


@dataclass(frozen=True)
class Child:
    pid: int
    state: str
    pgid: int
    command: str


def _child(pid: int) -> Child | None:
    # Every test scans every process twice: read a stranger's stat alone, raw (its parent is
    # there), and the command line only of a child of ours.
    try:
        fd = os.open(f"/proc/{pid}/stat", os.O_RDONLY)
    except OSError:
        return None
    try:
        stat = os.read(fd, 4096).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)
    # pid (comm) state ppid pgrp ...: comm may hold spaces and parentheses; split after the last ')'
    fields = stat[stat.rindex(")") + 2 :].split()
    if int(fields[1]) != os.getpid():
        return None
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    command = raw.replace(b"\0", b" ").decode(errors="replace").strip() or stat.split(" ", 2)[1]
    return Child(pid, fields[0], int(fields[2]), command[:200])


def children() -> dict[int, Child]:
    """This process's children now, by pid (zombies included)."""
    out = {}
    for pid in _candidates():
        child = _child(pid)
        if child is not None:
            out[child.pid] = child
    return out


def _candidates() -> list[int]:
    """The pids that may be our children: each of our threads' `children` list (what the
    kernel knows; an adopted orphan is listed under the thread it was given to), else, on
    a kernel without those lists, every process (twice per test: that scan cost up to a few
    ms per call on a busy machine)."""
    try:
        tasks = os.listdir(f"/proc/{os.getpid()}/task")
        listed = [Path(f"/proc/{os.getpid()}/task/{tid}/children").read_text() for tid in tasks]
    except OSError:
        listed = None
    if listed is not None:
        return [int(pid) for text in listed for pid in text.split()]
    return [int(entry.name) for entry in os.scandir("/proc") if entry.name.isdigit()]


def _reap(pid: int) -> None:
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def settle(before: set[int], grace: float = GRACE) -> list[Child]:
    """End what appeared since `before`: reap finished orphans, wait `grace` for live ones,
    then kill those (with their group when it is not ours) and return them."""
    deadline = time.monotonic() + grace
    while True:
        new = [c for pid, c in children().items() if pid not in before]
        for child in new:
            if child.state == "Z":
                _reap(child.pid)
        live = [c for c in new if c.state != "Z"]
        if not live or time.monotonic() >= deadline:
            break
        time.sleep(0.05)
    for child in live:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            if child.pgid not in (os.getpgrp(), 0):
                os.killpg(child.pgid, signal.SIGKILL)
            os.kill(child.pid, signal.SIGKILL)
    for child in live:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(child.pid, 0)
    return live
