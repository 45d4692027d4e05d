"""Record files: the private, bounded, pruned files of the validators' caches on disk.

What the lineage records (`lineagestore.py`), the tree shape records (`shapestore.py`) and
the tree listing records (`listingstore.py`) share: a file is read only when it is a
regular file of ours that no one else may read or write (never through a link) and within
its bound; a directory is used only when it is ours and writable by no one else; the most
recent files are kept, the rest (and the temporary files of crashed writes) removed.
Everything here is best effort: an error is a miss, never a failure of the validation.
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from zlib import crc32

from memsync import atomicfile

TYPE_CHECKING = False  # `typing` is not loaded by a cold sync before its first git (issue 18)
if TYPE_CHECKING:
    from typing import ClassVar, Self

_STALE_TEMP = 3600.0  # seconds after which a temporary file of a crashed write goes


def private(info: os.stat_result, kind: Callable[[int], bool]) -> bool:
    """Of that kind (never a symlink: `lstat`), ours, and writable by no one else."""
    return bool(kind(info.st_mode)) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def private_directory(directory: Path) -> bool:
    """Make `directory` (0700) when missing; whether it is ours alone."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        return private(directory.lstat(), stat.S_ISDIR)
    except OSError:
        return False


def open_private(path: Path, max_bytes: int) -> tuple[int, int] | None:
    """A descriptor of the private (0600 or tighter) regular file of ours at `path`, not
    followed if a link, and its size; None when it is missing, anything else, or larger."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
    except OSError:
        os.close(fd)
        return None
    if not private(info, stat.S_ISREG) or info.st_mode & 0o077 or info.st_size > max_bytes:
        os.close(fd)
        return None
    return fd, info.st_size


def read_private(path: Path, max_bytes: int) -> bytes | None:
    """The bytes of the private file at `path` (see `open_private`), or None."""
    opened = open_private(path, max_bytes)
    if opened is None:
        return None
    fd, size = opened
    try:
        with os.fdopen(fd, "rb") as handle:
            data = handle.read(size + 1)
    except OSError:
        return None
    return data if len(data) == size else None


def read_headed(
    path: Path, max_bytes: int, head: re.Pattern[bytes], version: bytes
) -> tuple[re.Match[bytes], bytes] | None:
    """The private file at `path` (see `read_private`) as its first line's match of `head`
    and the bytes after that line; None unless the line matches and its first group is
    `version` in hex (a record another version of the code wrote is foreign)."""
    data = read_private(path, max_bytes)
    if data is None:
        return None
    newline = data.find(b"\n") + 1
    match = head.fullmatch(data[:newline])
    if match is None or bytes.fromhex(match.group(1).decode()) != version:
        return None
    return match, data[newline:]


def newest(directory: Path, names: re.Pattern[str]) -> list[str]:
    """The names in `directory` that `names` matches, the most recently written first."""
    return [name for name, _ in _newest(directory, names)]


def _newest(directory: Path, names: re.Pattern[str]) -> list[tuple[str, int]]:
    found: list[tuple[int, str, int]] = []
    try:
        for entry in os.scandir(directory):
            if names.fullmatch(entry.name):
                with contextlib.suppress(OSError):
                    info = entry.stat(follow_symlinks=False)
                    found.append((info.st_mtime_ns, entry.name, info.st_size))
    except OSError:
        return []
    return [(name, size) for _, name, size in sorted(found, reverse=True)]


def prune(directory: Path, names: re.Pattern[str], keep: int, max_total: int) -> None:
    """Keep the `keep` most recent files that `names` matches, fewer when they would hold
    more than `max_total` bytes in all (the newest is always kept); drop the temporary files
    (`atomicfile`: `.<name>.<random>.tmp`) of writes that crashed long ago."""
    total = 0
    for number, (name, size) in enumerate(_newest(directory, names)):
        total += size
        if number == 0 or (number < keep and total <= max_total):
            continue
        with contextlib.suppress(OSError):
            (directory / name).unlink(missing_ok=True)
    now = time.time()
    with contextlib.suppress(OSError):
        for entry in os.scandir(directory):
            name = entry.name
            if not (name.startswith(".") and name.endswith(".tmp")):
                continue
            if not names.fullmatch(name[1:].rsplit(".", 2)[0]):
                continue
            with contextlib.suppress(OSError):
                if now - entry.stat(follow_symlinks=False).st_mtime > _STALE_TEMP:
                    (directory / name).unlink(missing_ok=True)


class Store(ABC):
    """A directory of records of one kind (`listingstore`, `shapestore`): one file each,
    whose first line is `<FORMAT> <version> <length> <CRC-32>` (the version a digest of
    the code that writes and checks them: a record another version wrote is foreign). The
    checksum finds damage, which is all a checksum anyone can recompute can find; what a
    record is checked against (a tree id, a listing) is up to its store."""

    FORMAT: ClassVar[bytes]
    NAMES: ClassVar[re.Pattern[str]]  # its records' file names
    KEEP: ClassVar[int]  # records kept (the most recent)
    MAX_RECORD_BYTES: ClassVar[int]
    MAX_TOTAL_BYTES: ClassVar[int]  # all records kept, the newest always

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.version = self.version_digest()
        self._head = re.compile(
            re.escape(self.FORMAT) + rb" ([0-9a-f]{32}) ([0-9]{1,12}) ([0-9a-f]{8})\n"
        )
        self.loads = 0
        self.saves = 0  # records written (full or delta)
        self.deltas = 0  # of which deltas

    @abstractmethod
    def version_digest(self) -> bytes:
        """Names the code that writes and checks a record."""

    @classmethod
    def open(cls, directory: Path) -> Self | None:
        """The store in `directory` (made 0700), or None when it is not ours alone."""
        return cls(directory) if private_directory(directory) else None

    def read(self, path: Path) -> bytes | None:
        """The bytes after the head line of the record at `path` (a private file of ours,
        `read_headed`), when its head is this store's and its length and checksum hold."""
        found = read_headed(path, self.MAX_RECORD_BYTES, self._head, self.version)
        if found is None:
            return None
        match, raw = found
        if len(raw) != int(match.group(2)) or b"%08x" % crc32(raw) != match.group(3):
            return None
        return raw

    def write(self, path: Path, data: bytes) -> bool:
        """Write `data` as the record at `path` (atomically, 0600; a cache: not made
        durable) and prune the store; False when it is over `MAX_RECORD_BYTES`."""
        if len(data) > self.MAX_RECORD_BYTES:
            return False
        head = b"%s %s %d %08x\n" % (
            self.FORMAT,
            self.version.hex().encode(),
            len(data),
            crc32(data),
        )
        atomicfile.write_bytes(path, head + data, durable=False)
        self.saves += 1
        prune(self.directory, self.NAMES, self.KEEP, self.MAX_TOTAL_BYTES)
        return True
