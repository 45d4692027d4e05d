"""Parsers of git's machine output: fed real-format bytes, including hostile names."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.transports.gitparse import (
    FSCK_CODES,
    RawChange,
    changes_from,
    decode_path,
    encode_path,
    fsck_findings,
    looks_like_bad_objects,
    parse_batch,
    parse_log_raw,
    parse_ls_tree,
)
from memsync.transports.workstate import parse_status_v2
from memsync.validators.tree import Entry, Listing

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


def test_ls_tree_keeps_duplicates_apart() -> None:
    blob = b"100644 blob " + b"a" * 40 + b"       9\t"
    tree = b"040000 tree " + b"b" * 40 + b"       -\t"
    raw = blob + b"MEMORY.md\0" + blob + b"MEMORY.md\0" + tree + b"a\0" + blob + b"a/x\0"
    raw += tree + b"a\0" + blob + b"a/y\0" + tree + b"f\0" + blob + b"f\0"
    parsed = parse_ls_tree(raw)
    assert sorted(parsed) == ["MEMORY.md", "a/x", "a/y", "f"]
    assert parsed.duplicates == ("MEMORY.md", "a", "f")
    assert parse_ls_tree(blob + b"MEMORY.md\0").duplicates == ()


@given(st.lists(NAMES, unique=True, max_size=5))
def test_ls_tree_round_trip(names: list[str]) -> None:
    raw = b"".join(
        b"100644 blob " + b"a" * 40 + b" %7d\t" % i + encode_path(n) + b"\0"
        for i, n in enumerate(names)
    )
    parsed = parse_ls_tree(raw)
    assert list(parsed) == names
    assert [e.size for e in parsed.values()] == list(range(len(names)))


_REFERENCE_LS_TREE = re.compile(rb"([0-7]+) ([a-z]+) ([0-9a-f]+) +(-|[0-9]+)\t([^\0]*)\0")


def _reference_ls_tree(raw: bytes) -> Listing:
    """The listing parser as it was: each path decoded on its own, one Entry per leaf."""
    entries: list[tuple[str, Entry]] = []
    seen: set[str] = set()
    duplicates: list[str] = []
    for mode, kind, oid, size, raw_path in _REFERENCE_LS_TREE.findall(raw):
        path = decode_path(raw_path)
        if path in seen:
            duplicates.append(path)
        seen.add(path)
        if kind == b"tree":
            continue
        entry = Entry(int(mode, 8), None if size == b"-" else int(size), oid.decode("ascii"))
        entries.append((path, entry))
    return Listing(entries, duplicates)


_LS_ROWS = st.tuples(
    st.sampled_from(
        [b"100644 blob", b"100755 blob", b"120000 blob", b"040000 tree", b"160000 commit"]
    ),
    st.sampled_from([b"a" * 40, b"0123456789abcdef" * 4]),
    st.one_of(st.just(b"-"), st.integers(0, 1 << 40).map(str).map(str.encode)),
    # Bytes of any kind but NUL: invalid UTF-8, a sequence cut short just before the NUL.
    st.binary(min_size=1, max_size=12).map(lambda b: b.replace(b"\0", b"x")),
)


@given(
    st.lists(
        st.one_of(_LS_ROWS, st.sampled_from([b"caf\xc3\xa9", b"a\xe2\x82", b"a/b"])), max_size=12
    )
)
def test_ls_tree_parses_as_each_path_decoded_alone(rows: list[object]) -> None:
    """The listing is decoded once as a whole: every path, entry, order and duplicate is
    what decoding each path on its own gave (hostile and cut-short UTF-8 included)."""
    raw = b""
    previous: list[bytes] = []
    for row in rows:
        if isinstance(row, bytes):  # a name listed again (or a name of its own)
            name = previous[-1] if previous else row
            raw += b"100644 blob " + b"b" * 40 + b" %7d\t" % 3 + name + b"\0"
            continue
        kind, oid, size, name = row  # type: ignore[misc]
        previous.append(name)
        raw += kind + b" " + oid + b" " + size.rjust(7) + b"\t" + name + b"\0"
    got, want = parse_ls_tree(raw), _reference_ls_tree(raw)
    assert list(got.items()) == list(want.items())
    assert got.duplicates == want.duplicates
    assert all(type(entry) is Entry for entry in got.values())


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
    assert [(r.commit, r.path, r.mode, r.oid) for r in parse_log_raw(raw)] == [
        ("a" * 40, "new.md", 0o100644, "b" * 40),
        ("a" * 40, "old.md", 0, None),
        ("e" * 40, "new.md", 0o100755, "f" * 40),
    ]
    assert [(r.old_mode, r.diff, r.parents) for r in parse_log_raw(raw)] == [
        (0, 0, None),
        (0o100644, 0, None),
        (0o100644, 0, None),
    ]


def _raw(old: bytes, new: bytes, oid: bytes, status: bytes, path: bytes) -> bytes:
    z = b"0" * 40
    return b":" + old + b" " + new + b" " + z + b" " + oid + b" " + status + b"\0" + path + b"\0"


def test_log_raw_with_parents_numbers_each_diff() -> None:
    # `--format=%x01%H %P`, as git prints it: a root commit's header ends with a space.
    root, side, merge = b"1" * 40, b"2" * 40, b"3" * 40
    raw = b"".join(
        [
            b"\x01" + root + b" \0\n",
            _raw(b"000000", b"100644", b"a" * 40, b"A", b"MEMORY.md"),
            b"\x01" + merge + b" " + root + b" " + side + b"\0\n",
            _raw(b"000000", b"100644", b"b" * 40, b"A", b"MEMORY_b.md"),
            b"\x01" + merge + b" " + root + b" " + side + b"\0\n",
            _raw(b"100644", b"100644", b"c" * 40, b"M", b"MEMORY.md"),
        ]
    )
    records = parse_log_raw(raw)
    assert [(r.commit[:1], r.diff, len(r.parents or ()), r.old_mode) for r in records] == [
        ("1", 0, 0, 0),
        ("3", 0, 2, 0),
        ("3", 1, 2, 0o100644),
    ]
    [first, *_] = changes_from(records, {"a" * 40: 9})
    assert first.parents == () and first.created is True and first.entry is not None
    assert first.entry.size == 9
    *_, oid = records[-1]  # git.py reads the new object id last
    assert oid == "c" * 40 and isinstance(records[-1], RawChange)


def test_batch_reads_binary_content() -> None:
    body = b"line\n\0\xff"
    raw = b"a" * 40 + b" blob %d\n" % len(body) + body + b"\n" + b"b" * 40 + b" missing\n"
    assert parse_batch(raw) == {"a" * 40: body}


def test_fsck_findings_map_to_codes() -> None:
    text = "error: object " + "1" * 40 + ": hasDotgit: contains '.git'\nfatal: fsck error"
    assert fsck_findings(text)[0][0] == "dotgit-path"
    assert fsck_findings("fatal: something else") == []


OID = "9a4b7fcb401d1a3fc9c73aad81eaa0a1073a0ea3"


@pytest.mark.parametrize(
    ("text", "code"),
    [
        (f"error: object {OID}: gitmodulesSymlink: .gitmodules is a symbolic link", "symlink"),
        (f"error: object {OID}: gitmodulesBlob: non-blob found at .gitmodules", "dotgit-path"),
        (
            f"error: object {OID}: gitattributesBlob: non-blob found at .gitattributes",
            "dotgit-path",
        ),
        (f"error: object {OID}: gitattributesLineLength: too long lines", "dotgit-path"),
        (f"error: object {OID}: gitmodulesUrl: disallowed submodule url: -x", "dotgit-path"),
        (
            f"error: object {OID}: duplicateEntries: contains duplicate file entries",
            "duplicate-entry",
        ),
        (f"error: object {OID}: hasDotdot: contains '..'", "unsafe-path"),
        (f"error: object {OID}: fullPathname: contains full pathnames", "unsafe-path"),
        (f"error: object {OID}: largePathname: contains excessively large pathname", "unsafe-path"),
        (f"warning: object {OID}: badFilemode: contains bad file modes", "special-file"),
        (f"warning: object {OID}: mailmapSymlink: .mailmap is a symlink", "symlink"),
        (f"error: object {OID}: treeNotSorted: not properly sorted", "malformed-object"),
        (
            f"error: object {OID}: zeroPaddedFilemode: contains zero-padded file modes",
            "malformed-object",
        ),
        (f"error: object {OID}: missingCommitter: invalid format", "malformed-object"),
        (f"error: object {OID}: someFutureCheck: whatever", "malformed-object"),
        (f"remote: error: object {OID}: hasDotgit: contains '.git'", "dotgit-path"),
        (
            f"error in tree {OID}: duplicateEntries: contains duplicate file entries",
            "duplicate-entry",
        ),
        (f"error in tree {OID} (HEAD:a/): hasDot: contains '.'", "unsafe-path"),
        ("fatal: fsck error in packed object\nfatal: index-pack failed", "malformed-object"),
        ("error: x did not send all necessary objects", "malformed-object"),
        (
            "remote: fatal: empty filename in tree entry\nremote: aborting due to possible "
            "repository corruption on the remote side.\nfatal: protocol error: bad pack header",
            "malformed-object",
        ),
    ],
)
def test_every_fsck_refusal_has_a_code(text: str, code: str) -> None:
    # A warning alone does not fail a fetch; after a failure it is a finding like any other.
    assert looks_like_bad_objects(text) == (not text.startswith("warning"))
    [(found, message)] = fsck_findings(text)
    assert found == code
    assert message.isprintable()


def test_fsck_findings_keep_each_distinct_finding_once() -> None:
    line = f"error: object {OID}: hasDotgit: contains '.git'"
    text = "\n".join([line, line, f"error: object {OID}: hasDot: contains '.'", "fatal: x"])
    assert [code for code, _ in fsck_findings(text)] == ["dotgit-path", "unsafe-path"]
    assert "hasDotgit" in fsck_findings(text)[0][1] and OID[:12] in fsck_findings(text)[0][1]


@pytest.mark.parametrize(
    "text",
    ["fatal: unable to access 'https://h/x.git/': Could not resolve host: h", "", "timeout"],
)
def test_network_failures_are_not_bad_objects(text: str) -> None:
    assert not looks_like_bad_objects(text)
    assert fsck_findings(text) == []


STDERR = st.lists(
    st.one_of(
        st.text(max_size=30),
        st.sampled_from(
            [
                "fatal: fsck error in packed object",
                "error: object " + OID + ": ",
                "error in tree " + OID + ": ",
                "hasDotgit: x",
                "bad object",
                "did not send all necessary objects",
                "possible repository corruption on the remote side",
                "warning: ",
                "remote: ",
            ]
        ),
    ),
    max_size=6,
).map("".join)
CODES = set(FSCK_CODES.values()) | {"malformed-object"}


@given(st.lists(STDERR, max_size=4).map("\n".join))
def test_bad_objects_always_yield_a_coded_finding(text: str) -> None:
    findings = fsck_findings(text)
    if looks_like_bad_objects(text):
        assert findings
    assert {code for code, _ in findings} <= CODES


def test_a_batch_of_one_kind_leaves_the_other_objects_out() -> None:
    tree, commit = "a" * 40, "b" * 40
    raw = (
        f"{tree} tree 3\n".encode()
        + b"xyz\n"
        + f"{'c' * 40} missing\n".encode()
        + f"{commit} commit 5\n".encode()
        + b"hello\n"
    )
    assert parse_batch(raw) == {tree: b"xyz", commit: b"hello"}
    assert parse_batch(raw, kind=b"commit") == {commit: b"hello"}
