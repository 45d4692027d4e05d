"""`memsync doctor` on `admission.signers` files: keys only, and no one else may write."""

from __future__ import annotations

from pathlib import Path

from memsync.config.load import load_config_text
from memsync.config.model import AdmissionSettings
from memsync.doctor import FAIL, OK, check_own_key_pinned, check_secrets
from memsync.secrets import SecretRef
from memsync.transports.rootkeys import CommitKey
from tests.kit import settings_for
from tests.sigkeys import make_key

KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ7h8xTigm2v/w5U+5CnLNnLi5f9v3tn9o8mV1E2t4cJ a@x"


def signers_check(tmp_path: Path, text: str, mode: int = 0o644) -> tuple[str, str, str]:
    listed = tmp_path / "signers.pub"
    listed.write_text(text)
    listed.chmod(mode)
    config = load_config_text(
        "version: 1\nroots:\n  team:\n    path: /r\n"
        f"    admission: {{require: signed, signers: [{{file: {listed}}}]}}\n",
        tmp_path,
    )
    (check,) = [c for c in check_secrets(config) if ".admission." in c.name]
    return check.name, check.status, check.message


def test_a_readable_file_of_keys_and_comments_passes(tmp_path: Path) -> None:
    name, status, message = signers_check(tmp_path, f"# team\n\n{KEY}\n{KEY} again\n")
    assert (name, status) == ("roots.team.admission.signers[0]", OK)
    assert "2 signer key(s)" in message


def test_a_line_that_is_not_a_key_fails_naming_it(tmp_path: Path) -> None:
    _name, status, message = signers_check(tmp_path, f"{KEY}\nssh-ed25519 nope\n")
    assert status == FAIL and "line 2" in message


def test_a_file_others_can_write_fails(tmp_path: Path) -> None:
    _name, status, message = signers_check(tmp_path, f"{KEY}\n", mode=0o666)
    assert status == FAIL and "add a signer" in message


def test_a_missing_file_fails(tmp_path: Path) -> None:
    listed = tmp_path / "signers.pub"
    config = load_config_text(
        "version: 1\nroots:\n  team:\n    path: /r\n"
        f"    admission: {{require: signed, signers: [{{file: {listed}}}]}}\n",
        tmp_path,
    )
    (check,) = [c for c in check_secrets(config) if ".admission." in c.name]
    assert check.status == FAIL and "does not exist" in check.message


def own_key_check(tmp_path: Path, *pinned: str) -> tuple[str, str, str, tuple[str, ...]]:
    """doctor's check that memsync's own signing key is one of the pinned signers."""

    ours = make_key(tmp_path / "keys", "memsync")
    signers = tuple(ours.public if p == "ours" else p for p in pinned)
    root = settings_for(
        "team",
        tmp_path,
        admission=AdmissionSettings("signed", signers),
        signing=CommitKey("roots.team.signing.key", SecretRef("file", str(ours.private))),
    )
    check = check_own_key_pinned(root)
    assert check is not None
    return check.name, check.status, check.message, check.details


def test_memsyncs_own_key_among_the_signers_passes(tmp_path: Path) -> None:
    name, status, message, _ = own_key_check(tmp_path, KEY, "ours")
    assert (name, status) == ("roots.team.admission.own-key", OK), message


def test_memsyncs_own_key_missing_from_the_signers_fails_with_its_line(tmp_path: Path) -> None:
    """Its merges would be refused before every push: doctor says so and gives the line."""
    name, status, message, details = own_key_check(tmp_path, KEY)
    assert (name, status) == ("roots.team.admission.own-key", FAIL)
    assert "would be refused before push" in message
    ours = (tmp_path / "keys" / "memsync.pub").read_text().split()
    assert details == (f"public key line: {ours[0]} {ours[1]} memsync",)
