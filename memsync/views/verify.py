"""`memsync views verify`: check a published view exactly as a consumer would (the
manifest's signatures and expiry against pinned keys, then the package through the
consumer check), reporting every problem where a consumer stops at the first, and
importing nothing: what is fetched lives in a scratch directory that is removed after.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from memsync import timefmt
from memsync.transports.http import HttpClient
from memsync.transports.process import Deadline
from memsync.validators.problems import Problem
from memsync.views.archive import ArchiveLimits
from memsync.views.consumer import check_package
from memsync.views.dirsource import DirSource
from memsync.views.httpsource import HttpSource
from memsync.views.manifest import ManifestError, parse_manifest, verify_manifest
from memsync.views.source import ErrorKind, SourceError, ViewSource
from memsync.views.zipscan import problem as archive_problem

VERIFY_DEADLINE = 120.0  # seconds for fetching what `views verify` checks


@dataclass(frozen=True)
class ViewCheck:
    """What `verify_view` found: what the manifest names (when it could be read), what the
    package held, the pinned keys whose signatures verified, and every problem."""

    source: str
    view_id: str | None
    revision: int | None
    expires: str | None
    files: int
    items: int
    signed_by: tuple[str, ...]
    problems: tuple[Problem, ...]

    @property
    def valid(self) -> bool:
        return not self.problems


def verify_view(
    source: str,
    *,
    keys: tuple[str, ...],
    threshold: int,
    view_id: str | None,
    heading: str | None,
    allow_unsigned: bool,
    limits: ArchiveLimits,
) -> ViewCheck:
    """Fetch and check the view at `source` (a directory in the static layout, or an
    http(s) URL) as `views pull` would."""
    scratch = Path(tempfile.mkdtemp(prefix="memsync-verify-"))
    try:
        return asyncio.run(
            _verify(source, scratch, keys, threshold, view_id, heading, allow_unsigned, limits)
        )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


async def _verify(
    source: str,
    scratch: Path,
    keys_: tuple[str, ...],
    threshold: int,
    view_id: str | None,
    heading: str | None,
    allow_unsigned: bool,
    limits: ArchiveLimits,
) -> ViewCheck:
    """Fetch and check the view at `source` as `views pull` would, reporting every problem
    (a consumer would stop at the first) and importing nothing."""
    deadline = Deadline.after(VERIFY_DEADLINE)
    async with HttpClient() as client:
        view: ViewSource = (
            HttpSource(client, source)
            if source.startswith(("http://", "https://"))
            else DirSource(Path(source))
        )
        manifest_bytes = (await view.manifest(etag=None, deadline=deadline)).body or b""
        try:
            claimed = parse_manifest(manifest_bytes).signed.view_id
        except ManifestError:  # verify_manifest reports the exact problem below
            claimed = view_id or ""
        verdict = verify_manifest(
            manifest_bytes,
            view_id=view_id or claimed,
            keys=keys_,
            threshold=threshold,
            trusted_revision=None,
            trusted_sha256=None,
            now=timefmt.now(),
            allow_unsigned=allow_unsigned,
        )
        problems: list[Problem] = list(verdict.problems)
        files = items = 0
        manifest = verdict.manifest
        if manifest is not None:
            package = scratch / "package"
            try:
                fetched = await view.package(
                    package, limits=limits, expected_length=None, deadline=deadline
                )
            except SourceError as exc:
                if exc.kind is not ErrorKind.TOO_LARGE:
                    raise
                why = f"is over {limits.max_archive} bytes, more than a package within the limits"
                problems.append(archive_problem(None, why))
            else:
                checked = await asyncio.to_thread(
                    check_package,
                    package,
                    scratch / "extracted",
                    manifest=manifest,
                    length=fetched.length,
                    sha256=fetched.sha256,
                    view_id=manifest.signed.view_id,
                    heading=heading or manifest.signed.view_id,
                    limits=limits,
                    thorough=True,
                    durable=False,
                )
                problems += checked.problems
                files, items = checked.files, checked.items
    signed = manifest.signed if manifest is not None else None
    return ViewCheck(
        source=source,
        view_id=signed.view_id if signed else None,
        revision=signed.revision if signed else None,
        expires=signed.expires if signed else None,
        files=files,
        items=items,
        signed_by=tuple(verdict.signed_by),
        problems=tuple(problems),
    )
