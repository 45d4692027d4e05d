"""The consumer check: what a consumer finds wrong with a fetched package, in one place.

"Compare the bytes with the manifest → extract safely → validate the package and its
graph → compare the files with the manifest" is the same for every path a package comes
in by: `views pull` (before an import is swapped in), `views verify` (a report, without
importing) and the hub's upload check (before a revision is stored). All three call
`check_package`; it is blocking (extraction, hashing, validation): run it off the event
loop.

A consumer stops at the first failing step: bytes that are not the signed ones are never
unpacked. `views verify` asks for `thorough=True` and gets every step's problems.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memsync.validators.graph import CacheChoice
from memsync.validators.problems import Problem
from memsync.views.archive import ArchiveError, ArchiveLimits, unpack
from memsync.views.manifest import check_files, check_package_bytes
from memsync.views.package import validate_package
from memsync.views.previous import Previous, Syncer
from memsync.wire.manifest import Manifest


@dataclass(frozen=True)
class Checked:
    """The verdict on one package: every problem found, and the one-line reason of the
    first failing step (None when the package is valid). `files` and `items` count what
    the package's graph holds when it got that far."""

    problems: tuple[Problem, ...]
    reason: str | None
    files: int = 0
    items: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems


def check_package(
    package: Path,
    into: Path,
    *,
    manifest: Manifest | None,
    length: int,
    sha256: str,
    view_id: str,
    heading: str,
    limits: ArchiveLimits,
    thorough: bool = False,
    cache: CacheChoice = None,
    durable: bool = True,
    previous: Previous | None = None,
) -> Checked:
    """Check the archive at `package` (`length` bytes hashing to `sha256`) against
    `manifest` (None: an unsigned share) and extract it into `into`, a new directory the
    caller owns (it stays when the package is valid; the extractor leaves nothing when the
    archive is refused). The graph files are parsed through `cache` (None: the process's),
    keyed by the SHA-256 the extractor computed, so files unchanged since a package seen
    before are not parsed again. With `durable`, `into` is on disk (fsynced while the
    graph is validated) when this returns; `previous` lends unchanged files."""
    problems: list[Problem] = []
    reason: str | None = None

    def fail(found: Sequence[Problem], why: str) -> None:
        nonlocal reason
        problems.extend(found)
        reason = reason or why

    if manifest is not None:
        found = check_package_bytes(manifest, length, sha256)
        if found:
            fail(found, "the package does not match its manifest")
            if not thorough:
                return Checked(tuple(problems), reason)
    try:
        unpacked = unpack(package, into, limits, previous=previous)
    except ArchiveError as exc:
        fail(exc.problems, "the package archive was refused")
        return Checked(tuple(problems), reason)
    syncer = Syncer(into, unpacked.linked) if durable else None
    try:
        hashes = unpacked.hashes
        report = validate_package(
            unpacked.contents, view_id=view_id, heading=heading, hashes=hashes, cache=cache
        )
    finally:
        if syncer is not None:
            syncer.wait()
    found = [*report.problems, *(check_files(manifest, hashes) if manifest else [])]
    if found:
        fail(found, "the package failed validation")
    return Checked(tuple(problems), reason, report.files, report.items)


def check_published(
    manifest: Manifest,
    package: Path,
    *,
    length: int,
    sha256: str,
    heading: str | None = None,
    limits: ArchiveLimits | None = None,
) -> list[Problem]:
    """What a consumer would find wrong with an uploaded package (the hub's upload check),
    extracted into a private temporary directory that is removed afterwards."""
    view_id = manifest.signed.view_id
    scratch = Path(tempfile.mkdtemp(prefix="memsync-check-"))
    try:
        checked = check_package(
            package,
            scratch / "pkg",
            manifest=manifest,
            length=length,
            sha256=sha256,
            view_id=view_id,
            heading=heading or view_id,
            limits=limits or ArchiveLimits(),
            durable=False,  # removed right afterwards
        )
        return list(checked.problems)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
