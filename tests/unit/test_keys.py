"""Ed25519 key files and public key text: modes, refusals, strict parsing, key ids."""

from __future__ import annotations

import base64
import hashlib
import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ec import SECP256R1, generate_private_key
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from memsync.errors import MemsyncError
from memsync.views.keys import (
    KeyMaterialError,
    generate_key,
    key_id,
    load_private_key,
    parse_public_key,
    public_key_text,
    raw_public_bytes,
)


def test_generate_writes_0600_pem_and_returns_its_public_key(tmp_path: Path) -> None:
    path = tmp_path / "view.key"
    text = generate_key(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    key = load_private_key(path)
    assert public_key_text(key) == text
    assert public_key_text(key.public_key()) == text
    assert text.startswith("ed25519:") and "=" not in text and len(text) == 8 + 43


def test_generate_is_0600_even_under_a_permissive_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        generate_key(tmp_path / "k")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o600


def test_generate_refuses_to_overwrite(tmp_path: Path) -> None:
    path = tmp_path / "view.key"
    path.write_bytes(b"precious")
    with pytest.raises(KeyMaterialError, match="already exists") as info:
        generate_key(path)
    assert isinstance(info.value, MemsyncError)
    assert path.read_bytes() == b"precious"


def test_generate_refuses_a_dangling_symlink(tmp_path: Path) -> None:
    link = tmp_path / "link.key"
    link.symlink_to(tmp_path / "elsewhere.key")
    with pytest.raises(KeyMaterialError):
        generate_key(link)
    assert not (tmp_path / "elsewhere.key").exists()


def test_generate_into_a_missing_directory_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(KeyMaterialError, match="cannot create key file"):
        generate_key(tmp_path / "missing" / "view.key")


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o660])
def test_load_refuses_a_key_others_can_read(tmp_path: Path, mode: int) -> None:
    path = tmp_path / "view.key"
    generate_key(path)
    path.chmod(mode)
    with pytest.raises(KeyMaterialError, match="open to other users") as info:
        load_private_key(path)
    assert info.value.hint == f"run `chmod 600 {path}`"


def test_load_accepts_0400(tmp_path: Path) -> None:
    path = tmp_path / "view.key"
    text = generate_key(path)
    path.chmod(0o400)
    assert public_key_text(load_private_key(path)) == text


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KeyMaterialError, match="does not exist") as info:
        load_private_key(tmp_path / "nope.key")
    assert info.value.hint is not None and "keys generate" in info.value.hint


def test_load_a_directory(tmp_path: Path) -> None:
    folder = tmp_path / "dir"
    folder.mkdir(mode=0o700)
    with pytest.raises(KeyMaterialError):
        load_private_key(folder)


def test_load_a_fifo_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.key"
    os.mkfifo(fifo, 0o600)
    with pytest.raises(KeyMaterialError, match="not a regular file"):
        load_private_key(fifo)


def test_load_refuses_an_oversized_file(tmp_path: Path) -> None:
    path = _write_0600(tmp_path / "k", b"A" * (70 * 1024))
    with pytest.raises(KeyMaterialError, match="too large"):
        load_private_key(path)


def _write_0600(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    path.chmod(0o600)
    return path


def test_load_refuses_garbage(tmp_path: Path) -> None:
    path = _write_0600(tmp_path / "k", b"not a key at all\n")
    with pytest.raises(KeyMaterialError, match="not an unencrypted PEM private key"):
        load_private_key(path)


def test_load_refuses_an_encrypted_key(tmp_path: Path) -> None:
    pem = Ed25519PrivateKey.generate().private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.BestAvailableEncryption(b"passphrase"),
    )
    with pytest.raises(KeyMaterialError, match="unencrypted"):
        load_private_key(_write_0600(tmp_path / "k", pem))


def test_load_refuses_another_key_type(tmp_path: Path) -> None:
    pem = generate_private_key(SECP256R1()).private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    with pytest.raises(KeyMaterialError, match="not an Ed25519 key"):
        load_private_key(_write_0600(tmp_path / "k", pem))


def test_public_key_text_round_trip() -> None:
    for _ in range(20):
        key = Ed25519PrivateKey.generate()
        text = public_key_text(key)
        parsed = parse_public_key(text)
        assert raw_public_bytes(parsed) == raw_public_bytes(key)
        assert public_key_text(parsed) == text
        assert key_id(parsed) == key_id(key)


def test_key_id_is_sha256_of_the_raw_bytes() -> None:
    key = Ed25519PrivateKey.generate()
    raw = raw_public_bytes(key)
    assert len(raw) == 32
    assert key_id(key) == hashlib.sha256(raw).hexdigest()


def _body(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# A fixed key: test ids are built from these strings, and every xdist worker must
# collect the same ids.
GOOD = public_key_text(Ed25519PrivateKey.from_private_bytes(bytes(range(32))))


@pytest.mark.parametrize(
    "text",
    [
        "",
        GOOD.removeprefix("ed25519:"),  # no prefix
        "ED25519:" + GOOD.removeprefix("ed25519:"),  # prefix case
        "ssh-ed25519:" + GOOD.removeprefix("ed25519:"),
        GOOD + "=",  # padding
        " " + GOOD,
        GOOD + "\n",
        GOOD[:-1],  # 31.x bytes
        GOOD + "A",  # 44 characters
        "ed25519:" + _body(bytes(31)),
        "ed25519:" + _body(bytes(33)),
        "ed25519:" + base64.b64encode(b"\xfb" * 32).decode().rstrip("="),  # standard alphabet
        "ed25519:" + _body(bytes(32))[:-1] + "B",  # non-canonical trailing bits
    ],
)
def test_parse_public_key_is_strict(text: str) -> None:
    with pytest.raises(KeyMaterialError):
        parse_public_key(text)
