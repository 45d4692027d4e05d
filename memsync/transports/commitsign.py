"""Signing the commits memsync makes: git's SSH signature (`gpg.format=ssh`), made in process.

A root's `signing.key` (a secret reference to an unencrypted OpenSSH private key: Ed25519,
ECDSA or RSA) signs every commit memsync writes into it. A commit is made unsigned as
before; `sign_commit` reads it back, signs its exact bytes as an SSHSIG (PROTOCOL.sshsig in
OpenSSH: namespace `git`, hash sha512, armored), inserts the `gpgsig` header where git puts
it (the end of the header block) and writes the new commit with `hash-object`. Tree,
parents, author, committer and message do not change, so `git verify-commit` with an
allowed-signers file listing the key accepts it, exactly as it accepts `git commit -S`.

No signing program runs: not gpg, not ssh-keygen, nothing a root's `gpg.*` config names
(the git box forces all of them off). The key is read when a commit is signed, so a
replaced key file is used from the next commit on (bytes already loaded once are not
parsed and checked again); errors name the config key and where the secret lives, never
its content. cryptography is imported on first use. A signed-admission root's commits
are what its signers list must accept: `doctor` prints this key's allowed-signers line.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from typing import TYPE_CHECKING

from memsync.errors import GitError, SecretError, require

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.types import PrivateKeyTypes

    from memsync.transports.git import Git
    from memsync.transports.gitcore import GitCore
    from memsync.transports.rootkeys import CommitKey

NAMESPACE = b"git"
HASH = "sha512"
MAX_COMMIT = 8 * 1024 * 1024  # a commit memsync made: a tree, a few parents, a message
MAX_LOADED = 64  # keys kept loaded, by the SHA-256 of their text (one a root, usually)
ARMOR_WIDTH = 70  # as ssh-keygen writes it
BEGIN = "-----BEGIN SSH SIGNATURE-----"
END = "-----END SSH SIGNATURE-----"
# git's signature header per object format (commit.c: gpg_sig_headers)
_HEADERS = {40: b"gpgsig", 64: b"gpgsig-sha256"}
_SIGNATURE_HEADERS = (b"gpgsig ", b"gpgsig-sha256 ")
_KEY_HINT = (
    "point signing.key at an unencrypted OpenSSH private key (ed25519, ecdsa or rsa), "
    "e.g. one made with `ssh-keygen -t ed25519 -N '' -f ~/.ssh/memsync_ed25519`"
)


class SigningKeyError(SecretError, GitError):
    """The root's signing key cannot be used (missing, unreadable, passphrase-protected, not
    an OpenSSH private key), named by where it is configured and where the secret lives,
    never by its content. A secret problem (exit 2, `secret-unavailable`) met in the git
    box: a cycle reports it as `error`, as it does a token it cannot read."""


class CommitSigner:
    """A loaded signing key: signs SSHSIG blobs and commits."""

    __slots__ = ("private", "public_blob")

    def __init__(self, private: PrivateKeyTypes, public_blob: bytes) -> None:
        self.private = private
        self.public_blob = public_blob  # the SSH wire encoding of the public key

    @property
    def public_key(self) -> str:
        """The public key as an allowed-signers line wants it: `ssh-ed25519 AAAA…`."""
        from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415
            Encoding,
            PublicFormat,
        )

        line = self.private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
        return line.decode("ascii")

    @property
    def fingerprint(self) -> str:
        """`SHA256:…` as ssh-keygen -l prints it."""
        digest = hashlib.sha256(self.public_blob).digest()
        return "SHA256:" + base64.b64encode(digest).decode("ascii").rstrip("=")

    def armored(self, message: bytes, namespace: bytes = NAMESPACE) -> str:
        """An armored SSHSIG of `message` (PROTOCOL.sshsig), ending in a newline."""
        digest = hashlib.sha512(message).digest()
        signed = (
            b"SSHSIG" + _string(namespace) + _string(b"") + _string(HASH.encode()) + _string(digest)
        )
        blob = (
            b"SSHSIG"
            + struct.pack(">I", 1)
            + _string(self.public_blob)
            + _string(namespace)
            + _string(b"")
            + _string(HASH.encode())
            + _string(_ssh_signature(self.private, signed))
        )
        text = base64.b64encode(blob).decode("ascii")
        lines = [text[i : i + ARMOR_WIDTH] for i in range(0, len(text), ARMOR_WIDTH)]
        return "\n".join([BEGIN, *lines, END]) + "\n"

    def sign_commit(self, git: GitCore, oid: str) -> str:
        """The id of `oid` signed: the same commit with a `gpgsig` header (written to the
        repository of `git`). A signature already on it is replaced."""
        header = _HEADERS.get(len(oid))
        if header is None:
            raise GitError(f"cannot sign {oid!r}: not a commit id")
        raw = git.run("cat-file", "commit", oid).stdout
        if len(raw) > MAX_COMMIT:
            raise GitError(f"cannot sign commit {oid[:12]}: over {MAX_COMMIT // 1024**2} MiB")
        payload = unsigned_payload(raw)
        signed = insert_header(payload, header, self.armored(payload).encode("ascii"))
        made = git.run("hash-object", "-w", "-t", "commit", "--stdin", input=signed)
        return made.stdout.decode("ascii").strip()


def signer(key: CommitKey) -> CommitSigner:
    """Load `key` now: SigningKeyError naming where it is configured and where the secret lives
    (missing, unreadable, passphrase-protected, not an OpenSSH key, an unsupported type)."""
    from cryptography.exceptions import UnsupportedAlgorithm  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa  # noqa: PLC0415
    from cryptography.hazmat.primitives.serialization import (  # noqa: PLC0415
        Encoding,
        PublicFormat,
        load_ssh_private_key,
    )

    from memsync.secrets import resolve  # noqa: PLC0415 - a root that signs only

    try:
        text = resolve(key.key)
    except SecretError as exc:
        raise SigningKeyError(f"{key.where}: {exc.message}", hint=exc.hint or _KEY_HINT) from None
    # The same bytes were loaded (and, for RSA, checked: hundreds of ms) before: reuse them.
    seen = hashlib.sha256(text.encode("utf-8")).digest()
    known = _LOADED.get(seen)
    if known is not None:
        return known
    if "-----BEGIN OPENSSH PRIVATE KEY-----" not in text:
        raise SigningKeyError(
            f"{key.describe()} is not an OpenSSH private key "
            "(expected -----BEGIN OPENSSH PRIVATE KEY-----)",
            hint=_KEY_HINT,
        )
    try:
        private = load_ssh_private_key(text.encode("utf-8"), password=None)
    except TypeError:  # cryptography: "Key is password-protected, but password was not given"
        raise SigningKeyError(
            f"{key.describe()} is protected by a passphrase; memsync signs unattended and "
            "cannot ask for it",
            hint="give memsync a key of its own without a passphrase (keep it 0600), e.g. "
            "`ssh-keygen -t ed25519 -N '' -f ~/.ssh/memsync_ed25519`",
        ) from None
    except ValueError:
        raise SigningKeyError(
            f"{key.describe()} is not a usable OpenSSH private key", hint=_KEY_HINT
        ) from None
    except UnsupportedAlgorithm:  # a security-key (sk-) type, say
        raise SigningKeyError(
            f"{key.describe()} holds a key type memsync cannot sign with", hint=_KEY_HINT
        ) from None
    if not isinstance(
        private, ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey
    ):
        raise SigningKeyError(
            f"{key.describe()} holds a key type memsync cannot sign with", hint=_KEY_HINT
        )
    if isinstance(private, ec.EllipticCurvePrivateKey) and private.curve.name not in _CURVES:
        raise SigningKeyError(f"{key.describe()}: unsupported curve", hint=_KEY_HINT)
    line = private.public_key().public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH)
    loaded = CommitSigner(private, base64.b64decode(line.split()[1]))
    if len(_LOADED) >= MAX_LOADED:
        _LOADED.clear()
    _LOADED[seen] = loaded
    return loaded


_LOADED: dict[bytes, CommitSigner] = {}


class UnsupportedKey(ValueError):
    """A key type the SSH signature format here does not cover."""


def sign_commit(git: GitCore, oid: str, key: CommitKey | None) -> str:
    """`oid` signed with `key` (loaded now), or `oid` itself when the root signs nothing."""
    if key is None:
        return oid
    return signer(key).sign_commit(git, oid)


def sign_head(git: Git, key: CommitKey | None) -> str:
    """Sign the commit HEAD of `git` (a candidate worktree or a role's repository) names
    and move HEAD to the signed one (same tree: the index and files stay as they are), so
    what is made on top of it next has the signed commit as its parent. Returns HEAD."""
    head = require(git.rev_parse("HEAD"), "the candidate's HEAD")
    if key is None:
        return head
    signed = signer(key).sign_commit(git, head)
    git.run("update-ref", "-m", "memsync: sign", "HEAD", signed, head)
    return signed


# -- the commit object --------------------------------------------------------------------------


def unsigned_payload(raw: bytes) -> bytes:
    """The commit without its signature headers (and their continuation lines): the bytes
    git verifies a signature against."""
    end = raw.find(b"\n\n")
    head, body = (raw, b"") if end < 0 else (raw[: end + 1], raw[end + 1 :])
    kept: list[bytes] = []
    dropping = False
    pieces = head.split(b"\n")  # git's lines end in LF only (never split on CR)
    lines = [piece + b"\n" for piece in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    for line in lines:
        if line.startswith(b" ") and dropping:
            continue
        dropping = line.startswith(_SIGNATURE_HEADERS)
        if not dropping:
            kept.append(line)
    return b"".join(kept) + body


def insert_header(payload: bytes, name: bytes, value: bytes) -> bytes:
    """`payload` with the header `name value` (multi-line: each further line indented by
    one space) at the end of its header block, where git's `commit -S` puts it."""
    end = payload.find(b"\n\n")
    cut = len(payload) if end < 0 else end + 1
    lines = value.rstrip(b"\n").split(b"\n")
    header = name + b" " + b"\n ".join(lines) + b"\n"
    return payload[:cut] + header + payload[cut:]


# -- SSH wire encoding --------------------------------------------------------------------------

_CURVES = {"secp256r1": ("nistp256", "sha256"), "secp384r1": ("nistp384", "sha384"),
           "secp521r1": ("nistp521", "sha512")}  # fmt: skip


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def _mpint(value: int) -> bytes:
    if value == 0:
        return _string(b"")
    data = value.to_bytes((value.bit_length() + 8) // 8, "big")  # a leading 0 keeps it positive
    return _string(data)


def _ssh_signature(private: PrivateKeyTypes, data: bytes) -> bytes:
    """The SSH signature blob (`string algorithm, string signature`) of `data`."""
    from cryptography.hazmat.primitives import hashes  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa  # noqa: PLC0415
    from cryptography.hazmat.primitives.asymmetric.utils import (  # noqa: PLC0415
        decode_dss_signature,
    )

    if isinstance(private, ed25519.Ed25519PrivateKey):
        return _string(b"ssh-ed25519") + _string(private.sign(data))
    if isinstance(private, rsa.RSAPrivateKey):  # rsa-sha2-512, as ssh-keygen -Y sign uses
        made = private.sign(data, padding.PKCS1v15(), hashes.SHA512())
        return _string(b"rsa-sha2-512") + _string(made)
    if isinstance(private, ec.EllipticCurvePrivateKey) and private.curve.name in _CURVES:
        curve, digest = _CURVES[private.curve.name]
        algorithm = {"sha256": hashes.SHA256(), "sha384": hashes.SHA384()}.get(
            digest, hashes.SHA512()
        )
        r, s = decode_dss_signature(private.sign(data, ec.ECDSA(algorithm)))
        return _string(f"ecdsa-sha2-{curve}".encode()) + _string(_mpint(r) + _mpint(s))
    raise UnsupportedKey(type(private).__name__)
