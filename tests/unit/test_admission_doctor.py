"""`memsync doctor` on `admission.signers` files: keys only, and no one else may write."""

from __future__ import annotations

from pathlib import Path

from memsync.config.load import load_config_text
from memsync.doctor import FAIL, OK, check_secrets

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
