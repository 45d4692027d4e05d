"""Reading a small file memsync was pointed at (the config, a secret file, the memo).

Standard library only. A configured path may name anything: a FIFO whose `open` would wait
forever for a writer (a SIGHUP reload that never returns), a device, a directory, a huge
file. `read_regular` opens only a regular file (symbolic links are followed: a linked
config is ordinary), never blocks while opening, checks the opened descriptor again (the
name may be swapped between the look and the open) and reads at most `limit + 1` bytes,
so the caller can tell "too large" from "exactly the limit".
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

_FLAGS = os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


class NotRegularFile(OSError):
    """The path names something other than a regular file; `kind` says what."""

    def __init__(self, path: Path, kind: str) -> None:
        super().__init__(f"{path} is {kind}, not a regular file")
        self.kind = kind
        self.strerror = f"it is {kind}, not a regular file"


def kind_of(mode: int) -> str:
    """`a FIFO`, `a directory`, ...: what a mode names, for a person."""
    kinds = (
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISLNK, "a symbolic link"),
    )
    return next((name for test, name in kinds if test(mode)), "a special file")


def read_regular(path: Path, limit: int) -> bytes:
    """At most `limit + 1` bytes of the regular file at `path` (following links).

    Raises FileNotFoundError, NotRegularFile, or the OSError of the open or read.
    """
    before = path.stat()
    if not stat.S_ISREG(before.st_mode):  # refused before opening: no device is touched
        raise NotRegularFile(path, kind_of(before.st_mode))
    fd = os.open(path, _FLAGS)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, kind_of(mode))
        chunks: list[bytes] = []
        size = 0
        while size <= limit and (chunk := os.read(fd, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)
