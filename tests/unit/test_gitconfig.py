"""The repository-config reader: parsing `git config --list -z`, classifying entries that
name programs, and the overrides that defuse them (pure)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.transports.gitconfig import (
    MERGE_FILE,
    ConfigEntry,
    attribute_drivers,
    config_env,
    neutralizing_config,
    parse_config_list,
    program_entries,
    split_key,
)

# Git's own grammar: section and name are alphanumeric (and '-'), the subsection any text
# without NUL or newline; values any text without NUL.
words = st.from_regex(r"[a-z][a-z0-9-]{0,8}", fullmatch=True)
subsections = st.text(
    st.characters(blacklist_characters="\0\n", blacklist_categories=("Cs",)), max_size=12
)
values = st.none() | st.text(
    st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=20
)


@st.composite
def entries(draw: st.DrawFn) -> ConfigEntry:
    section, name = draw(words), draw(words)
    sub = draw(st.none() | subsections)
    key = f"{section}.{name}" if sub is None else f"{section}.{sub}.{name}"
    scope = draw(st.sampled_from(["local", "worktree", "command"]))
    origin = draw(st.sampled_from(["file:.git/config", "file:/tmp/x y", "command line:"]))
    return ConfigEntry(scope, origin, key, draw(values))


def serialize(items: list[ConfigEntry]) -> bytes:
    out = b""
    for e in items:
        item = e.key if e.value is None else f"{e.key}\n{e.value}"
        out += f"{e.scope}\0{e.origin}\0{item}\0".encode()
    return out


@given(st.lists(entries(), max_size=8))
def test_parse_round_trips_what_git_prints(items: list[ConfigEntry]) -> None:
    assert parse_config_list(serialize(items)) == items


@given(words, subsections, words)
def test_split_key_keeps_dotted_subsections(section: str, sub: str, name: str) -> None:
    assert split_key(f"{section}.{sub}.{name}") == (section, sub, name)


def local(key: str, value: str | None = "x") -> ConfigEntry:
    return ConfigEntry("local", "file:.git/config", key, value)


def test_program_entries_name_every_mechanism_and_skip_harmless_ones() -> None:
    named = [
        "filter.lfs.smudge",
        "filter.a.b.clean",
        "filter.x.process",
        "merge.ours.driver",
        "diff.evil.textconv",
        "diff.evil.command",
        "diff.external",
        "core.gitProxy",
        "core.sshCommand",
        "core.askPass",
        "core.editor",
        "core.pager",
        "core.hooksPath",
        "core.worktree",
        "remote.origin.vcs",
        "remote.origin.uploadpack",
        "remote.origin.receivepack",
        "credential.helper",
        "credential.https://host.helper",
        "gpg.program",
        "gpg.ssh.program",
        "sequence.editor",
        "pager.log",
        "mergetool.x.cmd",
        "submodule.s.update",
    ]
    harmless = [
        "core.bare",
        "remote.origin.url",
        "filter.lfs.required",
        "merge.ours.name",
        "diff.python.xfuncname",
        "user.name",
        "branch.main.remote",
    ]
    found = program_entries(
        [local(k, "!cmd" if k.startswith("submodule") else "x") for k in named + harmless]
        + [local("core.fsmonitor", "true"), local("credential.helper", "")]
        + [ConfigEntry("command", "command line:", "core.pager", "cat")]
    )
    assert [e.key for e, _ in found] == named
    assert program_entries([local("core.fsmonitor", "/bin/hook")])
    assert program_entries([local("protocol.allow", "always")])


def test_every_driver_is_neutralized() -> None:
    pairs = dict(
        neutralizing_config(
            [
                local("filter.a=b c.smudge"),
                local("merge.mine.driver"),
                local("merge.mine.name"),
                local("diff.d.textconv"),
                local("diff.external"),
                ConfigEntry("command", "command line:", "filter.ours.clean", ""),
            ]
        )
    )
    assert pairs["filter.a=b c.smudge"] == "" and pairs["filter.a=b c.process"] == ""
    assert pairs["filter.a=b c.required"] == "false"
    assert pairs["merge.mine.driver"] == MERGE_FILE
    assert pairs["diff.d.textconv"] == "cat" and pairs["diff.external"] == "true"
    assert "filter.ours.clean" not in pairs


def test_config_env_carries_any_byte_of_a_key() -> None:
    env = config_env([("filter.a=b c.smudge", ""), ("merge.x.driver", "v=1")])
    assert env == {
        "GIT_CONFIG_COUNT": "2",
        "GIT_CONFIG_KEY_0": "filter.a=b c.smudge",
        "GIT_CONFIG_VALUE_0": "",
        "GIT_CONFIG_KEY_1": "merge.x.driver",
        "GIT_CONFIG_VALUE_1": "v=1",
    }


def test_attribute_drivers_skip_builtins_and_comments() -> None:
    text = "# filter=no\n*.md filter=lfs merge=union\n\n* merge=mine diff=x -text\n"
    assert attribute_drivers(text) == [(2, "filter", "lfs"), (4, "merge", "mine"), (4, "diff", "x")]
