"""Signed admission's trust anchor: the record `admission.json` beside a root's state
(written by `remember` after every cycle: when the policy was turned on and the trusted
upstream then), the policy's pinned keys as `status` shows them, and the codes the checks
report, all without loading the admission checks (`roots.admission`): a cold `memsync
status`, and a cycle of a root that does not require signatures, read only this.
"""

from __future__ import annotations

from pathlib import Path

from memsync import timefmt
from memsync.atomicfile import read_json, write_json

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any

    from memsync.config.model import AdmissionSettings

RECORD = "admission.json"
# The codes `roots.admission.judge` reports (`validators.commitsig.CODES`, named here
# without loading either).
CODES = frozenset({"unsigned-commit", "untrusted-signer", "bad-signature"})


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
    import hashlib  # noqa: PLC0415 - OpenSSL's load: likewise

    blob = base64.b64decode(line.split()[1])
    return "SHA256:" + base64.b64encode(hashlib.sha256(blob).digest()).decode().rstrip("=")


# -- the trust anchor --------------------------------------------------------------------


def remember(base: Path, settings: AdmissionSettings, trusted: str | None) -> None:
    """After a cycle: record when signed admission was turned on and the trusted upstream
    then (a root with none yet gets the first one a cycle trusts); drop the record when
    the policy is off. Nothing is written while the record stands."""
    path = base / RECORD
    if settings.require != "signed":
        path.unlink(missing_ok=True)
        return
    record = read_json(path)
    if isinstance(record, dict) and (isinstance(record.get("anchor"), str) or trusted is None):
        return
    since = record.get("since") if isinstance(record, dict) else None
    stamp = since if isinstance(since, str) else timefmt.rfc3339(timefmt.now())
    write_json(path, {"anchor": trusted, "since": stamp})
