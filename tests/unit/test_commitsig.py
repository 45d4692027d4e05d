"""commitsig: real ssh-keygen keys and git-signed commits against the in-process verifier."""

from __future__ import annotations

import base64
import hashlib
import struct
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import load_ssh_private_key
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


def _string(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def resign(scene: Scene, **change: bytes) -> bytes:
    """The unsigned commit signed again in process with Alice's own private key, as
    `ssh-keygen -Y sign -n git` does, with one field of the SSHSIG changed."""
    key = load_ssh_private_key(scene.alice.private.read_bytes(), None)
    assert isinstance(key, Ed25519PrivateKey)
    fields = {
        "namespace": b"git",
        "reserved": b"",
        "hash": b"sha512",
        "algorithm": b"ssh-ed25519",
        "version": struct.pack(">I", 1),
        "trailer": b"",
        **change,
    }
    payload = scene.unsigned
    digest = hashlib.new(fields["hash"].decode(), payload).digest()
    signed = b"SSHSIG" + b"".join(
        _string(v) for v in (fields["namespace"], fields["reserved"], fields["hash"], digest)
    )
    blob = b"SSHSIG" + fields["version"] + _string(parse_signer(scene.alice.public).blob)
    blob += b"".join(_string(v) for v in (fields["namespace"], fields["reserved"], fields["hash"]))
    blob += _string(_string(fields["algorithm"]) + _string(key.sign(signed)))
    blob += fields["trailer"]
    text = base64.b64encode(blob)
    lines = [b"-----BEGIN SSH SIGNATURE-----"]
    lines += [text[i : i + 70] for i in range(0, len(text), 70)]
    lines += [b"-----END SSH SIGNATURE-----"]
    headers, _, message = payload.partition(b"\n\n")
    return headers + b"\ngpgsig " + b"\n ".join(lines) + b"\n\n" + message


def test_an_in_process_signature_like_ssh_keygens_verifies(scene: Scene) -> None:
    """The control for the variants below (and sha256, which ssh-keygen also accepts)."""
    assert verify(resign(scene), [scene.alice.public]).trusted
    assert verify(resign(scene, hash=b"sha256"), [scene.alice.public]).trusted


@pytest.mark.parametrize(
    "change",
    [
        {"namespace": b"file"},  # a signature made for another purpose
        {"hash": b"sha1"},
        {"hash": b"md5"},
        {"reserved": b"x"},
        {"version": struct.pack(">I", 2)},
        {"trailer": b"\0"},  # bytes after the last field
        {"algorithm": b"ssh-rsa"},
    ],
    ids=lambda change: next(iter(change)),
)
def test_signature_variants_ssh_keygen_would_not_write_are_refused(
    scene: Scene, change: dict[str, bytes]
) -> None:
    raw = resign(scene, **change)
    assert verify(raw, [scene.alice.public]).code == "bad-signature"
    assert signer_fingerprint(raw) is None


_HEADER_TEXT = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E), min_size=1, max_size=30
)
_B64 = st.text(
    st.sampled_from("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/="),
    min_size=1,
    max_size=70,
)


@given(
    headers=st.lists(
        st.tuples(st.sampled_from(["tree", "parent", "author", "committer", "x-y"]), _HEADER_TEXT),
        min_size=1,
        max_size=6,
    ),
    position=st.integers(0, 6),
    body=st.lists(_B64, min_size=1, max_size=5),
    message=st.binary(max_size=60),
)
def test_split_takes_out_exactly_the_signature_header(
    headers: list[tuple[str, str]], position: int, body: list[str], message: bytes
) -> None:
    """Wherever the header stands among the others, the payload is the object without it
    (what git verifies) and the signature is its text without continuation spaces."""
    lines = [f"{name} {value}".encode() for name, value in headers]
    signature = [b"-----BEGIN SSH SIGNATURE-----", *(b.encode() for b in body)]
    signature.append(b"-----END SSH SIGNATURE-----")
    header = b"gpgsig " + b"\n ".join(signature)
    at = min(position, len(lines))
    payload = b"\n".join(lines) + b"\n\n" + message
    raw = b"\n".join([*lines[:at], header, *lines[at:]]) + b"\n\n" + message
    split = commitsig.split_commit(raw)
    assert split.payload == payload
    assert split.signature == b"\n".join(signature) + b"\n"
    assert commitsig.split_commit(payload) == commitsig.SignedCommit(payload, None)
