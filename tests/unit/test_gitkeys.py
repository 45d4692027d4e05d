"""The allowlist of a root's own git config keys (pure): what is inert, what memsync forces,
and that everything else refuses the root, whatever the spelling."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.transports.gitconfig import ConfigEntry, split_key
from memsync.transports.gitenv import FORCED_CONFIG, FORCED_KEYS
from memsync.transports.gitkeys import Kind, classify, shown_key, unsafe_config, unsafe_entries

words = st.from_regex(r"[a-z][a-z0-9-]{0,10}", fullmatch=True)
subsections = st.text(
    st.characters(blacklist_characters="\0\n", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=16,
)
values = st.none() | st.text(
    st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)), max_size=20
)


def local(key: str, value: str | None = "x") -> ConfigEntry:
    return ConfigEntry("local", "file:.git/config", key, value)


def kind(key: str, value: str | None = "x") -> Kind:
    return classify(local(key, value), FORCED_KEYS).kind


INERT = [
    "core.repositoryformatversion",
    "core.filemode",
    "core.bare",
    "core.logallrefupdates",
    "core.ignorecase",
    "core.precomposeunicode",
    "remote.origin.url",
    "remote.origin.fetch",
    "branch.main.remote",
    "branch.main.merge",
    "user.name",
    "user.email",
    "extensions.objectformat",
    "advice.pushnonffcurrent",
    "gc.reflogexpire",
    "color.ui",
    "merge.mine.name",
    "lfs.repositoryformatversion",
]

FORCED = [
    "core.hookspath",
    "core.fsmonitor",
    "core.sshcommand",
    "core.gitproxy",
    "core.pager",
    "credential.helper",
    "credential.https://example.com.helper",
    "filter.lfs.smudge",
    "filter.lfs.required",
    "merge.evil.driver",
    "diff.evil.textconv",
    "diff.external",
    "gpg.ssh.program",
    "http.sslverify",
    "http.proxy",
    "rerere.enabled",
    "protocol.ext.allow",
]

REFUSED = [
    "core.alternaterefscommand",
    "core.alternaterefsprefixes",
    "core.worktree",
    "core.excludesfile",
    "core.sharedrepository",
    "http.https://example.com/.proxy",
    "http.https://example.com/.sslverify",
    "http.sslcainfo",
    "http.sslcapath",
    "http.sslcert",
    "http.sslkey",
    "http.sslbackend",
    "http.extraheader",
    "http.cookiefile",
    "http.followredirects",
    "http.curloptresolve",
    "http.pinnedpubkey",
    "remote.origin.proxy",
    "remote.origin.pushurl",
    "remote.origin.uploadpack",
    "remote.origin.receivepack",
    "remote.origin.vcs",
    "remote.origin.promisor",
    "url.https://evil.example/.insteadof",
    "url.https://evil.example/.pushinsteadof",
    "include.path",
    "includeif.gitdir:/x/.path",
    "credential.username",
    "credential.usehttppath",
    "protocol.allow",
    "protocol.version",
    "transfer.unpacklimit",
    "fetch.fsck.badtimezone",
    "receive.fsckobjects",
    "fsck.skiplist",
    "uploadpack.packobjectshook",
    "gpg.ssh.allowedsignersfile",
    "alias.st",
    "pager.log",
    "submodule.s.update",
    "extensions.partialclone",
    "status.showuntrackedfiles",
    "i18n.logoutputencoding",
    "push.pushoption",
    "push.followtags",
]


@pytest.mark.parametrize("key", INERT)
def test_inert_keys_are_allowed(key: str) -> None:
    assert kind(key) is Kind.INERT


@pytest.mark.parametrize("key", FORCED)
def test_forced_keys_are_allowed_because_memsync_overrides_them(key: str) -> None:
    assert kind(key) is Kind.FORCED


@pytest.mark.parametrize("key", REFUSED)
def test_keys_that_run_redirect_weaken_or_add_objects_refuse_the_root(key: str) -> None:
    verdict = classify(local(key), FORCED_KEYS)
    assert verdict.kind is Kind.REFUSED
    assert verdict.reason


def test_every_key_the_box_forces_is_forced() -> None:
    for key, _value in FORCED_CONFIG:
        assert kind(key) is Kind.FORCED, key


def test_colour_is_refused_only_when_forced_into_output() -> None:
    assert kind("color.ui", "always") is Kind.REFUSED
    assert kind("color.diff", "ALWAYS") is Kind.REFUSED
    assert kind("color.ui", "auto") is Kind.INERT
    assert kind("color.diff.meta", "blue bold") is Kind.INERT


def _mixed(text: str, flips: list[bool]) -> str:
    return "".join(ch.upper() if flips[i % len(flips)] else ch for i, ch in enumerate(text))


@given(
    st.sampled_from(INERT + FORCED + REFUSED) | st.builds("{}.{}".format, words, words),
    st.lists(st.booleans(), min_size=1, max_size=8),
)
def test_section_and_name_are_case_insensitive(key: str, flips: list[bool]) -> None:
    section, sub, name = split_key(key)
    spelled = (
        f"{_mixed(section, flips)}.{_mixed(name, flips)}"
        if sub is None
        else f"{_mixed(section, flips)}.{sub}.{_mixed(name, flips)}"
    )
    assert kind(spelled) is kind(key)


@given(st.sampled_from(["gpg.ssh.program", "gpg.openpgp.program", "gpg.x509.program"]))
def test_a_subsection_is_case_sensitive(key: str) -> None:
    section, sub, name = split_key(key)
    assert sub is not None
    assert kind(f"{section}.{sub.upper()}.{name}") is Kind.REFUSED  # not what memsync forces


@given(words, st.none() | subsections, words, values)
def test_a_section_memsync_does_not_know_is_refused(
    section: str, sub: str | None, name: str, value: str | None
) -> None:
    unknown = f"zz{section}"
    key = f"{unknown}.{name}" if sub is None else f"{unknown}.{sub}.{name}"
    assert kind(key, value) is Kind.REFUSED


@given(subsections, st.sampled_from(["proxy", "sslverify", "sslcainfo", "extraheader"]))
def test_url_specific_http_settings_refuse_whatever_the_url(sub: str, name: str) -> None:
    assert kind(f"http.{sub}.{name}") is Kind.REFUSED


@given(subsections, values)
def test_a_remote_may_never_push_elsewhere_or_name_a_program(sub: str, value: str | None) -> None:
    for name in ("pushurl", "proxy", "uploadpack", "receivepack", "vcs", "mirror"):
        assert kind(f"remote.{sub}.{name}", value) is Kind.REFUSED
    assert kind(f"url.{sub}.insteadof", value) is Kind.REFUSED


@given(st.lists(st.sampled_from(INERT + FORCED + REFUSED), max_size=12))
def test_only_the_roots_own_entries_refuse_it(keys: list[str]) -> None:
    ours = [ConfigEntry("command", "command line:", k, "x") for k in REFUSED]
    found = [entry.key for entry, _ in unsafe_entries([*map(local, keys), *ours], FORCED_KEYS)]
    wanted, urls = [], 0
    for key in keys:
        urls += key == "remote.origin.url"
        if key in REFUSED or (key == "remote.origin.url" and urls > 1):
            wanted.append(key)
    assert found == wanted


def test_a_remote_with_two_urls_is_refused() -> None:
    entries = [local("remote.origin.url", "a"), local("remote.origin.url", "b")]
    found = unsafe_entries(entries, FORCED_KEYS)
    assert [(e.value, reason) for e, reason in found] == [
        ("b", "is set more than once: git pushes to every URL")
    ]


def test_findings_name_the_key_and_the_fix_never_the_value() -> None:
    entries = [
        local("http.proxy.x.proxy", "http://user:hunter2@proxy"),
        ConfigEntry(
            "local", "file:/etc/extra config", "http.extraheader", "Authorization: hunter2"
        ),
        ConfigEntry("worktree", "file:.git/config.worktree", "core.worktree", "/elsewhere"),
        local("url.\x1b[31m.insteadof", "x"),
    ]
    found = unsafe_config(entries, FORCED_KEYS, "/roots/my root")
    text = "\n".join(u.message for u in found)
    assert "hunter2" not in text and "/elsewhere" not in text and "\x1b" not in text
    assert found[0].fix == "git -C '/roots/my root' config --unset-all http.proxy.x.proxy"
    assert found[1].fix.endswith("config --file '/etc/extra config' --unset-all http.extraheader")
    assert found[2].fix.endswith("config --worktree --unset-all core.worktree")
    assert shown_key("url.\x1b[31m.insteadof") == "url.\\x1b[31m.insteadof"
