"""Signed admission's trust anchor as `status` shows it: the record `admission.json` beside
a root's state (written by `admission.remember` after a cycle: when the policy was turned
on and the trusted upstream then) and the policy's pinned keys, described without loading
the admission checks (a cold `memsync status` reads only this).
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.atomicfile import read_json

if TYPE_CHECKING:
    from memsync.config.model import AdmissionSettings

RECORD = "admission.json"


def describe(base: Path, settings: AdmissionSettings) -> dict[str, Any]:
    """The status document's `admission`: the policy, the pinned inline keys'
    fingerprints, the files of keys, and the anchor once a cycle has recorded it."""
    signed = settings.require == "signed"
    record = read_json(base / RECORD) if signed else None
    record = record if isinstance(record, dict) else {}
    anchor, since = record.get("anchor"), record.get("since")
    anchor = anchor if isinstance(anchor, str) else None
    since = since if isinstance(since, str) else None
    message = None
    if signed and since is not None:
        held = (
            f"commits up to {anchor[:12]}, the trusted upstream then,"
            if anchor
            else ("what the first sync found in the root (no trusted upstream then)")
        )
        message = (
            f"signed admission since {since}: {held} stay trusted; every newer commit, "
            "incoming or outgoing, needs a pinned signer's signature"
        )
    elif signed:
        message = "signed admission: the next cycle records the trust anchor"
    return {
        "require": settings.require,
        "signers": [_fingerprint(s) for s in settings.signers if isinstance(s, str)],
        "signer_files": [s.describe() for s in settings.signers if not isinstance(s, str)],
        "anchor": anchor,
        "since": since,
        "message": message,
    }


def _fingerprint(line: str) -> str:
    """An inline key's fingerprint without loading cryptography (the schema checked it)."""
    import base64  # noqa: PLC0415 - a root with inline signers only

    blob = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")
