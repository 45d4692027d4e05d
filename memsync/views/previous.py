"""The previous import as a source of unchanged files, and making an extracted tree durable.

A new revision of a view usually changes a few files. Its package is checked completely
(`archive.py`), but a member whose compressed stream is byte for byte the one the active
revision's package held (same name, method, CRC and sizes) inflates to the same bytes,
so it is not inflated again: the active import's file is hard-linked into the candidate
instead of being written and fsynced again.

What makes that exact, whatever is on disk:

- the kept package (`imported.zip` in the view's state dir) is used only when its SHA-256
  is the trusted revision's package hash (trust.json): it is the package that was fully
  checked and imported, so each member's inflated bytes hash to what the trusted
  manifest copy (verified to be the trusted revision's) lists for that path;
- the active import's file is opened through directory fds with O_NOFOLLOW and
  O_NONBLOCK from the import directory (a package name never reaches outside it: names
  were checked before), must be a regular file of ours with mode `file_mode`, one link and
  the member's size, and its bytes must hash to the manifest's SHA-256; the inode that was
  read and hashed, held open meanwhile, is what gets linked (through `/proc/self/fd`, never
  by name: a name can be given another inode between the check and the link), and after
  the link it must have exactly two names. Anything else, and the member is inflated and
  written like any other.

memsync never modifies the active import in place (`store.py`), so sharing its inodes with
the candidate shares bytes that do not change. A process of the same user that writes into
the active import's files changes what the agent reads whether or not they are shared;
such writers are outside the threat model (SECURITY.md: what arrives from outside the
machine is hostile), and `views verify` shows what they did.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from memsync.views.zipscan import Member, read_archive

KEPT_PACKAGE = "imported.zip"  # in the view's state dir; never matches `package*.zip`
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO put in place of a file must not hang the pull (fstat then refuses it).
_OPEN_FILE = (
    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | getattr(os, "O_NOATIME", 0)
)


def _stream(data: bytes, member: Member) -> bytes:
    return data[member.data_start : member.data_start + member.compressed]


@dataclass
class Previous:
    """The active revision's package (`data`, whose SHA-256 must be `sha256`), the trusted
    manifest's file hashes (`files`) and the active import directory (`import_dir`)."""

    data: bytes
    sha256: str
    files: Mapping[str, str]
    import_dir: Path
    members: dict[str, Member] = field(default_factory=dict)
    linked: set[str] = field(default_factory=set)
    _verified: bool | None = None

    @classmethod
    def load(
        cls,
        package: Path,
        *,
        sha256: str | None,
        files: Mapping[str, str] | None,
        import_dir: Path,
        max_archive: int,
        max_entries: int,
    ) -> Previous | None:
        """The kept package if it reads as a clean archive; None when there is nothing to
        reuse from (no trusted hash or file list, no kept package, an unreadable one)."""
        if sha256 is None or not files:
            return None
        try:
            fd = os.open(package, _OPEN_FILE)
        except OSError:
            return None
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                return None
            data = _read_up_to(fd, max_archive + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        if len(data) > max_archive:
            return None
        members, problems = read_archive(data, max_entries)
        if problems:
            return None
        by_name = {m.name: m for m in members if not m.is_dir}
        return cls(data, sha256, dict(files), import_dir, by_name)

    def same(self, data: bytes, member: Member) -> str | None:
        """The SHA-256 `member` (of the archive `data`, already checked) inflates to, when
        its compressed stream is the kept package's for the same name; else None."""
        old = self.members.get(member.name)
        want = self.files.get(member.name)
        if old is None or want is None or member.is_dir:
            return None
        shape = (old.method, old.crc, old.size, old.compressed)
        if shape != (member.method, member.crc, member.size, member.compressed):
            return None
        if self._verified is None:  # hashed once, only when some member could be reused
            self._verified = hashlib.sha256(self.data).hexdigest() == self.sha256
        if not self._verified or _stream(self.data, old) != _stream(data, member):
            return None
        return want

    def link(self, name: str, want: str, size: int, dir_fd: int, mode: int) -> bytes | None:
        """Hard-link the active import's `name` as the leaf of `name` under `dir_fd` when it
        holds exactly the `size` bytes hashing to `want` (returned); None otherwise (and
        nothing is left under `dir_fd`)."""
        parts = name.split("/")
        try:
            parent = os.open(self.import_dir, _OPEN_DIR)
        except OSError:
            return None
        try:
            for part in parts[:-1]:
                inner = os.open(part, _OPEN_DIR, dir_fd=parent)
                os.close(parent)
                parent = inner
            data = self._link_from(parent, parts[-1], want, size, dir_fd, mode)
        except OSError:
            return None
        finally:
            os.close(parent)
        if data is not None:
            self.linked.add(name)
        return data

    def _link_from(
        self, parent: int, leaf: str, want: str, size: int, dir_fd: int, mode: int
    ) -> bytes | None:
        fd = os.open(leaf, _OPEN_FILE, dir_fd=parent)
        try:
            st = os.fstat(fd)
            if not _reusable(st, size, mode):
                return None
            data = _read_exactly(fd, size)
            if data is None or hashlib.sha256(data).hexdigest() != want:
                return None
            # The inode just hashed, by its descriptor: linkat(AT_SYMLINK_FOLLOW) on the
            # /proc link names the open file itself, whatever its name now points to.
            os.link(f"/proc/self/fd/{fd}", leaf, dst_dir_fd=dir_fd, follow_symlinks=True)
            made = os.fstat(fd)
        finally:
            os.close(fd)
        try:
            here = os.stat(leaf, dir_fd=dir_fd, follow_symlinks=False)
            ours = (here.st_dev, here.st_ino) == (st.st_dev, st.st_ino) and made.st_nlink == 2
        except OSError:
            ours = False
        if not ours:  # another name appeared meanwhile: write the member instead
            os.unlink(leaf, dir_fd=dir_fd)
            return None
        return data


def _reusable(st: os.stat_result, size: int, mode: int) -> bool:
    return (
        stat.S_ISREG(st.st_mode)
        and stat.S_IMODE(st.st_mode) == mode
        and st.st_nlink == 1
        and st.st_size == size
        and st.st_uid == os.geteuid()
    )


def _read_up_to(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    left = limit
    while left > 0:
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    left = size + 1  # one more byte than expected shows a file that grew
    while left > 0:
        chunk = os.read(fd, left)
        if not chunk:
            break
        chunks.append(chunk)
        left -= len(chunk)
    data = b"".join(chunks)
    return data if len(data) == size else None


def sync_tree(top: Path, linked: Collection[str] = ()) -> None:
    """fsync every file, then every directory, of the tree at `top` (which we made: no
    links are followed). Writing everything first and syncing afterwards lets the kernel
    write the data out together instead of one file per round trip. Files `linked` from
    the previous import (relative paths) hold bytes that are durable already: only their
    new names are, with their directories."""
    fds: list[int] = []
    try:
        fds.append(os.open(top, _OPEN_DIR))
        prefixes = [""]
        index = 0
        while index < len(fds):
            fd, prefix = fds[index], prefixes[index]
            index += 1
            for entry in os.scandir(fd):
                if entry.is_dir(follow_symlinks=False):
                    fds.append(os.open(entry.name, _OPEN_DIR, dir_fd=fd))
                    prefixes.append(f"{prefix}{entry.name}/")
                elif prefix + entry.name not in linked:
                    _fsync_at(fd, entry.name)  # a symlink fails (ELOOP): we never make one
        for fd in fds:
            os.fsync(fd)
    finally:
        for fd in fds:
            os.close(fd)


def _fsync_at(dir_fd: int, name: str) -> None:
    fd = os.open(name, _OPEN_FILE, dir_fd=dir_fd)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class Syncer:
    """`sync_tree(top)` in a worker thread (fsync waits on the disk without the GIL), so
    the package is validated meanwhile; `wait()` returns once the tree is durable and
    raises the OSError the sync met."""

    def __init__(self, top: Path, linked: Collection[str] = ()) -> None:
        self._error: OSError | None = None
        self._thread = threading.Thread(target=self._run, args=(top, linked), daemon=True)
        self._thread.start()

    def _run(self, top: Path, linked: Collection[str]) -> None:
        try:
            sync_tree(top, linked)
        except OSError as exc:
            self._error = exc

    def wait(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise self._error
