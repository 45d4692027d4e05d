"""`views publish`: build, sign and upload a new revision of a view to a hub.

The revision is the hub's current one plus one, decided by `build.next_revision` as for
`views build`. Unchanged content (the deterministic package hashes the same) publishes
nothing. A retried upload of the same revision and
package is answered 200 by the hub, so a lost response is safe to retry by hand.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import ValidationError

from memsync import timefmt
from memsync.errors import ProblemError, UsageError
from memsync.secrets import SecretRef
from memsync.transports.http import ErrorKind, HttpError
from memsync.transports.hubclient import HubClient, view_url
from memsync.validators.problems import Problem
from memsync.views.build import (
    DEFAULT_EXPIRES,
    Current,
    build_package,
    next_revision,
    signed_manifest,
)
from memsync.views.manifest import MAX_MANIFEST_BYTES, ManifestError, parse_manifest
from memsync.wire.hub import ErrorBody

DEADLINE = 300.0


@dataclass(frozen=True)
class Published:
    view_id: str
    status: str  # "published" | "unchanged"
    revision: int
    sha256: str
    message: str


class PublishRefused(ProblemError):
    """The hub refused the upload; `problems` carries its reasons when it gave them."""

    needs_problems = False  # a 413 or an unreadable manifest has none


def secret_ref(text: str) -> SecretRef:
    """`env:NAME`, `file:PATH` or `credential:NAME` from the command line."""
    kind, sep, ref = text.partition(":")
    if not sep or kind not in ("env", "file", "credential") or not ref:
        raise UsageError(
            f"--token must be env:NAME, file:PATH or credential:NAME (got {kind}:…)"
            if sep
            else "--token must be env:NAME, file:PATH or credential:NAME",
            hint="secrets are never given on the command line itself",
        )
    return SecretRef.parse({kind: ref})


async def publish_view(
    root: Path,
    view_id: str,
    hub: str,
    token: str,
    keys: list[Ed25519PrivateKey],
    *,
    allow_http: bool = False,
    expires: timedelta = DEFAULT_EXPIRES,
) -> Published:
    built = build_package(root, view_id)
    base = view_url(hub, view_id)
    async with HubClient(allow_http=allow_http) as client:
        deadline = asyncio.get_running_loop().time() + DEADLINE
        current: Current | None = None
        try:
            got = await client.manifest(
                base,
                token=token,
                etag=None,
                max_bytes=MAX_MANIFEST_BYTES,
                deadline=deadline,
            )
            signed = parse_manifest(got.body or b"").signed
            current = Current(signed.revision, signed.package.sha256, signed.expires_time)
        except HttpError as exc:
            if exc.kind is not ErrorKind.NOT_FOUND:
                raise
        except ManifestError as exc:
            raise PublishRefused(
                f"the hub's current manifest is unreadable: {exc}",
                [Problem(exc.code, None, None, exc.message)],
            ) from exc
        now = timefmt.now()
        decided = next_revision(built.sha256, current, now=now, expires=expires)
        revision = decided.revision
        if decided.unchanged:
            return Published(
                view_id,
                "unchanged",
                revision,
                built.sha256,
                f"content unchanged; revision {revision} stays current",
            )
        manifest = signed_manifest(built, revision=revision, keys=keys, now=now, expires=expires)
        status, body = await client.upload(
            base, manifest=manifest, package=built.archive, token=token, deadline=deadline
        )
    if status in (200, 201):
        what = "renewed the expiry as revision" if decided.renews else "published"
        return Published(view_id, "published", revision, built.sha256, f"{what} {revision}")
    try:
        error = ErrorBody.model_validate_json(body)
    except ValidationError:
        raise PublishRefused(f"the hub answered {status}") from None
    problems = tuple(Problem(p.code, p.path, p.line, p.message) for p in error.problems or ())
    raise PublishRefused(
        f"the hub refused revision {revision} ({status} {error.error.code}): {error.error.message}",
        problems,
    )
