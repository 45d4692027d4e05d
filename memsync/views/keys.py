"""Ed25519 signing keys: key files (PKCS#8 PEM, 0600) and public key text `ed25519:…`.

A public key is written `ed25519:<base64url of its 32 raw bytes, no padding>` and is
identified by its key id, the hex SHA-256 of those 32 bytes. Private key files are created
with `O_EXCL` and mode 0600, and a key file other users could read is refused on load.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import os
import re
import stat
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from memsync.errors import UsageError

PUBLIC_KEY_PREFIX = "ed25519:"
_PUBLIC_BODY = re.compile(r"[A-Za-z0-9_-]{43}")
_PUBLIC_FORM = "a public key is written ed25519:<base64url of 32 bytes, no padding>"
_MAX_KEY_FILE = 64 * 1024  # a PEM Ed25519 key is about 120 bytes


class KeyMaterialError(UsageError):
    """A key file or a public key text is unusable; `path` names the file when there is one."""

    def __init__(self, message: str, *, path: Path | None = None, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.path = path


def generate_key(path: Path) -> str:
    """Write a new Ed25519 private key to `path` (0600, never overwriting) and return its
    public key text."""
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(
        encoding=serialization.Encoding.PEM,
        format=serialization.PrivateFormat.PKCS8,
        encryption_algorithm=serialization.NoEncryption(),
    )
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError as exc:
        raise KeyMaterialError(
            f"key file {path} already exists; refusing to overwrite it",
            path=path,
            hint="choose another --out path, or remove the old key file if it is no longer used",
        ) from exc
    except OSError as exc:
        raise KeyMaterialError(f"cannot create key file {path}: {exc.strerror}", path=path) from exc
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), 0o600)  # the umask may only have narrowed it; be exact
            handle.write(pem)
            handle.flush()
            os.fsync(handle.fileno())
    except OSError as exc:
        with contextlib.suppress(OSError):
            path.unlink()
        raise KeyMaterialError(f"cannot write key file {path}: {exc.strerror}", path=path) from exc
    return public_key_text(key)


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """Read an unencrypted PKCS#8 PEM Ed25519 private key that only its owner can read."""
    try:
        # O_NONBLOCK: a FIFO put where the key should be must not hang the daemon.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise KeyMaterialError(
            f"key file {path} does not exist",
            path=path,
            hint="create one with `memsync keys generate --out FILE`",
        ) from exc
    except OSError as exc:
        raise KeyMaterialError(f"cannot read key file {path}: {exc.strerror}", path=path) from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise KeyMaterialError(f"key file {path} is not a regular file", path=path)
        if info.st_mode & 0o077:
            raise KeyMaterialError(
                f"key file {path} is open to other users "
                f"(mode {stat.S_IMODE(info.st_mode):04o}); refusing to use it",
                path=path,
                hint=f"run `chmod 600 {path}`",
            )
        data = b""
        while chunk := os.read(fd, _MAX_KEY_FILE + 1 - len(data)):
            data += chunk
            if len(data) > _MAX_KEY_FILE:
                break
    except OSError as exc:
        raise KeyMaterialError(f"cannot read key file {path}: {exc.strerror}", path=path) from exc
    finally:
        os.close(fd)
    if len(data) > _MAX_KEY_FILE:
        raise KeyMaterialError(f"key file {path} is too large to be a key", path=path)
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError, binascii.Error) as exc:
        # TypeError: the PEM is encrypted; ValueError: not a PEM private key at all.
        raise KeyMaterialError(
            f"key file {path} is not an unencrypted PEM private key",
            path=path,
            hint="create one with `memsync keys generate --out FILE`",
        ) from exc
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyMaterialError(
            f"key file {path} holds a {type(key).__name__.removesuffix('PrivateKey')} key, "
            "not an Ed25519 key",
            path=path,
            hint="create one with `memsync keys generate --out FILE`",
        )
    return key


def raw_public_bytes(key: Ed25519PublicKey | Ed25519PrivateKey) -> bytes:
    """The 32 raw bytes of a public key (of the key itself, or of a private key's pair)."""
    public = key.public_key() if isinstance(key, Ed25519PrivateKey) else key
    return public.public_bytes(
        encoding=serialization.Encoding.Raw, format=serialization.PublicFormat.Raw
    )


def public_key_text(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """`ed25519:<base64url of the 32 raw bytes, no padding>`."""
    body = base64.urlsafe_b64encode(raw_public_bytes(key)).decode("ascii").rstrip("=")
    return PUBLIC_KEY_PREFIX + body


def parse_public_key(text: str) -> Ed25519PublicKey:
    """Parse `ed25519:…` strictly: the prefix, 43 base64url characters, canonical, 32 bytes."""
    body = text.removeprefix(PUBLIC_KEY_PREFIX)
    if body == text:
        raise KeyMaterialError(
            f"public key does not start with {PUBLIC_KEY_PREFIX!r}; {_PUBLIC_FORM}"
        )
    if not _PUBLIC_BODY.fullmatch(body):
        raise KeyMaterialError(f"public key is not 43 base64url characters; {_PUBLIC_FORM}")
    raw = base64.urlsafe_b64decode(body + "=")
    if len(raw) != 32 or base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=") != body:
        # 43 characters carry 258 bits: the last two must be zero in the one canonical form.
        raise KeyMaterialError(f"public key is not in canonical form; {_PUBLIC_FORM}")
    return Ed25519PublicKey.from_public_bytes(raw)


def key_id(key: Ed25519PublicKey | Ed25519PrivateKey) -> str:
    """The key id: hex SHA-256 of the 32 raw public key bytes."""
    return hashlib.sha256(raw_public_bytes(key)).hexdigest()
