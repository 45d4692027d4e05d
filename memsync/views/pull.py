"""`views pull`: refresh imported views like a secure updater.

For each view, from its source (`source.py`: a hub or static host, a Git share): fetch the
manifest conditionally, verify it against the pinned keys, the trusted revision (no
rollback, no equivocation) and the clock (no freeze), then fetch the package under a byte
cap and one deadline for the whole refresh, run the consumer check (`consumer.py`: length
and hash, safe extraction into a new empty directory, the package and its graph, the
manifest's file list), and swap it atomically into
`<root>/.runtime/shared_views/imports/<heading>/`. Any failure keeps the last good import
serving and reports `stale` (or `unavailable` when there is none).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from memsync import timefmt
from memsync.atomicfile import private_dir, write_bytes
from memsync.config.sections import GitSourceSettings, ViewSettings
from memsync.errors import MemsyncError, ProblemError, require
from memsync.progress import NO_PROGRESS, Progress
from memsync.roots import pause
from memsync.roots.lock import RootLock
from memsync.transports.process import Deadline
from memsync.validators.cache import STATE_CACHE_DIR, ParseCache, open_persistent
from memsync.validators.problems import Problem
from memsync.views.archive import ArchiveLimits
from memsync.views.consumer import Checked, check_package
from memsync.views.layout import view_state_dir
from memsync.views.manifest import ManifestError, Verdict, parse_manifest, verify_manifest
from memsync.views.previous import KEPT_PACKAGE, Previous
from memsync.views.source import ErrorKind, PackageFetch, SourceError, ViewSource
from memsync.views.store import ImportStore
from memsync.views.trust import PULLED, STALE, UNAVAILABLE, TrustState
from memsync.wire.cli import ProblemModel, ViewPullResult
from memsync.wire.manifest import Manifest

if TYPE_CHECKING:
    from memsync.transports.http import HttpClient

PAUSED = "paused"  # `memsync pause` holds the view (CONTRACT §8)

log = logging.getLogger(__name__)

PULL_DEADLINE = 120.0  # seconds for one view's whole refresh
Identity = tuple[int, str, str | None, tuple[str, ...]]  # revision, sha256, expiry, key ids


@dataclass(frozen=True)
class ViewResult:
    view: str
    status: str  # pulled | current | stale | unavailable | paused
    revision: int | None
    previous_revision: int | None
    message: str
    problems: tuple[Problem, ...] = ()

    @property
    def ok(self) -> bool:
        return self.status in (PULLED, "current")

    @property
    def held(self) -> bool:
        """`memsync pause` holds this view: not a failure (exit 0)."""
        return self.status == PAUSED

    def model(self) -> ViewPullResult:
        """The `views pull --json` entry (the CLI and the daemon's control socket)."""
        return ViewPullResult(
            view=self.view,
            status=self.status,
            revision=self.revision,
            previous_revision=self.previous_revision,
            message=self.message,
            problems=[ProblemModel.of(p) for p in self.problems],
        )


class Refused(ProblemError):
    """This refresh refused what it was sent (never without its problems); the last good
    import keeps serving."""


def open_source(
    view: ViewSettings,
    client: HttpClient | None,
    state_dir: Path,
    progress: Progress = NO_PROGRESS,
) -> ViewSource:
    """The source a configured view is fetched from (showing its download to `progress`);
    `client` is the HTTP box's session, which a view over HTTP needs (a Git share not)."""
    source = view.source
    if isinstance(source, GitSourceSettings):
        from memsync.views.gitsource import GitSource  # noqa: PLC0415 - the git box: a share only

        cache = view_state_dir(state_dir, view.name) / "git-cache"
        return GitSource(source.url, source.branch, source.path, cache, progress)
    from memsync.views.httpsource import HttpSource  # noqa: PLC0415 - the HTTP box: aiohttp

    client = require(client, "the HTTP client of a view over HTTP")
    where = f"views.{view.name}.source.token"
    phase = f"{view.name}: Downloading package"
    return HttpSource(
        client, source.url, source.token, where, progress, phase, allow_http=source.allow_http
    )


async def pull_views(
    views: Sequence[ViewSettings],
    state_dir: Path,
    *,
    now: datetime | None = None,
    progress: Progress = NO_PROGRESS,
) -> list[ViewResult]:
    """Refresh each view (concurrently; each under its own lock). Every view gets a result:
    one view's failure, wherever it happens, never hides the others'. `progress` (a pull
    run from a terminal) is shown each package's bytes and the files checked."""
    # Parsed package files by content, in memory and under the state dir: a revision that
    # changes one file parses one file, in the daemon and across CLI runs alike.
    cache = await asyncio.to_thread(open_persistent, state_dir / STATE_CACHE_DIR)
    try:
        async with contextlib.AsyncExitStack() as stack:
            client: HttpClient | None = None
            if any(not isinstance(v.source, GitSourceSettings) for v in views):
                # One session for every view over HTTP; each view's source applies its own
                # `allow_http`. Git shares alone load no HTTP client (aiohttp, issue 18).
                from memsync.transports.http import HttpClient  # noqa: PLC0415

                client = await stack.enter_async_context(HttpClient())
            pulls = (_locked(v, state_dir, client, now, cache, progress) for v in views)
            return list(await asyncio.gather(*pulls))
    finally:
        cache.close()


async def _locked(
    view: ViewSettings,
    state_dir: Path,
    client: HttpClient | None,
    now: datetime | None,
    cache: ParseCache | None = None,
    progress: Progress = NO_PROGRESS,
) -> ViewResult:
    held = await asyncio.to_thread(pause.holding, state_dir, "view", view.name)
    if held is not None:  # `memsync pause`: nothing is fetched, the import stays as it is
        trust = TrustState.load(view_state_dir(state_dir, view.name) / "trust.json")
        return ViewResult(view.name, PAUSED, trust.revision, trust.revision, held.describe())
    lock = RootLock(
        view_state_dir(state_dir, view.name) / "lock", wait=0, label=f"view {view.name}"
    )
    try:
        await asyncio.to_thread(lock.acquire)
    except (MemsyncError, OSError) as exc:
        trust = TrustState.load(view_state_dir(state_dir, view.name) / "trust.json")
        message = exc.message if isinstance(exc, MemsyncError) else _local_failure(exc)
        return ViewResult(
            view.name, trust.last_status or UNAVAILABLE, trust.revision, trust.revision, message
        )
    try:
        try:
            source = open_source(view, client, state_dir, progress)
            puller = Puller(view, state_dir, source, now, cache, progress)
        except MemsyncError as exc:  # a name the store refuses: nothing was touched
            return ViewResult(view.name, UNAVAILABLE, None, None, exc.message)
        return await puller.run()
    finally:
        lock.release()


def _local_failure(exc: OSError) -> str:
    return f"a local file operation failed: {exc}"


class Puller:
    """One refresh of one view from its source (the caller holds the view's lock).

    Every step that blocks (store recovery, extraction, validation, fsyncs) runs in a
    worker thread, and every failure, recovery's included, ends as this view's result.
    """

    def __init__(
        self,
        view: ViewSettings,
        state_dir: Path,
        source: ViewSource,
        now: datetime | None,
        cache: ParseCache | None = None,
        progress: Progress = NO_PROGRESS,
    ) -> None:
        self.view = view
        self.cache = cache
        self.progress = progress
        self.source = source
        self.now = now or timefmt.now()
        self.dir = view_state_dir(state_dir, view.name)
        self.store = ImportStore(view.root_path, view.heading, state_dir, view=view.name)
        self.trust = TrustState.load(self.store.trust_path)
        self.previous = self.trust.revision
        self.manifest_copy = self.dir / "manifest.json"
        self.limits = ArchiveLimits(max_file=view.max_file_size)

    async def run(self) -> ViewResult:
        deadline = Deadline.after(PULL_DEADLINE)
        try:
            await asyncio.to_thread(self._recover)
            return await self._refresh(deadline)
        except (Refused, SourceError) as exc:
            return await asyncio.to_thread(self._fail, exc.message, exc.problems)
        except MemsyncError as exc:
            return await asyncio.to_thread(self._fail, exc.message)
        except OSError as exc:
            return await asyncio.to_thread(self._fail, _local_failure(exc))
        finally:
            await asyncio.to_thread(self._clean)

    def _recover(self) -> None:
        """Finish or undo an interrupted promotion (it may settle trust.json), then read the
        trust state the refresh starts from."""
        private_dir(self.dir)
        self.store.recover()
        self.trust = TrustState.load(self.store.trust_path)
        self.previous = self.trust.revision

    def _clean(self) -> None:
        try:
            self.store.remove_candidates()
        except MemsyncError as exc:
            log.warning("view %s: %s", self.view.name, exc.message)
        for leftover in self.dir.glob("package*.zip"):
            leftover.unlink(missing_ok=True)

    async def _refresh(self, deadline: Deadline) -> ViewResult:
        copy = await asyncio.to_thread(self._trusted_copy) if self.store.exists() else None
        etag = self.trust.manifest_etag if copy is not None else None
        got = await self.source.manifest(etag=etag, deadline=deadline)
        body = require(copy, "the trusted manifest") if got.unchanged else got.body
        verdict = self._verify(body) if body is not None else None
        if verdict is None and not self.view.allow_unsigned:
            missing = Problem(
                "untrusted-key",
                None,
                None,
                f"{self.source.label} has no manifest, so nothing pinned signed the package",
            )
            raise Refused(
                f"{self.source.label} has no signed manifest (and this view does not allow "
                "unsigned shares)",
                [missing],
            )
        manifest = verdict.manifest if verdict is not None else None
        if manifest is not None and self.store.exists():
            signed = manifest.signed
            if (signed.revision, signed.package.sha256) == (self.trust.revision, self.trust.sha256):
                return await asyncio.to_thread(self._unchanged, body, got.etag, signed.expires)
        target = self.dir / f"package-{time.monotonic_ns()}.zip"
        fetched = await self._package(target, manifest, deadline)
        candidate = await asyncio.to_thread(self.store.candidate_dir)
        candidate.rmdir()  # the extractor wants to create it itself
        self._show_check(manifest, None)
        checked = await asyncio.to_thread(self._check, target, candidate, manifest, fetched)
        self._show_check(manifest, checked)
        if not checked.ok:
            raise Refused(checked.reason or "the package was refused", checked.problems)
        identity: Identity
        if manifest is not None and verdict is not None:
            signed = manifest.signed
            identity = (signed.revision, signed.package.sha256, signed.expires, verdict.signed_by)
        else:
            identity = (self._unsigned_revision(fetched.sha256), fetched.sha256, None, ())
        return await asyncio.to_thread(self._install, candidate, identity, body, got.etag, target)

    async def _package(
        self, target: Path, manifest: Manifest | None, deadline: Deadline
    ) -> PackageFetch:
        length = manifest.signed.package.length if manifest is not None else None
        try:
            return await self.source.package(
                target, limits=self.limits, expected_length=length, deadline=deadline
            )
        except SourceError as exc:
            if exc.kind is not ErrorKind.TOO_LARGE or length is None:
                raise
            problem = Problem(
                "length-mismatch",
                None,
                None,
                f"the server sends more than the {length} bytes the manifest declares",
            )
            raise Refused("the package is longer than its manifest says", [problem]) from exc

    def _show_check(self, manifest: Manifest | None, checked: Checked | None) -> None:
        """The files of the package, before (`checked` None) and after the check."""
        if not self.progress.enabled:
            return
        phase = f"{self.view.name}: Extracting and checking files"
        declared = len(manifest.signed.files) if manifest is not None else None
        if checked is None:
            self.progress.show(phase, 0, declared, unit="files")
            return
        detail = f"{checked.files} memory files, {checked.items} items"
        self.progress.show(phase, declared or 0, declared, unit="files", detail=detail)

    def _check(
        self, target: Path, candidate: Path, manifest: Manifest | None, fetched: PackageFetch
    ) -> Checked:
        return check_package(
            target,
            candidate,
            manifest=manifest,
            length=fetched.length,
            sha256=fetched.sha256,
            view_id=self.view.view_id,
            heading=self.view.heading,
            limits=self.limits,
            cache=self.cache,
            previous=self._previous() if manifest is not None else None,
        )

    def _previous(self) -> Previous | None:
        """The active import as a source of unchanged files: the kept package of the
        trusted revision and the trusted manifest's file hashes (`previous.py` checks both
        against the trust state and the files on disk before anything is reused)."""
        copy = self._trusted_copy() if self.store.exists() else None
        if copy is None:
            return None
        return Previous.load(
            self.dir / KEPT_PACKAGE,
            sha256=self.trust.sha256,
            files=parse_manifest(copy).signed.files,
            import_dir=self.store.active_path,
            max_archive=self.limits.max_archive,
            max_entries=self.limits.max_entries,
        )

    def _stored_copy(self) -> bytes | None:
        try:
            return self.manifest_copy.read_bytes()
        except OSError:
            return None

    def _trusted_copy(self) -> bytes | None:
        """The stored manifest, only if it is the trusted revision's (a crash between the
        swap and writing the copy leaves an older one, which must not answer "unchanged").
        After "unchanged" it is verified again like a fresh one: that skips no check."""
        try:
            copy = self.manifest_copy.read_bytes()
            signed = parse_manifest(copy).signed
        except (OSError, ManifestError):
            return None
        trusted = (self.trust.revision, self.trust.sha256)
        return copy if (signed.revision, signed.package.sha256) == trusted else None

    # -- checks -----------------------------------------------------------------------------

    def _verify(self, manifest: bytes) -> Verdict:
        verdict = verify_manifest(
            manifest,
            view_id=self.view.view_id,
            keys=self.view.keys,
            threshold=self.view.threshold,
            trusted_revision=self.trust.revision,
            trusted_sha256=self.trust.sha256,
            now=self.now,
            allow_unsigned=self.view.allow_unsigned,
        )
        if not verdict.ok:
            raise Refused("the manifest was refused", verdict.problems)
        return verdict

    def _unsigned_revision(self, digest: str) -> int:
        """An unsigned share has no revision: the content hash names it, a change bumps the
        local revision."""
        if digest == self.trust.sha256 and self.trust.revision is not None:
            return self.trust.revision
        return (self.trust.revision or 0) + 1

    # -- outcomes (blocking: worker threads) ---------------------------------------------

    def _unchanged(self, body: bytes | None, etag: str | None, expires: str) -> ViewResult:
        if body is not None and body != self._stored_copy():
            # Re-signed (a later expiry, say): keep the copy a later "unchanged" refers to.
            write_bytes(self.manifest_copy, body)
        self.trust = self.trust.checked(self.now, manifest_etag=etag, expires_at=expires)
        return self._report(promoted=False, message="no new revision")

    def _install(
        self,
        candidate: Path,
        identity: Identity,
        body: bytes | None,
        etag: str | None,
        package: Path,
    ) -> ViewResult:
        revision, sha, expires, keys = identity
        self.trust = self.trust.accepted(
            revision=revision,
            sha256=sha,
            expires_at=expires,
            key_ids=keys,
            now=self.now,
            manifest_etag=etag,
        )
        # The report is part of the trust state the promotion records: one write, not two.
        result = self._reported(promoted=True, message=f"imported revision {revision}")
        self.store.promote(candidate, revision, trust=self.trust, synced=True)
        if body is not None:
            # Not fsynced: a copy lost in a power cut is older than the trust state, so it
            # is not used (`_trusted_copy`) and the next refresh fetches the manifest.
            write_bytes(self.manifest_copy, body, durable=False)
        # The next revision reuses unchanged files through it; a stale or missing copy
        # (a crash right here) only means that it does not.
        with contextlib.suppress(OSError):
            package.replace(self.dir / KEPT_PACKAGE)
        return result

    def _report(self, *, promoted: bool, message: str) -> ViewResult:
        result = self._reported(promoted=promoted, message=message)
        self.trust.save(self.store.trust_path)
        return result

    def _reported(self, *, promoted: bool, message: str) -> ViewResult:
        """The result of a refresh that succeeded (the import exists); `self.trust` becomes
        the state to save."""
        status = self.trust.status(
            now=self.now,
            max_stale=self.view.max_stale,
            has_import=promoted or self.store.exists(),
            refresh_failed=False,
            promoted=promoted,
        )
        if status == STALE and self.trust.is_expired(self.now):
            message = f"{message}; the manifest has expired"
        self.trust = self.trust.reported(status, message)
        return ViewResult(self.view.name, status, self.trust.revision, self.previous, message)

    def _fail(self, message: str, problems: Sequence[Problem] = ()) -> ViewResult:
        codes = ", ".join(sorted({p.code for p in problems}))
        text = f"{message} ({codes})" if codes else message
        self.trust = self.trust.failed(self.now, text)
        status = self.trust.status(
            now=self.now,
            max_stale=self.view.max_stale,
            has_import=self.store.exists(),
            refresh_failed=True,
        )
        keeps = "; the last good import keeps serving" if status == STALE else ""
        self.trust = self.trust.reported(status, text + keeps)
        try:
            self.trust.save(self.store.trust_path)
        except (MemsyncError, OSError) as exc:  # the result is reported all the same
            log.warning("view %s: could not record the failure: %s", self.view.name, exc)
        # DEBUG: the result carries it; the daemon logs the status change once, not each poll.
        log.debug("view %s: %s", self.view.name, text)
        return ViewResult(
            self.view.name,
            status,
            self.trust.revision,
            self.previous,
            text + keeps,
            tuple(problems),
        )
