"""`roots.<name>.signing`: the schema and the settings it loads into, and the rule that a
root admitting only signed commits needs a key for the commits memsync makes there
(config validation refuses, doctor says so). `admission` is read from the raw mapping, so
the rule holds whatever the admission model looks like."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.config import SecretRef, load_config_text, settings_from
from memsync.config.schema import reference_problems, signing_problem
from memsync.doctor import check_admission
from memsync.errors import ConfigError
from memsync.transports.rootkeys import CommitKey


def load(text: str) -> Any:
    return load_config_text(textwrap.dedent(text), Path("/cfg"), "config.yaml")


def test_a_signing_key_loads_into_the_root_settings_with_its_config_location() -> None:
    config = load("""\
        version: 1
        roots:
          team: {path: /r, signing: {key: {file: keys/memsync_ed25519}}}
          plain: {path: /p}
        """)
    team, plain = settings_from(config, None).roots
    assert team.signing == CommitKey(
        "roots.team.signing.key", SecretRef("file", "/cfg/keys/memsync_ed25519")
    )
    assert plain.signing is None


@pytest.mark.parametrize(
    ("signing", "words"),
    [
        ('{key: "-----BEGIN OPENSSH PRIVATE KEY-----"}', "cannot be a plain string"),
        ("{}", "required key is missing"),
        ("{key: {file: k}, program: ssh-keygen}", "unknown key (allowed: key)"),
        ("{key: {file: k}, format: openpgp}", "unknown key (allowed: key)"),
    ],
)
def test_a_malformed_signing_entry_is_refused(signing: str, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(f"version: 1\nroots:\n  team: {{path: /r, signing: {signing}}}\n")
    assert any(words in p.message for p in caught.value.problems), caught.value.problems
    assert "OPENSSH PRIVATE KEY" not in str([p.message for p in caught.value.problems])


SIGNED = {"require": "signed", "signers": ["ssh-ed25519 AAAA x"]}
MAKERS: dict[str, dict[str, Any]] = {
    "sync.autocommit": {"sync": {"autocommit": True}},
    "prune": {"prune": {"enabled": True}},
    "insight": {"insight": {"enabled": True}},
    "repair": {"repair": {"role": "fixer"}},
}


@pytest.mark.parametrize("maker", sorted(MAKERS))
def test_signed_admission_without_a_key_refuses_each_commit_maker(maker: str) -> None:
    root = {"path": "/r", "admission": SIGNED, **MAKERS[maker]}
    message = signing_problem(root)
    assert message is not None and maker in message and "signing.key" in message
    found = reference_problems({"version": 1, "roots": {"team": root}}, None)
    assert (("roots", "team", "signing"), message) in found
    check = check_admission("team", root)
    assert check is not None and check.status == "fail" and check.name == "roots.team.signing"


def test_a_key_or_no_signed_admission_passes() -> None:
    keyed = {"signing": {"key": SecretRef("file", "/k")}}
    for root in (
        {"path": "/r", "admission": SIGNED, **MAKERS["prune"], **keyed},
        {"path": "/r", "admission": {"require": "off"}, **MAKERS["prune"]},
        {"path": "/r", **MAKERS["sync.autocommit"]},
    ):
        assert signing_problem(root) is None
        assert check_admission("team", root) is None


def test_signed_admission_that_makes_no_commits_is_a_doctor_warning_only() -> None:
    root = {"path": "/r", "admission": SIGNED, "sync": {"autocommit": False}}
    assert signing_problem(root) is None
    check = check_admission("team", root)
    assert check is not None and check.status == "warn" and "merge" in check.message


@given(
    makers=st.sets(st.sampled_from(sorted(MAKERS))),
    require=st.sampled_from(["signed", "off", None]),
    keyed=st.booleans(),
)
def test_the_rule_is_exactly_signed_and_no_key_and_some_maker(
    makers: set[str], require: str | None, keyed: bool
) -> None:
    root: dict[str, Any] = {"path": "/r"}
    for maker in makers:
        root.update(MAKERS[maker])
    if require is not None:
        root["admission"] = {"require": require}
    if keyed:
        root["signing"] = {"key": {"file": "/k"}}
    refused = signing_problem(root) is not None
    assert refused == (require == "signed" and not keyed and bool(makers))
