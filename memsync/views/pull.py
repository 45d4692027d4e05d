"""`views pull`: refresh imported views like a secure updater.

For each view: fetch the manifest (conditional GET, or a Git share), verify it against the
pinned keys, the trusted revision (no rollback, no equivocation) and the clock (no freeze),
then fetch the package with a byte cap and a deadline, check its length and hash, extract
it safely into a new empty directory, validate the package and its graph, and swap it
atomically into `<root>/.runtime/shared_views/imports/<heading>/`. Any failure keeps the
last good import serving and reports `stale` (or `unavailable` when there is none).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from memsync import timefmt
from memsync.atomicfile import private_dir, write_bytes
from memsync.config.model import ViewSettings
from memsync.config.secrets import resolve
from memsync.errors import GitError, MemsyncError, require
from memsync.roots.lock import RootLock
from memsync.transports.git import FetchOutcome, Git
from memsync.transports.http import ErrorKind, HttpClient, HttpError
from memsync.validators.problems import Problem
from memsync.views.archive import ArchiveError, ArchiveLimits, extract_zip, write_zip
from memsync.views.manifest import (
    MAX_MANIFEST_BYTES,
    ManifestError,
    Verdict,
    check_files,
    check_package_bytes,
    parse_manifest,
    verify_manifest,
)
from memsync.views.package import read_tree, validate_package
from memsync.views.store import ImportStore
from memsync.views.trust import PULLED, STALE, UNAVAILABLE, TrustState
from memsync.wire.manifest import SignedManifest

log = logging.getLogger(__name__)

PULL_DEADLINE = 120.0  # seconds for one view's whole refresh


@dataclass(frozen=True)
class ViewResult:
    view: str
    status: str  # pulled | current | stale | unavailable
    revision: int | None
    previous_revision: int | None
    message: str
    problems: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status in (PULLED, "current")


class Refused(MemsyncError):
    """This refresh failed; the last good import keeps serving."""

    def __init__(self, message: str, problems: Sequence[Problem] = ()) -> None:
        super().__init__(message)
        self.problems = tuple(problems)


def view_dir(state_dir: Path, view: str) -> Path:
    return state_dir / "views" / view


async def pull_views(
    views: Sequence[ViewSettings], state_dir: Path, *, now: datetime | None = None
) -> list[ViewResult]:
    """Refresh each view (concurrently; each under its own lock)."""
    allow_http = any(v.allow_http for v in views)
    async with HttpClient(allow_http=allow_http) as client:
        return list(await asyncio.gather(*(_locked(v, state_dir, client, now) for v in views)))


async def _locked(
    view: ViewSettings, state_dir: Path, client: HttpClient, now: datetime | None
) -> ViewResult:
    lock = RootLock(view_dir(state_dir, view.name) / "lock", wait=0, label=f"view {view.name}")
    try:
        await asyncio.to_thread(lock.acquire)
    except MemsyncError as exc:
        trust = TrustState.load(view_dir(state_dir, view.name) / "trust.json")
        return ViewResult(
            view.name, trust.last_status or UNAVAILABLE, trust.revision, trust.revision, exc.message
        )
    try:
        return await Puller(view, state_dir, client, now or timefmt.now()).run()
    finally:
        lock.release()


class Puller:
    def __init__(
        self, view: ViewSettings, state_dir: Path, client: HttpClient, now: datetime
    ) -> None:
        self.v = view
        self.dir = private_dir(view_dir(state_dir, view.name))
        self.client = client
        self.now = now
        self.store = ImportStore(
            view.root_path, view.heading, state_dir, view=view.name, recover_now=True
        )
        self.trust = TrustState.load(self.store.trust_path)
        self.manifest_copy = self.dir / "manifest.json"
        self.limits = ArchiveLimits()

    async def run(self) -> ViewResult:
        previous = self.trust.revision
        deadline = asyncio.get_running_loop().time() + PULL_DEADLINE
        try:
            return await self._refresh(previous, deadline)
        except Refused as exc:
            return self._fail(previous, exc.message, exc.problems)
        except HttpError as exc:
            return self._fail(previous, exc.message)
        except (GitError, MemsyncError) as exc:
            return self._fail(previous, exc.message)
        except OSError as exc:
            return self._fail(previous, f"a local file operation failed: {exc}")
        finally:
            self.store.remove_candidates()
            for leftover in self.dir.glob("package*.zip"):
                leftover.unlink(missing_ok=True)

    async def _refresh(self, previous: int | None, deadline: float) -> ViewResult:
        files: dict[str, bytes] | None = None
        etag: str | None = None
        if self.v.kind == "git":
            manifest, files = await asyncio.to_thread(self._git_fetch)
            verdict = self._verify(manifest) if manifest is not None else None
        else:
            manifest, etag = await self._http_manifest(deadline)
            verdict = self._verify(manifest)
        if verdict is not None:
            signed = _signed(verdict)
            if (
                self.store.exists()
                and signed.revision == self.trust.revision
                and signed.package.sha256 == self.trust.sha256
            ):
                if manifest is not None and manifest != self._stored_copy():
                    # Re-signed (a later expiry, say): keep the copy a later 304 refers to.
                    write_bytes(self.manifest_copy, manifest)
                self.trust = self.trust.checked(
                    self.now, manifest_etag=etag, expires_at=signed.expires
                )
                return self._report(previous, promoted=False, message="no new revision")
        candidate = self.store.candidate_dir()
        candidate.rmdir()  # the extractor wants to create it itself
        if files is None:
            hashes = await self._http_package(require(verdict, "the verdict"), candidate, deadline)
        else:
            hashes = self._stage_files(files, verdict, candidate)
        tree = read_tree(candidate)
        report = validate_package(tree, view_id=self.v.view_id, heading=self.v.heading)
        problems = list(report.problems)
        if verdict is not None and verdict.manifest is not None:
            problems += check_files(verdict.manifest, hashes)
        if problems:
            raise Refused("the package failed validation", problems)
        revision, sha, expires, keys = self._identity(verdict, files)
        self.trust = self.trust.accepted(
            revision=revision,
            sha256=sha,
            expires_at=expires,
            key_ids=keys,
            now=self.now,
            manifest_etag=etag,
        )
        self.store.promote(candidate, revision, trust=self.trust)
        if manifest is not None:
            write_bytes(self.manifest_copy, manifest)
        return self._report(previous, promoted=True, message=f"imported revision {revision}")

    # -- transports ------------------------------------------------------------------------

    async def _http_manifest(self, deadline: float) -> tuple[bytes, str | None]:
        """The manifest bytes and ETag. After a 304 they are the stored copy of the trusted
        manifest, which is verified again like a fresh one: a 304 skips no check."""
        token = resolve(self.v.token) if self.v.token is not None else None
        copy = self._trusted_copy()
        usable = self.store.exists() and copy is not None
        etag = self.trust.manifest_etag if usable else None
        got = await self.client.get_with_retry(
            f"{self.v.url.rstrip('/')}/manifest",
            dest=None,
            token=token,
            etag=etag,
            max_bytes=MAX_MANIFEST_BYTES,
            deadline=deadline,
        )
        if got.status == 304 and copy is not None:
            return copy, got.etag or etag
        if got.body is None:
            raise Refused("the manifest request returned no body")
        return got.body, got.etag

    def _stored_copy(self) -> bytes | None:
        try:
            return self.manifest_copy.read_bytes()
        except OSError:
            return None

    def _trusted_copy(self) -> bytes | None:
        """The stored manifest, only if it is the trusted revision's (a crash between the
        swap and writing the copy leaves an older one, which must not answer a 304)."""
        try:
            copy = self.manifest_copy.read_bytes()
            signed = parse_manifest(copy).signed
        except (OSError, ManifestError):
            return None
        trusted = (self.trust.revision, self.trust.sha256)
        return copy if (signed.revision, signed.package.sha256) == trusted else None

    async def _http_package(
        self, verdict: Verdict, candidate: Path, deadline: float
    ) -> dict[str, str]:
        manifest = require(verdict.manifest, "the verified manifest")
        token = resolve(self.v.token) if self.v.token is not None else None
        target = self.dir / f"package-{time.monotonic_ns()}.zip"
        length = manifest.signed.package.length
        try:
            got = await self.client.get_with_retry(
                f"{self.v.url.rstrip('/')}/package",
                dest=target,
                token=token,
                etag=None,
                max_bytes=self.limits.max_archive,
                deadline=deadline,
                expected_length=length,
            )
        except HttpError as exc:
            if exc.kind is not ErrorKind.TOO_LARGE:
                raise
            problem = Problem(
                "length-mismatch",
                None,
                None,
                f"the server sends more than the {length} bytes the manifest declares",
            )
            raise Refused("the package is longer than its manifest says", [problem]) from exc
        problems = check_package_bytes(manifest, got.length, got.sha256 or "")
        if problems:
            raise Refused("the package does not match its manifest", problems)
        try:
            return await asyncio.to_thread(extract_zip, target, candidate, self.limits)
        except ArchiveError as exc:
            raise Refused("the package archive was refused", exc.problems) from exc

    def _git_fetch(self) -> tuple[bytes | None, dict[str, bytes]]:
        cache = self.dir / "git-cache"
        git = Git(cache, timeout=PULL_DEADLINE)
        if not cache.exists():
            cache.mkdir(mode=0o700)
            git.run("init", "--quiet", "--bare")
        ref = f"refs/heads/{self.v.git_branch}"
        outcome, detail = git.fetch(self.v.url, self.v.git_branch, ref)
        if outcome is not FetchOutcome.OK:
            raise Refused(f"the Git share could not be fetched: {detail.strip()[-200:]}")
        base = self.v.git_path.strip("/")
        entries = git.ls_tree(ref)
        package: dict[str, str] = {}
        for path, entry in entries.items():
            if not path.startswith(f"{base}/package/"):
                continue
            rel = path[len(base) + len("/package/") :]
            if entry.mode != 0o100644 or entry.oid is None:
                raise Refused(
                    "the Git share holds a non-regular file",
                    [Problem("archive-invalid", rel, None, f"'{rel}' is not a regular file")],
                )
            package[rel] = entry.oid
        blobs = git.read_blobs(list(package.values()))
        files = {rel: blobs[oid] for rel, oid in package.items()}
        manifest_entry = entries.get(f"{base}/manifest.json")
        if manifest_entry is None or manifest_entry.oid is None:
            if not self.v.allow_unsigned:
                raise Refused(
                    "the Git share has no signed manifest.json (and this view does "
                    "not allow unsigned shares)"
                )
            return None, files
        return git.read_blobs([manifest_entry.oid])[manifest_entry.oid], files

    # -- checks -----------------------------------------------------------------------------

    def _verify(self, manifest: bytes) -> Verdict:
        verdict = verify_manifest(
            manifest,
            view_id=self.v.view_id,
            keys=self.v.keys,
            threshold=self.v.threshold,
            trusted_revision=self.trust.revision,
            trusted_sha256=self.trust.sha256,
            now=self.now,
            allow_unsigned=self.v.allow_unsigned,
        )
        if not verdict.ok:
            raise Refused("the manifest was refused", verdict.problems)
        return verdict

    def _stage_files(
        self, files: Mapping[str, bytes], verdict: Verdict | None, candidate: Path
    ) -> dict[str, str]:
        """A Git share's files go through the same zip rules and extractor as a download."""
        try:
            archive = write_zip(files, self.limits)
        except ArchiveError as exc:
            raise Refused("the Git share's package was refused", exc.problems) from exc
        if verdict is not None and verdict.manifest is not None:
            digest = hashlib.sha256(archive).hexdigest()
            problems = check_package_bytes(verdict.manifest, len(archive), digest)
            if problems:
                raise Refused("the Git share does not match its manifest", problems)
        target = self.dir / f"package-{time.monotonic_ns()}.zip"
        write_bytes(target, archive)
        try:
            return extract_zip(target, candidate, self.limits)
        except ArchiveError as exc:
            raise Refused("the Git share's package was refused", exc.problems) from exc

    def _identity(
        self, verdict: Verdict | None, files: Mapping[str, bytes] | None
    ) -> tuple[int, str, str | None, tuple[str, ...]]:
        if verdict is not None and verdict.manifest is not None:
            signed = verdict.manifest.signed
            return signed.revision, signed.package.sha256, signed.expires, verdict.signed_by
        # An unsigned share: the content hash names it; a change bumps the local revision.
        digest = hashlib.sha256(write_zip(files or {}, self.limits)).hexdigest()
        if digest == self.trust.sha256 and self.trust.revision is not None:
            return self.trust.revision, digest, None, ()
        return (self.trust.revision or 0) + 1, digest, None, ()

    # -- outcomes ---------------------------------------------------------------------------

    def _report(self, previous: int | None, *, promoted: bool, message: str) -> ViewResult:
        status = self.trust.status(
            now=self.now,
            max_stale=self.v.max_stale,
            has_import=self.store.exists(),
            refresh_failed=False,
            promoted=promoted,
        )
        if status == STALE and self.trust.is_expired(self.now):
            message = f"{message}; the manifest has expired"
        self.trust = self.trust.reported(status, message)
        self.trust.save(self.store.trust_path)
        return ViewResult(self.v.name, status, self.trust.revision, previous, message)

    def _fail(
        self, previous: int | None, message: str, problems: Sequence[Problem] = ()
    ) -> ViewResult:
        codes = ", ".join(sorted({p.code for p in problems}))
        text = f"{message} ({codes})" if codes else message
        self.trust = self.trust.failed(self.now, text)
        status = self.trust.status(
            now=self.now,
            max_stale=self.v.max_stale,
            has_import=self.store.exists(),
            refresh_failed=True,
        )
        keeps = "; the last good import keeps serving" if status == STALE else ""
        self.trust = self.trust.reported(status, text + keeps)
        self.trust.save(self.store.trust_path)
        log.warning("view %s: %s", self.v.name, text)
        return ViewResult(
            self.v.name, status, self.trust.revision, previous, text + keeps, tuple(problems)
        )


def _signed(verdict: Verdict | None) -> SignedManifest:
    manifest = require(verdict.manifest if verdict is not None else None, "the manifest")
    return manifest.signed
