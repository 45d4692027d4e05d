"""Commit signatures: who signed a raw Git commit object, checked in process.

A commit signed with git's `gpg.format=ssh` carries a `gpgsig` header whose continuation
lines hold an armored SSHSIG (OpenSSH's PROTOCOL.sshsig) made in the namespace `git` over
the commit object without that header. This module splits a raw commit object (the bytes
`git cat-file commit` prints) into that payload and signature, and decides, purely:

- `verify(raw, signers)`: the `Verdict` for one commit against the pinned `Signers`:
  trusted, `unsigned-commit`, `untrusted-signer` or `bad-signature` (CONTRACT.md §8);
- `signer_fingerprint(raw)`: "SHA256:…" (as `ssh-keygen -l` prints it) of the key the
  signature embeds, only when the signature verifies against that key; otherwise None.

Nothing here runs a program or reads a repository's `gpg.*` configuration: the trusted
keys come only from memsync's own config. Parsing is strict, stricter than git's and
ssh-keygen's where they are lax without need: exactly one signature header, canonical
base64 in whole armor lines, an SSHSIG blob with nothing after its last field, the hash
`sha256` or `sha512` only, and the embedded key compared byte for byte with a pinned key's
blob. So any change to any byte of a signed commit object is refused (property-tested).
The cryptography is `sshsig`'s (Ed25519 and RSA with SHA-2; other key types are refused).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from sshsig import PublicKey
from sshsig.sshsig import SshsigWrapper

SignatureCode = Literal["unsigned-commit", "untrusted-signer", "bad-signature"]

NAMESPACE = b"git"
_SIGNATURE_HEADER = b"gpgsig"
_BEGIN = b"-----BEGIN SSH SIGNATURE-----"
_END = b"-----END SSH SIGNATURE-----"
_MAGIC = b"SSHSIG"
_VERSION = 1
_HASHES = frozenset({b"sha256", b"sha512"})  # what ssh-keygen itself accepts
# The signature algorithms each supported key type may use (never SHA-1 RSA).
_SIGNATURE_ALGORITHMS: Mapping[str, frozenset[bytes]] = {
    "ssh-ed25519": frozenset({b"ssh-ed25519"}),
    "ssh-rsa": frozenset({b"rsa-sha2-256", b"rsa-sha2-512"}),
}
KEY_TYPES = tuple(_SIGNATURE_ALGORITHMS)
MIN_RSA_BITS = 2048
MAX_SIGNATURE_BYTES = 64 * 1024  # an RSA-16384 SSHSIG is under 5 KiB armored
_OTHER_FORMATS = {
    b"-----BEGIN PGP SIGNATURE-----": "an OpenPGP signature",
    b"-----BEGIN SIGNED MESSAGE-----": "an X.509 signature",
}


class MalformedSignature(ValueError):
    """A signature header or SSHSIG blob that is not exactly what OpenSSH writes."""


@dataclass(frozen=True, slots=True)
class SignedCommit:
    """A raw commit object split as git verifies it: `payload` is the object without its
    signature header; `signature` the header's text (continuation spaces removed), or None
    for an unsigned commit."""

    payload: bytes
    signature: bytes | None


@dataclass(frozen=True, slots=True)
class SignerKey:
    """One pinned OpenSSH public key: its wire blob, its fingerprint and its comment."""

    key_type: str
    blob: bytes
    fingerprint: str
    comment: str

    def public_key(self) -> PublicKey:
        return PublicKey.from_ssh_encoding(self.blob)


@dataclass(frozen=True, slots=True)
class Signers:
    """The keys a root trusts, by blob (a key listed twice counts once)."""

    keys: Mapping[bytes, SignerKey]

    @classmethod
    def of(cls, lines: Iterable[str]) -> Signers:
        """Parse OpenSSH public key lines (`parse_signer`); raise ValueError for a bad one."""
        keys: dict[bytes, SignerKey] = {}
        for line in lines:
            key = parse_signer(line)
            keys.setdefault(key.blob, key)
        return cls(keys)

    def fingerprints(self) -> tuple[str, ...]:
        return tuple(sorted(key.fingerprint for key in self.keys.values()))


@dataclass(frozen=True, slots=True)
class Verdict:
    """What one commit's signature says. `code` is None when a pinned signer's signature
    verifies; `fingerprint` names the key the signature claims (proven only when trusted);
    `detail` says why, for a person, without any secret."""

    code: SignatureCode | None
    fingerprint: str | None
    detail: str

    @property
    def trusted(self) -> bool:
        return self.code is None


def key_fingerprint(blob: bytes) -> str:
    """ "SHA256:<unpadded base64>" of a public key blob, as `ssh-keygen -l` prints it."""
    digest = base64.b64encode(hashlib.sha256(blob).digest()).decode("ascii")
    return "SHA256:" + digest.rstrip("=")


def parse_signer(line: str) -> SignerKey:
    """One OpenSSH public key line, `<type> <base64> [comment]`; raise ValueError saying
    what is wrong (a private key, an unsupported type, a short RSA key, bad base64)."""
    text = line.strip()
    if "PRIVATE KEY" in text:
        raise ValueError("this is a private key; list the public key (the .pub file's line)")
    parts = text.split(maxsplit=2)
    if len(parts) < 2:
        raise ValueError("expected an OpenSSH public key: '<type> <base64> [comment]'")
    key_type, encoded = parts[0], parts[1]
    if key_type not in _SIGNATURE_ALGORITHMS:
        raise ValueError(
            f"key type {key_type[:40]!r} is not supported for commit signatures "
            f"(use {' or '.join(KEY_TYPES)})"
        )
    blob = _strict_b64(encoded.encode("ascii", "replace"))
    if blob is None:
        raise ValueError("the key's base64 is not valid")
    try:
        strings = _ssh_strings(blob)
        key = PublicKey.from_ssh_encoding(blob)
    except (MalformedSignature, ValueError, NotImplementedError):
        raise ValueError(f"not a valid {key_type} public key") from None
    if strings[0] != key_type.encode() or key.algo_name != key_type:
        raise ValueError(f"the key's blob is not a {key_type} key")
    if _canonical_blob(key) != blob:
        raise ValueError(f"not a canonical {key_type} public key")
    if key_type == "ssh-rsa" and int.from_bytes(strings[2], "big").bit_length() < MIN_RSA_BITS:
        raise ValueError(f"RSA keys shorter than {MIN_RSA_BITS} bits are refused")
    comment = parts[2] if len(parts) > 2 else ""
    return SignerKey(key_type, blob, key_fingerprint(blob), comment)


def split_commit(raw: bytes) -> SignedCommit:
    """Split a raw commit object into payload and signature, as git's
    `parse_buffer_signed_by_header` does for SHA-1 repositories; raise MalformedSignature
    for a second signature header or a `gpgsig-*` header git would also drop."""
    payload: list[bytes] = []
    signature: list[bytes] = []
    headers, separator, message = raw.partition(b"\n\n")
    lines = headers.split(b"\n")
    in_signature = False
    seen = False
    for line in lines:
        if in_signature and line.startswith(b" "):
            signature.append(line[1:])
            continue
        in_signature = False
        if line.startswith(_SIGNATURE_HEADER + b" "):
            if seen:
                raise MalformedSignature("more than one signature header")
            seen = in_signature = True
            signature.append(line[len(_SIGNATURE_HEADER) + 1 :])
        elif line.startswith(_SIGNATURE_HEADER):
            raise MalformedSignature(f"unexpected header {line[:20]!r}")
        else:
            payload.append(line)
    body = b"\n".join(payload) + separator + message
    if not seen:
        return SignedCommit(raw, None)
    return SignedCommit(body, b"\n".join(signature) + b"\n")


def verify(raw: bytes, signers: Signers | Iterable[str]) -> Verdict:
    """Decide whether a pinned signer signed this raw commit object (see module doc)."""
    pinned = signers if isinstance(signers, Signers) else Signers.of(signers)
    try:
        split = split_commit(raw)
    except MalformedSignature as exc:
        return Verdict("bad-signature", None, str(exc))
    if split.signature is None:
        return Verdict("unsigned-commit", None, "the commit carries no signature")
    for begin, what in _OTHER_FORMATS.items():
        if split.signature.startswith(begin):
            return Verdict(
                "untrusted-signer", None, f"signed with {what}, not an SSH key of the signers"
            )
    try:
        sig = _parse_sshsig(split.signature)
    except MalformedSignature as exc:
        return Verdict("bad-signature", None, f"malformed SSH signature: {exc}")
    fingerprint = key_fingerprint(sig.key_blob)
    signer = pinned.keys.get(sig.key_blob)
    if signer is None:
        return Verdict("untrusted-signer", fingerprint, f"signed by {fingerprint}, not pinned")
    if not _verifies(signer.public_key(), signer.key_type, sig, split.payload):
        return Verdict(
            "bad-signature", fingerprint, "the signature does not verify over the commit"
        )
    return Verdict(None, fingerprint, f"signed by {fingerprint} ({signer.comment or 'pinned'})")


def signer_fingerprint(raw: bytes) -> str | None:
    """The fingerprint of the key this commit's SSH signature embeds, only when the
    signature verifies against that key (whoever holds it: trust is `verify`'s question)."""
    try:
        split = split_commit(raw)
        if split.signature is None:
            return None
        sig = _parse_sshsig(split.signature)
        key = PublicKey.from_ssh_encoding(sig.key_blob)
    except (MalformedSignature, ValueError, NotImplementedError):
        return None
    if key.algo_name not in _SIGNATURE_ALGORITHMS or _canonical_blob(key) != sig.key_blob:
        return None
    if not _verifies(key, key.algo_name, sig, split.payload):
        return None
    return key_fingerprint(sig.key_blob)


@dataclass(frozen=True, slots=True)
class _Sshsig:
    key_blob: bytes
    hash_algorithm: bytes
    signature_algorithm: bytes
    signature: bytes
    signature_blob: bytes


def _parse_sshsig(armored: bytes) -> _Sshsig:
    if len(armored) > MAX_SIGNATURE_BYTES:
        raise MalformedSignature("signature too long")
    lines = armored.split(b"\n")
    if len(lines) < 4 or lines[0] != _BEGIN or lines[-2] != _END or lines[-1] != b"":
        raise MalformedSignature("not an armored SSH signature")
    blob = _strict_b64(b"".join(lines[1:-2]), whole_lines=lines[1:-2])
    if blob is None:
        raise MalformedSignature("invalid base64 in the armor")
    if blob[:6] != _MAGIC:
        raise MalformedSignature("no SSHSIG preamble")
    try:
        version = struct.unpack(">I", blob[6:10])[0]
    except struct.error:
        raise MalformedSignature("truncated") from None
    if version != _VERSION:
        raise MalformedSignature(f"version {version} is not 1")
    key_blob, namespace, reserved, hash_algorithm, signature_blob = _ssh_strings(blob[10:], 5)
    if namespace != NAMESPACE:
        raise MalformedSignature("the namespace is not 'git'")
    if reserved:
        raise MalformedSignature("the reserved field is not empty")
    if hash_algorithm not in _HASHES:
        raise MalformedSignature("the hash is neither sha256 nor sha512")
    signature_algorithm, signature = _ssh_strings(signature_blob, 2)
    return _Sshsig(key_blob, hash_algorithm, signature_algorithm, signature, signature_blob)


def _verifies(key: PublicKey, key_type: str, sig: _Sshsig, payload: bytes) -> bool:
    if sig.signature_algorithm not in _SIGNATURE_ALGORITHMS.get(key_type, frozenset()):
        return False
    digest = hashlib.new(sig.hash_algorithm.decode("ascii"), payload).digest()
    signed = SshsigWrapper(namespace=NAMESPACE, hash_algo=sig.hash_algorithm, hash=digest)
    try:
        return key.do_verify(sig.signature_blob, signed.to_bytes()) is None
    except (ValueError, AssertionError):  # sshsig asserts the algorithm name; checked above
        return False


def _canonical_blob(key: PublicKey) -> bytes:
    return base64.b64decode(key.openssh_str().split()[1])


def _ssh_strings(data: bytes, count: int | None = None) -> list[bytes]:
    """Length-prefixed SSH strings filling `data` exactly (`count` of them when given)."""
    out: list[bytes] = []
    offset = 0
    while offset < len(data) and (count is None or len(out) < count):
        if offset + 4 > len(data):
            raise MalformedSignature("truncated")
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        offset += 4
        if offset + length > len(data):
            raise MalformedSignature("truncated")
        out.append(data[offset : offset + length])
        offset += length
    if offset != len(data) or (count is not None and len(out) != count):
        raise MalformedSignature("unexpected length")
    if not out:
        raise MalformedSignature("empty")
    return out


def _strict_b64(text: bytes, whole_lines: Iterable[bytes] = ()) -> bytes | None:
    """Canonical base64 only: one spelling per byte string, so no flip decodes the same."""
    if any(not line for line in whole_lines):
        return None
    try:
        data = binascii.a2b_base64(text, strict_mode=True)
    except binascii.Error:
        return None
    return data if base64.b64encode(data) == text else None
