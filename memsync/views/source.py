"""The view source interface: where one view's signed manifest and package come from.

A consumer (`views pull`, `views verify`) asks a `ViewSource` two things and judges the
answers itself, the same way for every source:

1. `manifest(etag=…)`: the current manifest bytes, or "unchanged" when the `etag` an earlier
   answer carried still names it (an HTTP `304`). A source with no manifest at all (an
   unsigned share) answers `body=None`; whether that is acceptable is the consumer's call.
2. `package(dest, …)`: the package archive, written to `dest` only once complete, never
   more than the cap (`limits.max_archive`, or the manifest's declared length when given),
   with its length and SHA-256. A Git share of the same answer is read at the same commit.

Every failure is a `SourceError` whose `kind` says what happened (`timeout` at the
deadline, `too-large` over a cap, `not-found`, `protocol` for an answer no consumer should
read, `connection`…); nothing is left at `dest` or beside it. Nothing a source says is
trusted: signatures, revisions, hashes and the package's contents are checked afterwards by
`verify_manifest` and `consumer.check_package`.

Implementations: `httpsource.HttpSource` (a hub or a static host, on the HTTP box),
`gitsource.GitSource` (a Git share, on the git box) and `dirsource.DirSource` (a static
export in a local directory). `tests/integration/test_view_sources.py` is the contract
every source passes.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from memsync.atomicfile import fsync_dir
from memsync.errors import ProblemError
from memsync.transports.httpkind import ErrorKind
from memsync.transports.process import Deadline
from memsync.validators.problems import Problem
from memsync.views.archive import ArchiveLimits

__all__ = [
    "ErrorKind",
    "ManifestFetch",
    "PackageFetch",
    "PackageSink",
    "SourceError",
    "ViewSource",
    "package_cap",
    "package_sink",
]


class SourceError(ProblemError):
    """A source could not answer; `kind` says how, `problems` name hostile content. A
    source that could not be reached has none; one that sent more than a cap allows
    (`too_large`) always carries its `too-large` problem."""

    needs_problems = False

    def __init__(self, kind: ErrorKind, message: str, problems: Sequence[Problem] = ()) -> None:
        if kind is ErrorKind.TOO_LARGE and not problems:
            problems = [Problem("too-large", None, None, message)]
        super().__init__(message, problems)
        self.kind = kind


@dataclass(frozen=True)
class ManifestFetch:
    """`unchanged`: the `etag` asked with still names the current manifest (no body).

    Otherwise `body` is the manifest (None: the source holds none) and `etag` what to ask
    with next time (None: the source cannot say "unchanged")."""

    body: bytes | None
    etag: str | None
    unchanged: bool = False


@dataclass(frozen=True)
class PackageFetch:
    """A package archive written whole to the `dest` asked for."""

    length: int
    sha256: str


class ViewSource(Protocol):
    """One view's manifest and package, wherever they are published."""

    @property
    def label(self) -> str:
        """What the source is, for messages: "the view server", "the Git share"…"""
        ...

    async def manifest(self, *, etag: str | None, deadline: Deadline) -> ManifestFetch:
        """The current manifest, or `unchanged` when `etag` still names it."""
        ...

    async def package(
        self,
        dest: Path,
        *,
        limits: ArchiveLimits,
        expected_length: int | None,
        deadline: Deadline,
    ) -> PackageFetch:
        """The package the last `manifest` answer describes, written to `dest`."""
        ...


def package_cap(limits: ArchiveLimits, expected_length: int | None) -> int:
    """The most bytes a package may have: the archive cap, or less when a manifest says so."""
    if expected_length is None:
        return limits.max_archive
    return min(limits.max_archive, expected_length)


def too_large(label: str, cap: int) -> SourceError:
    return SourceError(ErrorKind.TOO_LARGE, f"{label}: the package is over {cap} bytes")


def timed_out(label: str) -> SourceError:
    return SourceError(ErrorKind.TIMEOUT, f"{label}: no time left before the deadline")


class PackageSink:
    """A temp file beside `dest` that becomes `dest` (fsynced, renamed) only when complete.

    Blocking: used from a worker thread. Local write failures are `storage` errors;
    anything but `commit` leaves nothing behind.
    """

    def __init__(self, dest: Path, cap: int, label: str) -> None:
        self.dest, self.cap, self.label = dest, cap, label
        self.length = 0
        self._digest = hashlib.sha256()
        self._tmp: Path | None = None
        with self._local():
            fd, name = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".part", dir=dest.parent)
        self._tmp = Path(name)
        self._file: IO[bytes] = os.fdopen(fd, "wb")

    @contextmanager
    def _local(self) -> Iterator[None]:
        try:
            yield
        except OSError as exc:
            detail = exc.strerror or type(exc).__name__
            raise SourceError(
                ErrorKind.STORAGE, f"{self.label}: cannot write the package ({detail})"
            ) from exc

    def write(self, chunk: bytes) -> None:
        if self.length + len(chunk) > self.cap:
            raise too_large(self.label, self.cap)
        self.length += len(chunk)
        self._digest.update(chunk)
        with self._local():
            self._file.write(chunk)

    def commit(self) -> PackageFetch:
        with self._local():
            with self._file:
                self._file.flush()
                os.fsync(self._file.fileno())
            if self._tmp is not None:
                self._tmp.replace(self.dest)
                self._tmp = None
            fsync_dir(self.dest.parent)
        return PackageFetch(self.length, self._digest.hexdigest())

    def discard(self) -> None:
        self._file.close()
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
            self._tmp = None


@contextmanager
def package_sink(dest: Path, cap: int, label: str) -> Iterator[PackageSink]:
    """A `PackageSink` that is discarded unless the block commits it."""
    sink = PackageSink(dest, cap, label)
    try:
        yield sink
    finally:
        sink.discard()
