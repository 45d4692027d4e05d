"""Parsers of git's machine output: fed real-format bytes, including hostile names."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.transports.gitparse import (
    decode_path,
    encode_path,
    fsck_findings,
    parse_batch,
    parse_log_raw,
    parse_ls_tree,
    parse_status_v2,
)

NAMES = st.text(
    alphabet=st.characters(blacklist_characters="\0", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=30,
)


def test_status_v2_header_and_entries() -> None:
    raw = (
        b"# branch.oid " + b"a" * 40 + b"\0# branch.head main\0"
        b"# branch.upstream origin/main\0# branch.ab +2 -3\0"
        b"1 .M N... 100644 100644 100644 " + b"b" * 40 + b" " + b"b" * 40 + b" MEMORY.md\0"
        b"u UU N... 100644 100644 100644 100644 "
        + b"c" * 40
        + b" "
        + b"c" * 40
        + b" "
        + b"c" * 40
        + b" PURSUITS.md\0? MEMORY_\xe6\x97\xa5 x.md\0"
    )
    state = parse_status_v2(raw)
    assert (state.branch, state.head, state.upstream) == ("main", "a" * 40, "origin/main")
    assert (state.ahead, state.behind) == (2, 3)
    assert [(e.xy, e.path) for e in state.entries] == [
        (".M", "MEMORY.md"),
        ("UU", "PURSUITS.md"),
        ("??", "MEMORY_日 x.md"),
    ]
    assert state.entries[1].unmerged and state.entries[2].untracked


def test_status_v2_detached_and_unborn() -> None:
    state = parse_status_v2(b"# branch.oid (initial)\0# branch.head (detached)\0")
    assert state.branch is None and state.head is None and state.entries == ()


@given(NAMES)
def test_status_paths_round_trip(name: str) -> None:
    raw = b"? " + encode_path(name) + b"\0"
    assert parse_status_v2(raw).entries[0].path == name


def test_invalid_utf8_survives_as_surrogates() -> None:
    path = decode_path(b"MEMORY_\xff.md")
    assert "\udcff" in path and encode_path(path) == b"MEMORY_\xff.md"


@given(st.lists(NAMES, unique=True, max_size=5))
def test_ls_tree_round_trip(names: list[str]) -> None:
    raw = b"".join(
        b"100644 blob " + b"a" * 40 + b" %7d\t" % i + encode_path(n) + b"\0"
        for i, n in enumerate(names)
    )
    parsed = parse_ls_tree(raw)
    assert list(parsed) == names
    assert [e.size for e in parsed.values()] == list(range(len(names)))


def test_ls_tree_gitlink_has_no_size() -> None:
    parsed = parse_ls_tree(b"160000 commit " + b"d" * 40 + b"       -\tsub\0")
    assert parsed["sub"].mode == 0o160000 and parsed["sub"].size is None


def test_log_raw_per_commit_and_deletions() -> None:
    z = b"0" * 40
    raw = (
        b"\x01" + b"a" * 40 + b"\0\0:000000 100644 " + z + b" " + b"b" * 40 + b" A\0new.md\0"
        b":100644 000000 " + b"c" * 40 + b" " + z + b" D\0old.md\0"
        b"\x01"
        + b"e" * 40
        + b"\0\0:100644 100755 "
        + b"b" * 40
        + b" "
        + b"f" * 40
        + b" M\0new.md\0"
    )
    assert parse_log_raw(raw) == [
        ("a" * 40, "new.md", 0o100644, "b" * 40),
        ("a" * 40, "old.md", 0, None),
        ("e" * 40, "new.md", 0o100755, "f" * 40),
    ]


def test_batch_reads_binary_content() -> None:
    body = b"line\n\0\xff"
    raw = b"a" * 40 + b" blob %d\n" % len(body) + body + b"\n" + b"b" * 40 + b" missing\n"
    assert parse_batch(raw) == {"a" * 40: body}


def test_fsck_findings_map_to_codes() -> None:
    text = "error: object " + "1" * 40 + ": hasDotgit: contains '.git'\nfatal: fsck error"
    assert fsck_findings(text)[0][0] == "dotgit-path"
    assert fsck_findings("fatal: something else") == []
