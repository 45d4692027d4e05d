"""View manifests (CONTRACT §5): canonical JSON, signing, strict parsing and verification.

A manifest is `{"signed": {…}, "signatures": [{"keyid", "sig"}]}`. Signatures are Ed25519
over `memsync-view-manifest-v1\\n` + the canonical JSON of `signed` (sorted keys, no
whitespace, UTF-8, objects, strings and integers only), so a signature made for any other
purpose never verifies here. Verification re-canonicalises the `signed` object exactly as
it was parsed, not the pydantic model, and reports every trust problem at once.

A manifest that cannot be read unambiguously (not UTF-8, not JSON, duplicate keys, NaN,
floats, wrong shape) cannot carry a valid signature: it is reported as `signature-invalid`,
the CONTRACT §3 trust codes having no separate "malformed" code.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from pydantic import ValidationError

from memsync.errors import InternalError, MemsyncError, UsageError
from memsync.timefmt import rfc3339
from memsync.validators.problems import Problem
from memsync.views.keys import key_id, parse_public_key
from memsync.wire.manifest import (
    MANIFEST_TYPE,
    SPEC_VERSION,
    Manifest,
    SignedManifest,
    decode_document,
)

DOMAIN = b"memsync-view-manifest-v1\n"
MAX_MANIFEST_BYTES = 1024 * 1024  # 512 files with long paths stay far below this


class ManifestError(MemsyncError):
    """A manifest cannot be built or read; `code` is the CONTRACT §3 trust code to report."""

    exit_code = 1

    def __init__(self, message: str, *, code: str = "signature-invalid") -> None:
        super().__init__(message)
        self.code = code


class CanonicalJSONError(ManifestError):
    """A value holds something canonical JSON does not allow (bool, float, None, list…)."""


@dataclass(frozen=True)
class Verdict:
    """The outcome of `verify_manifest`: the manifest (when readable), every problem, and the
    ids of the pinned keys whose signatures verified."""

    manifest: Manifest | None
    problems: tuple[Problem, ...]
    signed_by: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return self.manifest is not None and not self.problems


def canonical_json(value: object) -> bytes:
    """Sorted keys, `,`/`:` separators, UTF-8; only objects (str keys), strings and integers."""
    _check_canonical(value, "$")
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:  # a lone surrogate, e.g. from a "\ud800" escape
        raise CanonicalJSONError("canonical JSON: a string is not valid Unicode") from exc


def _check_canonical(value: object, where: str) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise CanonicalJSONError(f"canonical JSON: key {key!r} at {where} is not a string")
            _check_canonical(item, f"{where}.{key}")
    elif not isinstance(value, str) and type(value) is not int:  # bool is refused too
        raise CanonicalJSONError(
            f"canonical JSON allows only objects, strings and integers; "
            f"found {type(value).__name__} at {where}"
        )


def signed_bytes(signed: Mapping[str, object]) -> bytes:
    """The bytes a signature covers: the domain prefix, then the canonical JSON of `signed`."""
    return DOMAIN + canonical_json(dict(signed))


def build_signed(
    view_id: str,
    revision: int,
    package_bytes_len: int,
    package_sha256: str,
    files: Mapping[str, str],
    published_at: datetime,
    expires: datetime,
) -> dict[str, Any]:
    """The `signed` object of a new manifest, checked against the wire model."""
    if published_at.tzinfo is None or expires.tzinfo is None:
        raise InternalError("internal: manifest times must be timezone-aware")
    if expires <= published_at:
        raise ManifestError(
            f"manifest would expire ({rfc3339(expires)}) before it is published "
            f"({rfc3339(published_at)})"
        )
    signed: dict[str, Any] = {
        "_type": MANIFEST_TYPE,
        "spec_version": SPEC_VERSION,
        "view_id": view_id,
        "revision": revision,
        "published_at": rfc3339(published_at),
        "expires": rfc3339(expires),
        "package": {"length": package_bytes_len, "sha256": package_sha256},
        "files": dict(files),
    }
    _validate_signed(signed)
    return signed


def sign_manifest(signed: Mapping[str, Any], keys: Sequence[Ed25519PrivateKey]) -> bytes:
    """The manifest document for `signed`, with one signature per distinct key."""
    _validate_signed(signed)
    message = signed_bytes(signed)
    signatures: list[dict[str, str]] = []
    seen: set[str] = set()
    for key in keys:
        ident = key_id(key)
        if ident in seen:
            continue
        seen.add(ident)
        sig = base64.b64encode(key.sign(message)).decode("ascii")
        signatures.append({"keyid": ident, "sig": sig})
    document = {"signed": dict(signed), "signatures": signatures}
    return (json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode()


def _validate_signed(signed: Mapping[str, Any]) -> None:
    try:
        SignedManifest.model_validate(dict(signed))
    except ValidationError as exc:
        raise ManifestError(f"invalid manifest: {_describe(exc, 'signed')}") from exc
    canonical_json(dict(signed))


def parse_manifest(data: bytes) -> Manifest:
    """Read a manifest strictly; raise `ManifestError` (code `signature-invalid`) otherwise."""
    return _parse(data)[1]


def _parse(data: bytes) -> tuple[dict[str, Any], Manifest]:
    try:
        document = decode_document(data, max_bytes=MAX_MANIFEST_BYTES)
        manifest = Manifest.model_validate(document)
    except ValidationError as exc:
        raise ManifestError(f"invalid manifest: {_describe(exc)}") from exc
    except ValueError as exc:
        raise ManifestError(f"manifest is unreadable: {exc}") from exc
    signed: dict[str, Any] = document["signed"]
    canonical_json(signed)  # refuses lone surrogates, which the model lets through
    return document, manifest


def _describe(exc: ValidationError, prefix: str = "") -> str:
    parts = []
    for error in exc.errors(include_input=False, include_url=False)[:5]:
        location = ".".join(str(part) for part in (prefix, *error["loc"]) if part != "")
        parts.append(f"{location or 'manifest'}: {error['msg']}")
    more = exc.error_count() - len(parts)
    return "; ".join(parts) + (f" (and {more} more)" if more > 0 else "")


def verify_manifest(
    data: bytes,
    *,
    view_id: str,
    keys: Sequence[str],
    threshold: int,
    trusted_revision: int | None,
    trusted_sha256: str | None,
    now: datetime,
    allow_unsigned: bool = False,
) -> Verdict:
    """Judge a manifest as a consumer would (CONTRACT §5) and report every trust problem."""
    if now.tzinfo is None:
        raise InternalError("internal: verification time must be timezone-aware")
    pinned: dict[str, Ed25519PublicKey] = {}
    for text in keys:
        public = parse_public_key(text)
        pinned.setdefault(key_id(public), public)
    if threshold < 1 and not allow_unsigned:
        raise UsageError(f"trust threshold must be at least 1 (got {threshold})")
    try:
        document, manifest = _parse(data)
    except ManifestError as exc:
        return Verdict(None, (Problem(exc.code, None, None, exc.message),), ())
    problems: list[Problem] = []
    signed_by: tuple[str, ...] = ()
    if not allow_unsigned:
        signed_by, problem = _check_signatures(document, manifest, pinned, threshold)
        problems.extend([problem] if problem else [])
    problems.extend(_check_claims(manifest.signed, view_id, trusted_revision, trusted_sha256, now))
    return Verdict(manifest, tuple(problems), signed_by)


def _check_signatures(
    document: dict[str, Any],
    manifest: Manifest,
    pinned: Mapping[str, Ed25519PublicKey],
    threshold: int,
) -> tuple[tuple[str, ...], Problem | None]:
    message = signed_bytes(document["signed"])
    good: list[str] = []
    failed: set[str] = set()
    unknown: set[str] = set()
    for signature in manifest.signatures:
        public = pinned.get(signature.keyid)
        if public is None:
            unknown.add(signature.keyid)
        elif signature.keyid not in good:
            if _verifies(public, signature.sig, message):
                good.append(signature.keyid)
            else:
                failed.add(signature.keyid)
    failed.difference_update(good)
    if len(good) >= threshold:
        return tuple(good), None
    if failed:
        text = f"signature by pinned key(s) {', '.join(sorted(failed))} does not verify"
        return tuple(good), _trust("signature-invalid", text)
    if not good:
        if unknown:
            text = f"signed only by keys that are not pinned: {', '.join(sorted(unknown))}"
        else:
            text = "manifest carries no signatures"
        return (), _trust("untrusted-key", text)
    text = f"{len(good)} distinct pinned key(s) signed; the threshold is {threshold}"
    return tuple(good), _trust("signature-threshold", text)


def _verifies(public: Ed25519PublicKey, sig: str, message: bytes) -> bool:
    try:
        raw = base64.b64decode(sig, validate=True)
    except (binascii.Error, ValueError):
        return False
    if len(raw) != 64:
        return False
    try:
        public.verify(raw, message)
    except InvalidSignature:
        return False
    return True


def _check_claims(
    signed: SignedManifest,
    view_id: str,
    trusted_revision: int | None,
    trusted_sha256: str | None,
    now: datetime,
) -> list[Problem]:
    problems: list[Problem] = []
    if signed.view_id != view_id:
        problems.append(
            _trust("wrong-view", f"manifest is for view {signed.view_id!r}, not {view_id!r}")
        )
    if trusted_revision is not None and signed.revision < trusted_revision:
        text = f"revision {signed.revision} is below the trusted revision {trusted_revision}"
        problems.append(_trust("rollback", text))
    elif (
        trusted_revision is not None
        and trusted_sha256 is not None
        and signed.revision == trusted_revision
        and signed.package.sha256 != trusted_sha256.lower()
    ):
        text = (
            f"revision {signed.revision} names package {signed.package.sha256}, "
            f"but the trusted revision {trusted_revision} is package {trusted_sha256.lower()}"
        )
        problems.append(_trust("equivocation", text))
    if signed.expires_time <= now:
        text = f"manifest expired at {signed.expires} (now {rfc3339(now)})"
        problems.append(_trust("expired", text))
    return problems


def _trust(code: str, message: str) -> Problem:
    return Problem(code=code, path=None, line=None, message=message)


def check_package_bytes(manifest: Manifest, length: int, sha256: str) -> list[Problem]:
    """Compare a downloaded package's length and SHA-256 with what the manifest declares."""
    package = manifest.signed.package
    problems: list[Problem] = []
    if length != package.length:
        text = f"package is {length} bytes; the manifest declares {package.length}"
        problems.append(_trust("length-mismatch", text))
    if sha256.lower() != package.sha256:
        text = f"package SHA-256 is {sha256.lower()}; the manifest declares {package.sha256}"
        problems.append(_trust("hash-mismatch", text))
    return problems


def check_files(manifest: Manifest, files: Mapping[str, str]) -> list[Problem]:
    """Compare the manifest's `files` (path → SHA-256 hex) with the extracted files."""
    declared = manifest.signed.files
    problems: list[Problem] = []
    for path in sorted(declared.keys() | files.keys()):
        want, got = declared.get(path), files.get(path)
        if got is None:
            message = "listed in the manifest but missing from the package"
        elif want is None:
            message = "in the package but not listed in the manifest"
        elif got.lower() != want:
            message = f"SHA-256 is {got.lower()}; the manifest declares {want}"
        else:
            continue
        problems.append(Problem(code="hash-mismatch", path=path, line=None, message=message))
    return problems
