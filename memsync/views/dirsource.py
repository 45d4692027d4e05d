"""A view exported to a local directory: `<dir>/manifest` and `<dir>/package`.

The static layout `views build` writes (`OUT/v1/views/<id>/`), read from a disk, a mount or
a synced folder. Reads run in a worker thread, with the same caps and deadline as a
download: each file is opened without blocking and must be a regular file (a FIFO or a
device would stall or never end), is read in chunks up to its cap, and the deadline is
checked between chunks. The ETag is the manifest's SHA-256, as the hub's is.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memsync.transports.process import Deadline
from memsync.validators.problems import Problem
from memsync.views.archive import ArchiveLimits
from memsync.views.manifest import MAX_MANIFEST_BYTES
from memsync.views.source import (
    ErrorKind,
    ManifestFetch,
    PackageFetch,
    SourceError,
    package_cap,
    package_sink,
    timed_out,
    too_large,
)

MANIFEST = "manifest"
PACKAGE = "package"
CHUNK = 256 * 1024


class DirSource:
    """The view exported at `directory`."""

    label = "the view directory"

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    async def manifest(self, *, etag: str | None, deadline: Deadline) -> ManifestFetch:
        return await asyncio.to_thread(self._manifest, etag, deadline)

    async def package(
        self,
        dest: Path,
        *,
        limits: ArchiveLimits,
        expected_length: int | None,
        deadline: Deadline,
    ) -> PackageFetch:
        return await asyncio.to_thread(self._package, dest, limits, expected_length, deadline)

    def _manifest(self, etag: str | None, deadline: Deadline) -> ManifestFetch:
        if deadline.expired():
            raise timed_out(self.label)
        if not self.directory.is_dir():
            text = f"{self.label} {self.directory} does not exist"
            raise SourceError(ErrorKind.NOT_FOUND, text)
        body = bytearray()
        try:
            with self._open(MANIFEST) as fd:
                for chunk in self._chunks(fd, MAX_MANIFEST_BYTES, deadline):
                    body += chunk
        except FileNotFoundError:
            return ManifestFetch(None, None)  # an unsigned export: the consumer decides
        tag = f'"sha256:{hashlib.sha256(body).hexdigest()}"'
        if tag == etag:
            return ManifestFetch(None, tag, unchanged=True)
        return ManifestFetch(bytes(body), tag)

    def _package(
        self, dest: Path, limits: ArchiveLimits, expected_length: int | None, deadline: Deadline
    ) -> PackageFetch:
        if deadline.expired():
            raise timed_out(self.label)
        cap = package_cap(limits, expected_length)
        try:
            with self._open(PACKAGE) as fd, package_sink(dest, cap, self.label) as sink:
                for chunk in self._chunks(fd, cap, deadline):
                    sink.write(chunk)
                return sink.commit()
        except FileNotFoundError as exc:
            text = f"{self.label} {self.directory} holds no {PACKAGE}"
            raise SourceError(ErrorKind.NOT_FOUND, text) from exc

    @contextmanager
    def _open(self, name: str) -> Iterator[int]:
        """A regular file of the directory, opened read-only without blocking on a FIFO;
        FileNotFoundError when it is absent, `SourceError` for anything but a file."""
        path = self.directory / name
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            raise
        except OSError as exc:
            raise self._unreadable(name, exc) from exc
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                text = f"{self.label}'s {name} is not a regular file"
                raise SourceError(
                    ErrorKind.PROTOCOL, text, [Problem("special-file", name, None, text)]
                )
            yield fd
        finally:
            os.close(fd)

    def _chunks(self, fd: int, cap: int, deadline: Deadline) -> Iterator[bytes]:
        """The file's bytes in chunks; `too-large` past `cap`, `timeout` at the deadline."""
        if os.fstat(fd).st_size > cap:  # refused before a byte is read
            raise too_large(self.label, cap)
        size = 0
        while True:
            if deadline.expired():
                raise timed_out(self.label)
            try:
                chunk = os.read(fd, min(CHUNK, cap + 1 - size))
            except OSError as exc:
                raise self._unreadable("a file", exc) from exc
            if not chunk:
                return
            size += len(chunk)
            if size > cap:  # it grew while being read
                raise too_large(self.label, cap)
            yield chunk

    def _unreadable(self, name: str, exc: OSError) -> SourceError:
        detail = exc.strerror or type(exc).__name__
        return SourceError(ErrorKind.CONNECTION, f"{self.label}: cannot read {name} ({detail})")
