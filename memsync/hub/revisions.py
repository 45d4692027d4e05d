"""Stored view revisions and the rules for publishing them, free of HTTP.

Revisions are immutable: `<data_dir>/views/<id>/revisions/<n>/{manifest,package}`. A
revision directory is written complete under a temporary name and renamed into place,
which is the commit point; an existing revision directory is never replaced. The current
revision of a view is its highest complete revision, so there is no pointer file to tear.
The current revisions (manifest bytes, ETags, package path and hash) are held in memory:
the hot read path answers from there without touching the disk or the database. Another
worker's revision is found by `refresh`/`scan`, which read the disk again.

Publication rules (`RevisionStore.judge`): a revision must be above the current one; the
same revision with the same package is an idempotent retry; the same revision with another
package is `equivocation` and a lower one `rollback` (both answered 409).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memsync.atomicfile import FILE_MODE, fsync_dir, private_dir
from memsync.errors import MemsyncError, ProblemError
from memsync.names import is_name
from memsync.validators.problems import Problem
from memsync.wire.hubanswers import view_entry

if TYPE_CHECKING:  # the manifest's models and cryptography load with the first revision
    from memsync.wire.manifest import Manifest

log = logging.getLogger("memsync.hub")

MANIFEST = "manifest"
PACKAGE = "package"
MAX_JUMP = 1000  # how far past the current revision one upload may go
TMP_PREFIX = ".tmp-"
_OLD_CACHE = 256  # immutable older revisions kept in memory


class RevisionExists(MemsyncError):
    """The revision directory is already there; it is never overwritten."""


class UploadRefused(ProblemError):
    """An upload that no consumer would accept; `problems` say why (answered 422)."""

    def __init__(self, problems: Sequence[Problem], message: str | None = None) -> None:
        super().__init__(message or problems[0].message, problems)
        self.code = problems[0].code


class RevisionConflict(MemsyncError):
    """A publication that would roll the view back or change a published revision."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Revision:
    """One stored revision, with what the read path needs ready to send."""

    view_id: str
    revision: int
    manifest: bytes
    manifest_etag: str  # quoted, `"sha256:<hex of the manifest bytes>"`
    package_path: Path
    package_sha256: str
    package_length: int
    package_etag: str  # quoted, `"sha256:<hex of the package bytes>"`
    published_at: str
    expires: str

    def document(self) -> dict[str, object]:
        """The revision as the hub's view list shows it (a `ViewEntry`'s document)."""
        return view_entry(
            self.view_id,
            self.revision,
            self.published_at,
            self.expires,
            self.package_sha256,
            self.package_length,
            self.manifest_etag,
        )


def etag_of(sha256_hex: str) -> str:
    return f'"sha256:{sha256_hex}"'


class RevisionStore:
    """Stored revisions of every view; empty until `load` (which the server runs once it
    holds the data dir's lock, since it removes unfinished uploads)."""

    def __init__(self, data_dir: Path) -> None:
        self.views_dir = private_dir(data_dir / "views")
        self.upload_dir = private_dir(data_dir / "tmp")
        self._current: dict[str, Revision] = {}
        self._old: dict[tuple[str, int], Revision] = {}

    # -- reading ----------------------------------------------------------------------------

    def load(self) -> None:
        """`clean`, then `scan` (a hub of one process, once it holds the data dir's lock)."""
        self.clean()
        self.scan()

    def clean(self) -> None:
        """Drop unfinished uploads and revisions (only while no worker serves)."""
        for leftover in self.upload_dir.iterdir():
            _remove(leftover)
        for view_dir in self.views_dir.iterdir():
            revisions_dir = view_dir / "revisions"
            if is_name(view_dir.name) and revisions_dir.is_dir():
                for entry in revisions_dir.iterdir():
                    if entry.name.startswith(TMP_PREFIX):
                        _remove(entry)

    def holds_any(self) -> bool:
        """Whether some view holds a stored revision (a directory listing, nothing read)."""
        for view_dir in self.views_dir.iterdir():
            with contextlib.suppress(FileNotFoundError, NotADirectoryError):
                if any(n.name.isdigit() for n in (view_dir / "revisions").iterdir()):
                    return True
        return False

    def scan(self) -> list[Revision]:
        """Read every view's newest revision above the one held; return those now current."""
        found = []
        for view_dir in sorted(self.views_dir.iterdir()):
            if is_name(view_dir.name) and view_dir.is_dir():
                newer = self.refresh(view_dir.name)
                if newer is not None:
                    found.append(newer)
        return found

    def refresh(self, view_id: str) -> Revision | None:
        """Make the view's newest complete revision on disk current if it is above the one
        held (another worker may have stored it); return it if it is now current."""
        held = self._current.get(view_id)
        try:
            names = [p.name for p in (self.views_dir / view_id / "revisions").iterdir()]
        except (FileNotFoundError, NotADirectoryError):
            return None
        numbers = [int(n) for n in names if n.isascii() and n.isdigit() and n == str(int(n))]
        for number in sorted(numbers, reverse=True):
            if held is not None and number <= held.revision:
                return None
            found = self._read(view_id, number)
            if found is not None:
                return found if self.promote(found) else None
        return None

    def current(self, view_id: str) -> Revision | None:
        return self._current.get(view_id)

    def all_current(self) -> list[Revision]:
        return [self._current[name] for name in sorted(self._current)]

    def revision(self, view_id: str, number: int) -> Revision | None:
        """Revision `number` of `view_id` (immutable, so cached once read)."""
        current = self._current.get(view_id)
        if current is not None and current.revision == number:
            return current
        key = (view_id, number)
        hit = self._old.get(key)
        if hit is None:
            hit = self._read(view_id, number)
            if hit is None:
                return None
            if len(self._old) >= _OLD_CACHE:
                self._old.clear()
            self._old[key] = hit
        return hit

    def _read(self, view_id: str, number: int) -> Revision | None:
        from memsync.views.manifest import ManifestError, parse_manifest  # noqa: PLC0415

        directory = self.views_dir / view_id / "revisions" / str(number)
        try:
            data = (directory / MANIFEST).read_bytes()
            length = (directory / PACKAGE).stat().st_size
            manifest = parse_manifest(data)
        except FileNotFoundError:
            return None
        except (OSError, ManifestError) as exc:
            log.warning("skipping unreadable revision %s of view %s: %s", number, view_id, exc)
            return None
        signed = manifest.signed
        if signed.view_id != view_id or signed.revision != number:
            log.warning("skipping revision %s of view %s: its manifest disagrees", number, view_id)
            return None
        return _revision(manifest, data, directory / PACKAGE, length)

    # -- writing ----------------------------------------------------------------------------

    def new_upload(self) -> tuple[int, Path]:
        """An open (fd, path) for an incoming package, removed by the caller when unused."""
        fd, name = tempfile.mkstemp(prefix="upload-", dir=self.upload_dir)
        return fd, Path(name)

    def store(self, manifest: Manifest, manifest_bytes: bytes, package_tmp: Path) -> Revision:
        """Move an uploaded, checked package and its manifest into a new revision directory.

        Blocking (fsyncs): run it off the event loop. `package_tmp` is consumed.
        """
        view_id, number = manifest.signed.view_id, manifest.signed.revision
        revisions_dir = private_dir(self.views_dir / view_id / "revisions")
        final = revisions_dir / str(number)
        if final.exists():
            raise RevisionExists(f"revision {number} of view {view_id} already exists")
        staging = Path(tempfile.mkdtemp(prefix=TMP_PREFIX, dir=revisions_dir))
        try:
            manifest_path = staging / MANIFEST
            fd = os.open(manifest_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, FILE_MODE)
            with os.fdopen(fd, "wb") as handle:
                handle.write(manifest_bytes)
                handle.flush()
                os.fsync(handle.fileno())
            with package_tmp.open("rb") as handle:
                os.fsync(handle.fileno())
            package_tmp.chmod(FILE_MODE)
            package_tmp.replace(staging / PACKAGE)
            fsync_dir(staging)
            if final.exists():
                raise RevisionExists(f"revision {number} of view {view_id} already exists")
            staging.rename(final)
        except BaseException:
            _remove(staging)
            raise
        fsync_dir(revisions_dir)
        length = (final / PACKAGE).stat().st_size
        return _revision(manifest, manifest_bytes, final / PACKAGE, length)

    def judge(self, manifest: Manifest) -> Literal["new", "same"]:
        """ "same" for an idempotent retry, "new" when storable; `RevisionConflict` otherwise."""
        signed = manifest.signed
        stored = self.revision(signed.view_id, signed.revision)
        if stored is not None:
            if stored.package_sha256 == signed.package.sha256:
                return "same"
            text = f"revision {signed.revision} is already published with another package"
            raise RevisionConflict(text, code="equivocation")
        current = self._current.get(signed.view_id)
        base = current.revision if current is not None else 0
        if signed.revision > base + MAX_JUMP:
            # One upload must not be able to burn the revision space (2**63) and block
            # every later publication of the view.
            text = (
                f"revision {signed.revision} jumps more than {MAX_JUMP} past the current "
                f"revision {base}"
            )
            raise UploadRefused([Problem("package-metadata", None, None, text)], text)
        if current is not None and signed.revision < current.revision:
            text = (
                f"revision {signed.revision} is not above the current revision {current.revision}"
            )
            raise RevisionConflict(text, code="rollback")
        return "new"

    def promote(self, revision: Revision) -> bool:
        """Make `revision` current if it is above the current one; True if it now is."""
        current = self._current.get(revision.view_id)
        if current is not None and current.revision >= revision.revision:
            return False
        self._current[revision.view_id] = revision
        return True


def check_upload(view_id: str, data: bytes, length: int, sha256: str, now: datetime) -> Manifest:
    """The uploaded manifest, if it parses strictly, names `view_id`, matches the uploaded
    package's length and hash, and has not expired; `UploadRefused` otherwise."""
    from memsync.views.manifest import (  # noqa: PLC0415 - a hub without revisions: not yet
        ManifestError,
        check_package_bytes,
        parse_manifest,
    )

    try:
        manifest = parse_manifest(data)
    except ManifestError as exc:
        raise UploadRefused([Problem(exc.code, None, None, exc.message)]) from exc
    signed = manifest.signed
    if signed.view_id != view_id:
        text = f"the manifest is for view {signed.view_id}, not {view_id}"
        raise UploadRefused([Problem("wrong-view", None, None, text)])
    problems = check_package_bytes(manifest, length, sha256)
    if signed.expires_time <= now:
        problems.append(Problem("expired", None, None, f"the manifest expired at {signed.expires}"))
    if problems:
        raise UploadRefused(problems)
    return manifest


def _revision(manifest: Manifest, data: bytes, package: Path, length: int) -> Revision:
    signed = manifest.signed
    return Revision(
        view_id=signed.view_id,
        revision=signed.revision,
        manifest=data,
        manifest_etag=etag_of(hashlib.sha256(data).hexdigest()),
        package_path=package,
        package_sha256=signed.package.sha256,
        package_length=length,
        package_etag=etag_of(signed.package.sha256),
        published_at=signed.published_at,
        expires=signed.expires,
    )


def _remove(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink()
