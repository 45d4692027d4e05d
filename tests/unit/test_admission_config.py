"""`roots.*.admission` in the one schema: what it accepts, what it refuses and where."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from memsync.config.load import load_config_text
from memsync.config.model import AdmissionSettings, settings_from
from memsync.configproblem import Located
from memsync.errors import ConfigError
from memsync.secrets import SecretRef

# An ed25519 public key line (32 arbitrary bytes: no one holds its private half).
ALICE = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIJ7h8xTigm2v/w5U+5CnLNnLi5f9v3tn9o8mV1E2t4cJ alice@x"


def settings(admission: str) -> AdmissionSettings:
    text = f"version: 1\nroots:\n  team:\n    path: /r\n    admission: {admission}\n"
    config = load_config_text(text, Path("/cfg"), "config.yaml")
    return settings_from(config, None).roots[0].admission


def problems(admission: str) -> list[Located]:
    text = textwrap.dedent(
        f"version: 1\nroots:\n  team:\n    path: /r\n    admission: {admission}\n"
    )
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, Path("/cfg"), "config.yaml")
    return list(caught.value.problems)


def test_off_by_default_and_the_yaml_word_off() -> None:
    config = load_config_text("version: 1\nroots: {team: {path: /r}}\n", Path("/cfg"))
    assert settings_from(config, None).roots[0].admission == AdmissionSettings("off", ())
    assert settings("{require: off}") == AdmissionSettings("off", ())
    assert settings('{require: "off"}') == AdmissionSettings("off", ())


def test_signed_with_inline_keys_and_files() -> None:
    got = settings(f'{{require: signed, signers: ["{ALICE}", {{file: keys/team.pub}}]}}')
    assert got.require == "signed"
    assert got.signers == (ALICE, SecretRef("file", "/cfg/keys/team.pub"))


def test_signed_needs_a_signer() -> None:
    (found,) = problems("{require: signed}")
    assert found.location == "roots.team.admission" and "at least one key" in found.message


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("{require: on}", "off"),
        ("{require: yes-please}", "off"),
        ('{require: signed, signers: ["ssh-ed25519 AAAA"]}', "not a valid ssh-ed25519"),
        ('{require: signed, signers: ["ssh-ed25519 AA!A"]}', "base64"),
        ('{require: signed, signers: ["ecdsa-sha2-nistp256 AAAA x"]}', "not supported"),
        ("{require: signed, signers: [{file: a, env: B}]}", "exactly one key"),
        ("{require: signed, signers: [7]}", "secret reference"),
        ("{require: signed, nobody: [x]}", "unknown key"),
    ],
)
def test_refusals_are_located(value: str, words: str) -> None:
    found = problems(value)
    assert found, value
    assert all(p.location.startswith("roots.team.admission") for p in found), found
    assert any(words in p.message for p in found), found
