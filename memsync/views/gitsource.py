"""A view published in a Git share: `<path>/manifest.json` and `<path>/package/` on a branch.

Everything runs on the git box (`transports/git.py`: clean environment, object checking,
the caller's deadline) in a worker thread, against a private bare cache repository.
`manifest` fetches the branch and pins the commit; `package` reads that same commit, so a
manifest and its package always come from one snapshot. The ETag is the manifest's blob
id: an unchanged blob answers "unchanged" without being read.

A share is hostile until checked: only regular files (mode 100644) may be in `package/`,
no name may be listed twice, the manifest must be a regular file under the manifest cap,
and the package's blobs are never read when together they are over the archive's total
cap. The files are then packed with the publisher's own deterministic `write_zip`, so the
archive's hash is the one a signed manifest names, and go through the same consumer check
as a download.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from memsync.atomicfile import private_dir
from memsync.errors import GitError, GitTimeout
from memsync.progress import NO_PROGRESS, Progress
from memsync.transports.git import FetchOutcome, Git
from memsync.transports.process import Deadline
from memsync.validators.problems import Problem
from memsync.validators.tree import Entry, Listing
from memsync.views.archive import ArchiveError, ArchiveLimits, write_zip
from memsync.views.manifest import MAX_MANIFEST_BYTES
from memsync.views.source import (
    ErrorKind,
    ManifestFetch,
    PackageFetch,
    SourceError,
    package_cap,
    package_sink,
    timed_out,
)
from memsync.views.zipscan import problem as archive_problem

MANIFEST = "manifest.json"
PACKAGE_DIR = "package/"
_FETCH_KINDS = {
    FetchOutcome.MISSING_BRANCH: ErrorKind.NOT_FOUND,
    FetchOutcome.UNREACHABLE: ErrorKind.CONNECTION,
    FetchOutcome.BAD_OBJECTS: ErrorKind.PROTOCOL,
}


@dataclass(frozen=True)
class _Snapshot:
    """What one fetch found under the share's path."""

    manifest: Entry | None
    package: dict[str, Entry]  # relative to package/


class GitSource:
    """The share at `path` on `branch` of `url`; `cache` is a private directory for the
    bare repository the branch is fetched into (created on first use)."""

    label = "the Git share"

    def __init__(
        self, url: str, branch: str, path: str, cache: Path, progress: Progress = NO_PROGRESS
    ) -> None:
        """`progress` is shown git's fetch of the branch."""
        self.url, self.branch = url, branch
        self.progress = progress
        self.base = path.strip("/")
        self.cache = cache
        self._ref = f"refs/heads/{branch}"
        self._snapshot: _Snapshot | None = None

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

    # -- blocking work (worker threads) -------------------------------------------------

    def _git(self, deadline: Deadline) -> Git:
        if deadline.expired():
            raise timed_out(self.label)
        git = Git(self.cache, deadline=deadline)
        if not (self.cache / "HEAD").exists():
            private_dir(self.cache)
            with _boxed():
                git.init(bare=True)
        return git

    def _manifest(self, etag: str | None, deadline: Deadline) -> ManifestFetch:
        git = self._git(deadline)
        with _boxed():
            outcome, detail = git.fetch(self.url, self.branch, self._ref, progress=self.progress)
        if outcome is not FetchOutcome.OK:
            raise SourceError(
                _FETCH_KINDS[outcome],
                f"the Git share could not be fetched: {detail.strip()[-200:]}",
            )
        snapshot = self._snapshot = self._read_listing(git)
        entry = snapshot.manifest
        if entry is None or entry.oid is None:
            return ManifestFetch(None, None)
        tag = f'"git-blob:{entry.oid}"'
        if tag == etag:
            return ManifestFetch(None, tag, unchanged=True)
        with _boxed():
            blob = git.read_blobs([entry.oid])[entry.oid]
        return ManifestFetch(blob, tag)

    def _read_listing(self, git: Git) -> _Snapshot:
        tree = self._tree(git)
        if tree is None:
            text = f"the Git share has no directory '{self.base}' on {self.branch}"
            raise SourceError(ErrorKind.NOT_FOUND, text)
        with _boxed():
            listing = git.ls_tree(tree)
        duplicates = listing.duplicates if isinstance(listing, Listing) else ()
        if duplicates:
            text = f"the Git share lists '{duplicates[0]}' more than once"
            raise SourceError(
                ErrorKind.PROTOCOL, text, [Problem("duplicate-entry", duplicates[0], None, text)]
            )
        manifest = listing.get(MANIFEST)
        if manifest is not None:
            if not manifest.is_regular:
                text = f"the Git share's {MANIFEST} is not a file"
                raise SourceError(
                    ErrorKind.PROTOCOL, text, [Problem("special-file", MANIFEST, None, text)]
                )
            if manifest.size is None or manifest.size > MAX_MANIFEST_BYTES:
                text = f"the Git share's {MANIFEST} is over {MAX_MANIFEST_BYTES} bytes"
                raise SourceError(ErrorKind.TOO_LARGE, text)
        package: dict[str, Entry] = {}
        for path, entry in listing.items():
            if not path.startswith(PACKAGE_DIR):
                continue
            rel = path[len(PACKAGE_DIR) :]
            if entry.mode != 0o100644 or entry.oid is None:
                raise SourceError(
                    ErrorKind.PROTOCOL,
                    "the Git share holds a non-regular file",
                    [Problem("archive-invalid", rel, None, f"'{rel}' is not a regular file")],
                )
            package[rel] = entry
        return _Snapshot(manifest, package)

    def _tree(self, git: Git) -> str | None:
        """The tree at the share's path in the fetched commit, None when there is none."""
        oid: str | None = self._ref
        if self.base:  # `<ref>:<path>` names what is there; only a tree will do
            oid = self._rev_parse(git, f"{self._ref}:{self.base}")
        return self._rev_parse(git, f"{oid}^{{tree}}") if oid is not None else None

    @staticmethod
    def _rev_parse(git: Git, name: str) -> str | None:
        with _boxed():
            return git.object_id(name)

    def _package(
        self, dest: Path, limits: ArchiveLimits, expected_length: int | None, deadline: Deadline
    ) -> PackageFetch:
        git = self._git(deadline)
        snapshot = self._snapshot or self._read_listing(git)
        total = sum(entry.size or 0 for entry in snapshot.package.values())
        if total > limits.max_total:  # refused before a byte of it is read
            why = f"would hold {total} bytes, over the {limits.max_total}-byte cap"
            raise SourceError(
                ErrorKind.PROTOCOL,
                "the Git share's package was refused",
                [archive_problem(None, why)],
            )
        with _boxed():
            blobs = git.read_blobs([e.oid for e in snapshot.package.values() if e.oid])
        files = {rel: blobs[entry.oid] for rel, entry in snapshot.package.items() if entry.oid}
        try:
            archive = write_zip(files, limits)
        except ArchiveError as exc:
            text = "the Git share's package was refused"
            raise SourceError(ErrorKind.PROTOCOL, text, exc.problems) from exc
        cap = package_cap(limits, expected_length)
        with package_sink(dest, cap, self.label) as sink:
            sink.write(archive)
            return sink.commit()


@contextmanager
def _boxed() -> Iterator[None]:
    """The git box's failures as `SourceError`s (a timeout keeps its kind)."""
    try:
        yield
    except GitTimeout as exc:
        raise SourceError(ErrorKind.TIMEOUT, exc.message) from exc
    except GitError as exc:
        raise SourceError(ErrorKind.PROTOCOL, exc.message) from exc
