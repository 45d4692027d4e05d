"""View manifests: canonical JSON, signing, strict parsing, and every trust refusal."""

from __future__ import annotations

import base64
import hashlib
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from hypothesis import given
from hypothesis import strategies as st

from memsync.errors import InternalError, MemsyncError, UsageError
from memsync.views.keys import generate_key, key_id, load_private_key, public_key_text
from memsync.views.manifest import (
    CanonicalJSONError,
    ManifestError,
    Verdict,
    build_signed,
    canonical_json,
    check_files,
    check_package_bytes,
    parse_manifest,
    sign_manifest,
    signed_bytes,
    verify_manifest,
)

PUBLISHED = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
EXPIRES = PUBLISHED + timedelta(days=30)
NOW = PUBLISHED + timedelta(hours=1)
PACKAGE = b"PK\x03\x04 pretend package bytes"
PACKAGE_SHA = hashlib.sha256(PACKAGE).hexdigest()
FILES = {"view.md": "a" * 64, "dist/MEMORY.md": "b" * 64}


@pytest.fixture
def keys(tmp_path: Path) -> list[Ed25519PrivateKey]:
    """Three real keys, written with `generate_key` and read back from their files."""
    loaded = []
    for name in ("one", "two", "three"):
        generate_key(tmp_path / f"{name}.key")
        loaded.append(load_private_key(tmp_path / f"{name}.key"))
    return loaded


def signed(**changes: Any) -> dict[str, Any]:
    base = build_signed("auth", 7, len(PACKAGE), PACKAGE_SHA, FILES, PUBLISHED, EXPIRES)
    base.update(changes)
    return base


def verify(data: bytes, pinned: list[Ed25519PrivateKey], **options: Any) -> Verdict:
    settings: dict[str, Any] = {
        "view_id": "auth",
        "keys": [public_key_text(key) for key in pinned],
        "threshold": 1,
        "trusted_revision": None,
        "trusted_sha256": None,
        "now": NOW,
    }
    settings.update(options)
    return verify_manifest(data, **settings)


def codes(verdict: Verdict) -> list[str]:
    return [problem.code for problem in verdict.problems]


def document(data: bytes) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(data)
    return loaded


def dump(value: object) -> bytes:
    return json.dumps(value).encode()


# --- round trip ------------------------------------------------------------------------


def test_sign_parse_verify_round_trip(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(), [keys[0]])
    manifest = parse_manifest(data)
    assert manifest.signed.view_id == "auth"
    assert manifest.signed.type_ == "memsync.view-manifest"
    assert manifest.signed.revision == 7
    assert manifest.signed.expires_time == EXPIRES
    assert manifest.signed.files == FILES
    verdict = verify(data, [keys[0]])
    assert verdict.ok, verdict.problems
    assert verdict.signed_by == (key_id(keys[0]),)
    assert verdict.manifest == manifest


def test_document_matches_the_contract_layout(keys: list[Ed25519PrivateKey]) -> None:
    doc = document(sign_manifest(signed(), [keys[0]]))
    assert set(doc) == {"signed", "signatures"}
    assert doc["signed"]["_type"] == "memsync.view-manifest"
    assert doc["signed"]["spec_version"] == 1
    assert doc["signed"]["published_at"] == "2026-11-29T20:00:00Z"
    assert doc["signed"]["package"] == {"length": len(PACKAGE), "sha256": PACKAGE_SHA}
    [signature] = doc["signatures"]
    assert signature["keyid"] == key_id(keys[0])
    assert len(base64.b64decode(signature["sig"], validate=True)) == 64


def test_signature_covers_the_domain_prefixed_canonical_json(
    keys: list[Ed25519PrivateKey],
) -> None:
    body = signed()
    doc = document(sign_manifest(body, [keys[0]]))
    raw = base64.b64decode(doc["signatures"][0]["sig"])
    message = b"memsync-view-manifest-v1\n" + canonical_json(body)
    assert signed_bytes(body) == message
    keys[0].public_key().verify(raw, message)  # raises if not


def test_verification_does_not_depend_on_layout(keys: list[Ed25519PrivateKey]) -> None:
    doc = document(sign_manifest(signed(), [keys[0]]))
    reordered = {
        "signatures": doc["signatures"],
        "signed": dict(reversed(list(doc["signed"].items()))),
    }
    assert verify(json.dumps(reordered, indent=7).encode(), [keys[0]]).ok


def test_non_ascii_paths_are_signed_as_utf8(keys: list[Ed25519PrivateKey]) -> None:
    body = signed(files={"dist/MEMORY_é.md": "c" * 64})
    assert "é".encode() in canonical_json(body)
    assert verify(sign_manifest(body, [keys[0]]), [keys[0]]).ok


def test_sign_uses_each_distinct_key_once(keys: list[Ed25519PrivateKey]) -> None:
    doc = document(sign_manifest(signed(), [keys[0], keys[1], keys[0]]))
    assert [s["keyid"] for s in doc["signatures"]] == [key_id(keys[0]), key_id(keys[1])]


def test_threshold_two_with_two_distinct_keys(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(), [keys[0], keys[1], keys[2]])
    verdict = verify(data, [keys[0], keys[1]], threshold=2)
    assert verdict.ok
    assert set(verdict.signed_by) == {key_id(keys[0]), key_id(keys[1])}


def test_unknown_signers_are_ignored(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(), [keys[2], keys[0]])
    verdict = verify(data, [keys[0]])
    assert verdict.ok
    assert verdict.signed_by == (key_id(keys[0]),)


# --- signature attacks -----------------------------------------------------------------


def test_forged_signature(keys: list[Ed25519PrivateKey]) -> None:
    doc = document(sign_manifest(signed(), [keys[0]]))
    raw = bytearray(base64.b64decode(doc["signatures"][0]["sig"]))
    raw[5] ^= 0x01
    doc["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()
    verdict = verify(dump(doc), [keys[0]])
    assert codes(verdict) == ["signature-invalid"]
    assert verdict.signed_by == ()
    assert key_id(keys[0]) in verdict.problems[0].message


def test_content_changed_after_signing(keys: list[Ed25519PrivateKey]) -> None:
    doc = document(sign_manifest(signed(), [keys[0]]))
    doc["signed"]["files"]["view.md"] = "d" * 64
    assert codes(verify(dump(doc), [keys[0]])) == ["signature-invalid"]


@pytest.mark.parametrize("sig", ["", "not base64!", "AAAA", "A" * 87 + "="])
def test_malformed_signature_by_a_pinned_key(keys: list[Ed25519PrivateKey], sig: str) -> None:
    doc = document(sign_manifest(signed(), []))
    doc["signatures"] = [{"keyid": key_id(keys[0]), "sig": sig}]
    assert codes(verify(dump(doc), [keys[0]])) == ["signature-invalid"]


def test_signature_made_for_another_purpose(keys: list[Ed25519PrivateKey]) -> None:
    """A signature over the bare canonical JSON (no domain prefix) never verifies."""
    body = signed()
    sig = base64.b64encode(keys[0].sign(canonical_json(body))).decode()
    doc = {"signed": body, "signatures": [{"keyid": key_id(keys[0]), "sig": sig}]}
    assert codes(verify(dump(doc), [keys[0]])) == ["signature-invalid"]


def test_untrusted_key(keys: list[Ed25519PrivateKey]) -> None:
    verdict = verify(sign_manifest(signed(), [keys[2]]), [keys[0]])
    assert codes(verdict) == ["untrusted-key"]
    assert key_id(keys[2]) in verdict.problems[0].message
    assert public_key_text(keys[2]) not in verdict.problems[0].message


def test_unsigned_manifest(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(), [])
    assert codes(verify(data, [keys[0]])) == ["untrusted-key"]
    verdict = verify(data, [], allow_unsigned=True, threshold=0)
    assert verdict.ok
    assert verdict.signed_by == ()


def test_allow_unsigned_skips_only_signatures(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(), [])
    verdict = verify(data, [], allow_unsigned=True, view_id="other", now=EXPIRES)
    assert codes(verdict) == ["wrong-view", "expired"]


def test_one_signature_duplicated_does_not_reach_threshold(
    keys: list[Ed25519PrivateKey],
) -> None:
    doc = document(sign_manifest(signed(), [keys[0]]))
    doc["signatures"] = doc["signatures"] * 2
    verdict = verify(dump(doc), [keys[0], keys[1]], threshold=2)
    assert codes(verdict) == ["signature-threshold"]
    assert verdict.signed_by == (key_id(keys[0]),)


def test_same_key_pinned_twice_is_still_one_key(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(), [keys[0]])
    verdict = verify(data, [keys[0], keys[0]], threshold=2)
    assert codes(verdict) == ["signature-threshold"]


def test_good_and_forged_below_threshold_is_signature_invalid(
    keys: list[Ed25519PrivateKey],
) -> None:
    doc = document(sign_manifest(signed(), [keys[0], keys[1]]))
    doc["signatures"][1]["sig"] = doc["signatures"][0]["sig"]  # key two "signs" with one's sig
    verdict = verify(dump(doc), [keys[0], keys[1]], threshold=2)
    assert codes(verdict) == ["signature-invalid"]
    assert key_id(keys[1]) in verdict.problems[0].message


def test_threshold_below_one_is_a_configuration_error(keys: list[Ed25519PrivateKey]) -> None:
    with pytest.raises(UsageError):
        verify(sign_manifest(signed(), [keys[0]]), [keys[0]], threshold=0)


def test_naive_time_is_refused(keys: list[Ed25519PrivateKey]) -> None:
    with pytest.raises(InternalError):
        verify(sign_manifest(signed(), [keys[0]]), [keys[0]], now=datetime(2026, 12, 1))


# --- claims ----------------------------------------------------------------------------


def test_rollback(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(), [keys[0]])
    verdict = verify(data, [keys[0]], trusted_revision=8, trusted_sha256="e" * 64)
    assert codes(verdict) == ["rollback"]
    assert "7" in verdict.problems[0].message and "8" in verdict.problems[0].message


def test_equivocation(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(), [keys[0]])
    verdict = verify(data, [keys[0]], trusted_revision=7, trusted_sha256="e" * 64)
    assert codes(verdict) == ["equivocation"]


def test_same_revision_same_package_and_newer_revisions_pass(
    keys: list[Ed25519PrivateKey],
) -> None:
    data = sign_manifest(signed(), [keys[0]])
    assert verify(data, [keys[0]], trusted_revision=7, trusted_sha256=PACKAGE_SHA.upper()).ok
    assert verify(data, [keys[0]], trusted_revision=6, trusted_sha256="e" * 64).ok


def test_expired_and_exactly_at_expiry(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(), [keys[0]])
    assert codes(verify(data, [keys[0]], now=EXPIRES + timedelta(seconds=1))) == ["expired"]
    assert codes(verify(data, [keys[0]], now=EXPIRES)) == ["expired"]
    assert verify(data, [keys[0]], now=EXPIRES - timedelta(seconds=1)).ok


def test_wrong_view(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(view_id="billing"), [keys[0]])
    verdict = verify(data, [keys[0]])
    assert codes(verdict) == ["wrong-view"]
    assert "billing" in verdict.problems[0].message


def test_every_problem_is_reported_at_once(keys: list[Ed25519PrivateKey]) -> None:
    data = sign_manifest(signed(view_id="billing"), [keys[2]])
    verdict = verify(data, [keys[0]], trusted_revision=9, now=EXPIRES)
    assert codes(verdict) == ["untrusted-key", "wrong-view", "rollback", "expired"]
    assert not verdict.ok
    assert verdict.manifest is not None


# --- package and files -----------------------------------------------------------------


def test_package_bytes(keys: list[Ed25519PrivateKey]) -> None:
    manifest = parse_manifest(sign_manifest(signed(), [keys[0]]))
    assert check_package_bytes(manifest, len(PACKAGE), PACKAGE_SHA) == []
    problems = check_package_bytes(manifest, len(PACKAGE) + 1, hashlib.sha256(b"x").hexdigest())
    assert [p.code for p in problems] == ["length-mismatch", "hash-mismatch"]


def test_files(keys: list[Ed25519PrivateKey]) -> None:
    manifest = parse_manifest(sign_manifest(signed(), [keys[0]]))
    assert check_files(manifest, dict(FILES)) == []
    extracted = {"view.md": "f" * 64, "extra.md": "a" * 64}
    problems = check_files(manifest, extracted)
    assert [(p.code, p.path) for p in problems] == [
        ("hash-mismatch", "dist/MEMORY.md"),
        ("hash-mismatch", "extra.md"),
        ("hash-mismatch", "view.md"),
    ]


# --- strict parsing --------------------------------------------------------------------


def _signed_text(keys: list[Ed25519PrivateKey]) -> str:
    return json.dumps(document(sign_manifest(signed(), [keys[0]])))


@pytest.mark.parametrize(
    ("edit", "reason"),
    [
        (lambda t: t.replace('"revision": 7', '"revision": 7, "revision": 8'), "duplicate"),
        (lambda t: t.replace('"view.md":', '"view.md": "x", "view.md":'), "duplicate"),
        (lambda t: '{"signatures": [], ' + t[1:], "duplicate"),
        (lambda t: t.replace('"revision": 7', '"revision": NaN'), "NaN"),
        (lambda t: t.replace('"revision": 7', '"revision": Infinity'), "Infinity"),
        (lambda t: t.replace('"revision": 7', '"revision": -Infinity'), "Infinity"),
        (lambda t: t.replace('"revision": 7', '"revision": 7.0'), "non-integer"),
        (lambda t: t.replace('"revision": 7', '"revision": 7e0'), "non-integer"),
        (lambda t: t + "{}", "not JSON"),
        (lambda t: t + " x", "not JSON"),
        (lambda t: "\ufeff" + t, "not JSON"),
        (lambda t: "[" + t + "]", "not an object"),
        (lambda t: t.replace('"view_id": "auth"', '"view_id": "auth\\ud800"'), "(?i)unicode"),
        (lambda t: t.replace('"view.md":', '"view\\udfff.md":'), "(?i)unicode"),
        (lambda t: t.replace('"revision": 7', '"revision": 7, "note": "x"'), "signed.note"),
        (lambda t: t.replace('"length": ', '"extra": 1, "length": '), "package.extra"),
        (lambda t: '{"extra": 1, ' + t[1:], "extra"),
        (lambda t: t.replace('"keyid": ', '"comment": "x", "keyid": '), "comment"),
        (lambda t: t.replace('"_type"', '"type_"'), "_type"),
        (lambda t: t.replace('"revision": 7', '"revision": "7"'), "revision"),
        (lambda t: t.replace('"revision": 7', '"revision": true'), "revision"),
        (lambda t: t.replace('"spec_version": 1', '"spec_version": 2'), "spec_version"),
        (lambda t: t.replace('"2026-12-29T20:00:00Z"', '"2026-12-29T20:00:00+00:00"'), "expires"),
        (lambda t: t.replace('"2026-12-29T20:00:00Z"', '"2026-02-30T20:00:00Z"'), "expires"),
        (lambda t: t.replace('"view_id": "auth"', '"view_id": ".."'), "view_id"),
        (lambda t: t.replace('"signatures": [', '"signatures": null, "x": ['), "signatures"),
    ],
)
def test_ambiguous_or_malformed_manifests_are_refused(
    keys: list[Ed25519PrivateKey], edit: Any, reason: str
) -> None:
    data = edit(_signed_text(keys)).encode()
    with pytest.raises(ManifestError, match=reason) as info:
        parse_manifest(data)
    assert info.value.code == "signature-invalid"
    assert isinstance(info.value, MemsyncError)
    verdict = verify(data, [keys[0]])
    assert verdict.manifest is None
    assert codes(verdict) == ["signature-invalid"]


def test_non_utf8_is_refused(keys: list[Ed25519PrivateKey]) -> None:
    text = _signed_text(keys).replace('"auth"', '"au\u00e9th"')
    with pytest.raises(ManifestError, match="not UTF-8"):
        parse_manifest(text.encode("latin-1"))
    with pytest.raises(ManifestError, match="not UTF-8"):
        parse_manifest(text.encode("utf-16"))


def test_oversized_and_deep_documents_are_refused() -> None:
    with pytest.raises(ManifestError, match="cap"):
        parse_manifest(b" " * (1024 * 1024 + 1))
    with pytest.raises(ManifestError):
        parse_manifest(b'{"a":' * 100_000 + b"1" + b"}" * 100_000)
    with pytest.raises(ManifestError):
        parse_manifest(b'{"a": ' + b"9" * 5000 + b"}")


# --- building --------------------------------------------------------------------------


def test_build_signed_refuses_bad_values(keys: list[Ed25519PrivateKey]) -> None:
    with pytest.raises(InternalError):
        build_signed("auth", 1, 1, PACKAGE_SHA, {}, datetime(2026, 1, 1), EXPIRES)
    with pytest.raises(ManifestError, match="expire"):
        build_signed("auth", 1, 1, PACKAGE_SHA, {}, PUBLISHED, PUBLISHED)
    with pytest.raises(ManifestError, match="view_id"):
        build_signed("a/b", 1, 1, PACKAGE_SHA, {}, PUBLISHED, EXPIRES)
    with pytest.raises(ManifestError, match="revision"):
        build_signed("auth", 0, 1, PACKAGE_SHA, {}, PUBLISHED, EXPIRES)
    with pytest.raises(ManifestError, match="sha256"):
        build_signed("auth", 1, 1, PACKAGE_SHA.upper(), {}, PUBLISHED, EXPIRES)
    with pytest.raises(ManifestError, match="note"):
        sign_manifest(signed(note="x"), [keys[0]])


def test_build_signed_is_utc_whole_seconds() -> None:
    local = PUBLISHED.astimezone(UTC).replace(microsecond=123456)
    body = build_signed("auth", 1, 0, PACKAGE_SHA, {}, local, EXPIRES)
    assert body["published_at"] == "2026-11-29T20:00:00Z"


# --- canonical JSON --------------------------------------------------------------------


def test_canonical_json_exact_bytes() -> None:
    value = {"b": 1, "a": {"é": "x\n", "A": -2}}
    assert canonical_json(value) == '{"a":{"A":-2,"é":"x\\n"},"b":1}'.encode()


@pytest.mark.parametrize(
    "value",
    [True, 1.5, None, [1], {"a": False}, {"a": [1]}, {"a": None}, {1: "x"}, {"a": "\ud800"}],
)
def test_canonical_json_refuses(value: object) -> None:
    with pytest.raises(CanonicalJSONError):
        canonical_json(value)


json_values = st.recursive(
    st.text() | st.integers(),
    lambda children: st.dictionaries(st.text(), children, max_size=5),
    max_leaves=25,
)
json_objects = st.dictionaries(st.text(), json_values, max_size=6)


def _reversed(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _reversed(value[key]) for key in reversed(list(value))}
    return value


@given(json_objects)
def test_canonical_json_is_stable_and_order_independent(value: dict[str, Any]) -> None:
    encoded = canonical_json(value)
    assert canonical_json(_reversed(value)) == encoded
    assert json.loads(encoded) == value
    assert canonical_json(json.loads(encoded)) == encoded
    assert b"\n" not in encoded.replace(b"\\n", b"")
