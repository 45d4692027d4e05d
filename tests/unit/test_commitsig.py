"""commitsig: real ssh-keygen keys and git-signed commits against the in-process verifier."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.validators import commitsig
from memsync.validators.commitsig import Signers, parse_signer, signer_fingerprint, verify
from tests.helpers import git
from tests.sigkeys import Key, make_key, raw_commit, signed_commit


class Scene:
    def __init__(self, base: Path) -> None:
        self.alice = make_key(base / "keys", "alice")
        self.mallory = make_key(base / "keys", "mallory")
        self.rsa = make_key(base / "keys", "rosa", "rsa")
        self.repo = base / "repo"
        self.repo.mkdir()
        git(self.repo, "init", "-q", "-b", "main")
        self.signed = raw_commit(self.repo, signed_commit(self.repo, {"a.md": "a\n"}, self.alice))
        self.unsigned = raw_commit(self.repo, signed_commit(self.repo, {"b.md": "b\n"}, None))
        self.by_mallory = raw_commit(
            self.repo, signed_commit(self.repo, {"c.md": "c\n"}, self.mallory)
        )
        self.by_rsa = raw_commit(self.repo, signed_commit(self.repo, {"d.md": "d\n"}, self.rsa))


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Scene:
    return Scene(tmp_path_factory.mktemp("commitsig"))


def fingerprint(key: Key) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(key.pub_path)], capture_output=True, text=True, check=True
    ).stdout
    return out.split()[1]


def test_a_pinned_signers_commit_is_trusted(scene: Scene) -> None:
    verdict = verify(scene.signed, [scene.alice.public])
    assert verdict.trusted and verdict.code is None
    assert verdict.fingerprint == fingerprint(scene.alice)
    assert verify(scene.by_rsa, Signers.of([scene.rsa.public])).trusted


def test_the_three_refusals(scene: Scene) -> None:
    signers = Signers.of([scene.alice.public])
    assert verify(scene.unsigned, signers).code == "unsigned-commit"
    untrusted = verify(scene.by_mallory, signers)
    assert untrusted.code == "untrusted-signer"
    assert untrusted.fingerprint == fingerprint(scene.mallory)
    tampered = scene.signed.replace(b"\n\nedit", b"\n\nEdit")
    assert verify(tampered, signers).code == "bad-signature"


def test_fingerprint_only_for_a_verifying_signature(scene: Scene) -> None:
    assert signer_fingerprint(scene.signed) == fingerprint(scene.alice)
    assert signer_fingerprint(scene.by_mallory) == fingerprint(scene.mallory)
    assert signer_fingerprint(scene.by_rsa) == fingerprint(scene.rsa)
    assert signer_fingerprint(scene.unsigned) is None
    assert signer_fingerprint(scene.signed.replace(b"\n\nedit", b"\n\nEdit")) is None


def test_split_matches_what_git_verifies(scene: Scene) -> None:
    split = commitsig.split_commit(scene.signed)
    assert split.signature is not None
    assert split.signature.startswith(b"-----BEGIN SSH SIGNATURE-----\n")
    assert b"gpgsig" not in split.payload
    assert commitsig.split_commit(scene.unsigned) == commitsig.SignedCommit(scene.unsigned, None)


def test_two_signature_headers_are_refused(scene: Scene) -> None:
    split = commitsig.split_commit(scene.signed)
    assert split.signature is not None
    header = b"gpgsig " + split.signature.rstrip(b"\n").replace(b"\n", b"\n ") + b"\n"
    doubled = scene.signed.replace(header, header + header, 1)
    assert doubled != scene.signed
    assert verify(doubled, [scene.alice.public]).code == "bad-signature"
    other = scene.signed.replace(b"gpgsig ", b"gpgsig-sha256 ", 1)
    assert verify(other, [scene.alice.public]).code == "bad-signature"


def test_signer_lines_are_checked(scene: Scene) -> None:
    key = parse_signer(scene.alice.public)
    assert key.fingerprint == fingerprint(scene.alice)
    assert key.comment == "alice@test"
    for bad, words in [
        ("", "expected an OpenSSH public key"),
        ("ssh-dss AAAAB3NzaC1kc3MAAACBAP", "not supported"),
        ("ecdsa-sha2-nistp256 AAAAE2VjZHNh", "not supported"),
        ("ssh-ed25519 AAAA!!!!", "base64"),
        ("ssh-ed25519 " + scene.rsa.public.split()[1], "not a ssh-ed25519 key"),
        (scene.alice.private.read_text(), "private key"),
    ]:
        with pytest.raises(ValueError, match=words):
            parse_signer(bad)


def test_short_rsa_keys_are_refused(tmp_path: Path) -> None:
    private = tmp_path / "short"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "rsa", "-b", "1024", "-N", "", "-f", str(private)],
        check=True,
        capture_output=True,
    )
    with pytest.raises(ValueError, match="shorter than 2048"):
        parse_signer(private.with_name("short.pub").read_text())


def test_a_listed_key_counts_once(scene: Scene) -> None:
    assert len(Signers.of([scene.alice.public, scene.alice.public + " again"]).keys) == 1


@given(data=st.data())
def test_any_single_byte_flip_is_refused(scene: Scene, data: st.DataObject) -> None:
    raw = scene.signed
    index = data.draw(st.integers(0, len(raw) - 1), label="index")
    flip = data.draw(st.integers(1, 255), label="xor")
    changed = bytearray(raw)
    changed[index] ^= flip
    assert not verify(bytes(changed), [scene.alice.public]).trusted
    assert signer_fingerprint(bytes(changed)) is None


def test_every_single_bit_flip_is_refused(scene: Scene) -> None:
    """The exhaustive companion of the property: every bit of the object, one at a time."""
    signers = Signers.of([scene.alice.public])
    raw = scene.signed
    for index in range(len(raw)):
        for bit in range(8):
            changed = bytearray(raw)
            changed[index] ^= 1 << bit
            assert not verify(bytes(changed), signers).trusted, (index, bit)


def test_another_base64_spelling_of_the_same_signature_is_refused(scene: Scene) -> None:
    """base64's unused low bits give one signature many spellings; only git's is taken."""
    lines = scene.signed.split(b"\n")
    last = next(i for i, line in enumerate(lines) if line == b" -----END SSH SIGNATURE-----") - 1
    text = lines[last].rstrip(b"=")
    alphabet = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    assert lines[last].endswith(b"="), "an Ed25519 SSHSIG ends in padding: its last bit is unused"
    index = alphabet.index(text[-1:])
    sibling = alphabet[index ^ 1 : (index ^ 1) + 1]
    lines[last] = text[:-1] + sibling + lines[last][len(text) :]
    respelled = b"\n".join(lines)
    assert verify(respelled, [scene.alice.public]).code == "bad-signature"
    assert signer_fingerprint(respelled) is None
