"""`views build`: a root's view, rendered, packaged, signed, in the static layout.

The package is rendered from a commit (HEAD by default: published memory is committed
memory), validated with the consumers' own validator before anything is written, zipped
deterministically (the same content gives the same bytes and hash) and written as
`DIR/v1/views/<id>/package` with its signed `manifest` beside it. Any static HTTP server
can then serve DIR.

The revision comes from the target, never from a guess: `next_revision` decides it for
`views build` (the manifest already in DIR) and `views publish` (the hub's current one)
alike. The next revision is the current one plus one; unchanged content (the same package
hash) builds nothing, unless the current manifest is past half its lifetime, when a new
revision renews its expiry (a manifest never changes at one revision: consumers would see
`equivocation`). An explicit revision must be above the current one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from memsync.errors import ProblemError, UsageError
from memsync.names import is_name
from memsync.transports.git import Git
from memsync.validators.problems import Problem
from memsync.views.archive import ArchiveError, ArchiveLimits, too_large, write_zip
from memsync.views.manifest import ManifestError, build_signed, parse_manifest, sign_manifest
from memsync.views.package import DIST_MANIFEST, PACKAGE_META, RECIPE, VIEW_DOC, validate_package
from memsync.views.recipe import Recipe, RecipeError, parse_recipe
from memsync.views.render import render_dist

DEFAULT_EXPIRES = timedelta(days=30)


class BuildError(ProblemError):
    """The rendered package would not pass a consumer's checks; nothing was written."""

    def __init__(self, message: str, problems: Sequence[Problem], *, hint: str = "") -> None:
        codes = ", ".join(sorted({p.code for p in problems}))
        super().__init__(
            f"{message} ({codes})",
            problems,
            hint=hint or "fix the recipe or the memory it selects, then build again",
        )


@dataclass(frozen=True)
class Current:
    """The revision a target serves now: its number, package hash and expiry."""

    revision: int
    sha256: str
    expires: datetime


@dataclass(frozen=True)
class NextRevision:
    """What to sign next: `revision`, or nothing (`unchanged`, `revision` is the current)."""

    revision: int
    unchanged: bool
    renews: bool  # same content, signed again to renew the expiry


def next_revision(
    sha256: str,
    current: Current | None,
    *,
    now: datetime,
    expires: timedelta,
    requested: int | None = None,
) -> NextRevision:
    """The revision to sign for a package hashing to `sha256` when the target serves
    `current` (None: nothing yet). `requested` (an explicit `--revision`) must be above the
    current revision; it signs even unchanged content."""
    if requested is not None:
        if requested < 1:
            raise UsageError(f"revision must be 1 or more (got {requested})")
        if current is not None and requested <= current.revision:
            raise UsageError(
                f"revision {requested} is not above the existing revision {current.revision}",
                hint=f"omit --revision (the next is {current.revision + 1}) or give a higher one",
            )
        return NextRevision(requested, unchanged=False, renews=False)
    if current is None:
        return NextRevision(1, unchanged=False, renews=False)
    same = current.sha256 == sha256.lower()
    # Same content is not signed again, unless its manifest is past half its lifetime.
    renew = current.expires - now < expires / 2
    if same and not renew:
        return NextRevision(current.revision, unchanged=True, renews=False)
    return NextRevision(current.revision + 1, unchanged=False, renews=same)


def current_of(manifest: bytes, *, view_id: str, where: str) -> Current:
    """The current revision named by a target's manifest, which must be a memsync manifest
    of `view_id` (anything else is not ours to replace: UsageError naming `where`)."""
    try:
        signed = parse_manifest(manifest).signed
    except ManifestError as exc:
        raise UsageError(
            f"{where} is not a memsync view manifest ({exc.message})",
            hint="move it away or choose another --out; memsync replaces only its own",
        ) from exc
    if signed.view_id != view_id:
        raise UsageError(
            f"{where} is the manifest of view {signed.view_id!r}, not {view_id!r}",
            hint="choose the --out of this view",
        )
    return Current(signed.revision, signed.package.sha256, signed.expires_time)


def static_dir(out: Path, view_id: str) -> Path:
    """Where `views build --out OUT` writes view `view_id` (a name: one path component)."""
    if not is_name(view_id):
        raise UsageError(
            f"{view_id!r} is not a view id",
            hint="letters, digits, '.', '_' and '-', starting with a letter or digit",
        )
    return out / "v1" / "views" / view_id


def current_static(out: Path, view_id: str) -> Current | None:
    """The revision `out` serves for `view_id` (None when it holds none yet). A package
    that does not hash to what its manifest names counts as changed content."""
    target = static_dir(out, view_id)
    where = target / "manifest"
    try:
        data = where.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read {where}: {exc.strerror or exc}") from exc
    current = current_of(data, view_id=view_id, where=str(where))
    try:
        package = hashlib.sha256((target / "package").read_bytes()).hexdigest()
    except OSError:
        package = ""
    if package != current.sha256:
        return Current(current.revision, "", current.expires)
    return current


@dataclass(frozen=True)
class Built:
    view_id: str
    recipe: Recipe
    files: dict[str, bytes]
    archive: bytes
    sha256: str
    items: int


def _toml_string(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)


def build_package(
    root: Path, view_id: str, *, rev: str = "HEAD", limits: ArchiveLimits | None = None
) -> Built:
    """The package of view `view_id` rendered from commit `rev` of `root`, checked as a
    consumer with `limits` (default: the consumers' defaults) would check it."""
    limits = limits or ArchiveLimits()
    git = Git(root)
    commit = git.rev_parse(rev)
    if commit is None:
        raise UsageError(f"{root} has no commit {rev!r}", hint="build from a memory root")
    tree = git.tree_view(commit)
    base = f"shared_views/{view_id}"
    try:
        recipe_bytes = tree.content(f"{base}/recipe.toml")
        view_doc = tree.content(f"{base}/view.md")
    except KeyError as exc:
        raise RecipeError(
            f"{root} has no committed {base}/recipe.toml and {base}/view.md",
            hint="write and commit both, then build again",
        ) from exc
    recipe = parse_recipe(
        recipe_bytes.decode("utf-8"), view_id=view_id, where=f"{base}/recipe.toml"
    )
    dist = render_dist(tree, recipe)
    meta = "\n".join(
        [
            "version = 2",
            f"view_id = {_toml_string(view_id)}",
            'kind = "file"',
            f"ref = {_toml_string(f'rightmemory://mf/{view_id}')}",
            f"title = {_toml_string(recipe.title or view_id)}",
            f"description = {_toml_string(recipe.intent)}",
            "",
        ]
    )
    dist_manifest = "\n".join(
        [
            "version = 2",
            f"view_id = {_toml_string(view_id)}",
            'document_kind = "rightmemory-memory"',
            "",
        ]
    )
    files = {
        VIEW_DOC: view_doc,
        RECIPE: recipe_bytes,
        PACKAGE_META: meta.encode("utf-8"),
        DIST_MANIFEST: dist_manifest.encode("utf-8"),
        **dist,
    }
    oversized = [
        too_large(path, len(data), limits.max_file)
        for path, data in sorted(files.items())
        if len(data) > limits.max_file
    ]
    if oversized:  # before validating megabytes nobody would accept
        raise BuildError(
            f"view {view_id} renders files over the {limits.max_file}-byte per-file cap",
            oversized,
            hint="share less (a smaller recipe), or raise the cap with --max-file-size "
            "here and views.<name>.max_file_size on every consumer",
        )
    report = validate_package(files, view_id=view_id, heading=view_id)
    if not report.ok:
        raise BuildError(f"view {view_id} does not render to a valid package", report.problems)
    try:
        archive = write_zip(files, limits)
    except ArchiveError as exc:
        raise BuildError(f"view {view_id} does not pack as a valid package", exc.problems) from exc
    return Built(view_id, recipe, files, archive, hashlib.sha256(archive).hexdigest(), report.items)


def signed_manifest(
    built: Built,
    *,
    revision: int,
    keys: list[Ed25519PrivateKey],
    now: datetime,
    expires: timedelta = DEFAULT_EXPIRES,
) -> bytes:
    hashes = {path: hashlib.sha256(data).hexdigest() for path, data in built.files.items()}
    signed = build_signed(
        built.view_id,
        revision,
        len(built.archive),
        built.sha256,
        hashes,
        published_at=now,
        expires=now + expires,
    )
    return sign_manifest(signed, keys)


def write_static(out: Path, built: Built, manifest: bytes) -> Path:
    """Write `out/v1/views/<id>/{package,manifest}` (the package first, the manifest last)."""
    target = static_dir(out, built.view_id)
    target.mkdir(parents=True, exist_ok=True)  # world-readable: any static server serves it
    for name, data in (("package", built.archive), ("manifest", manifest)):
        temp = target / f".{name}.tmp"
        temp.write_bytes(data)
        temp.chmod(0o644)
        temp.replace(target / name)
    return target


@dataclass(frozen=True)
class StaticBuild:
    """What `build_static` did: the package it built, the revision it decided, and where
    the view is served from (`unchanged`: nothing was written)."""

    built: Built
    decided: NextRevision
    target: Path


def build_static(
    root: Path,
    view_id: str,
    out: Path,
    *,
    keys: list[Ed25519PrivateKey],
    expires: timedelta,
    limits: ArchiveLimits,
    revision: int | None = None,
    now: datetime,
) -> StaticBuild:
    """`memsync views build`: render the view of `root` into a package and, unless its
    content is what `out` already serves (and no `revision` is asked for), sign the next
    revision and write it under `out` in the static layout. An `out` holding what is not
    a view of ours is refused before anything is built."""
    current = current_static(out, view_id)  # refuses an OUT holding what is not ours
    built = build_package(root, view_id, limits=limits)
    decided = next_revision(built.sha256, current, now=now, expires=expires, requested=revision)
    if decided.unchanged:
        return StaticBuild(built, decided, static_dir(out, view_id))
    manifest = signed_manifest(
        built, revision=decided.revision, keys=keys, now=now, expires=expires
    )
    return StaticBuild(built, decided, write_static(out, built, manifest))
