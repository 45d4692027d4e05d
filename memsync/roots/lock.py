"""The cross-process root lock: one operation per root across the daemon and CLI runs.

An exclusive `flock` on `<state_dir>/roots/<root>/lock`. The kernel releases it when the
holder dies, so a killed process never leaves a root locked. The holder's pid is written
into the file only to explain who holds it.
"""

from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from types import TracebackType

from memsync.atomicfile import private_dir
from memsync.errors import LockBusy

_POLL = 0.05


class RootLock:
    def __init__(self, path: Path, *, wait: float | None = None, label: str = "root") -> None:
        """`wait`: seconds to wait for the lock; 0 for a try-once; None waits forever."""
        self.path = path
        self.wait = wait
        self.label = label
        self._fd: int | None = None

    def acquire(self) -> None:
        private_dir(self.path.parent)
        fd = _above_std(os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600))
        deadline = None if self.wait is None else time.monotonic() + self.wait
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    holder = _read_holder(fd)
                    os.close(fd)
                    who = f" (pid {holder})" if holder else ""
                    raise LockBusy(
                        f"{self.label} is busy: another memsync operation holds it{who}",
                        holder=holder,
                    ) from None
                time.sleep(_POLL)  # waiting on another process; there is no event to await
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def hand_over(self) -> None:
        """After a fork: the child keeps the lock (the open file it inherited) and releases
        it when it is done or dies; this process forgets it without unlocking it (`flock`
        belongs to the open file, which both processes share until one unlocks it)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def mark_holder(self) -> None:
        """Name this process (a child the lock was handed to) as the holder in the file."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def __enter__(self) -> RootLock:
        self.acquire()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()


def _above_std(fd: int) -> int:
    """`fd`, or a copy above the standard streams when it took one's number (a process
    started with stdin closed): a child that points 0-2 at the null device
    (`packs.fold_behind`) must not close the lock with them."""
    if fd > 2:
        return fd
    try:
        return fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    finally:
        os.close(fd)


def _read_holder(fd: int) -> str | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return text or None
