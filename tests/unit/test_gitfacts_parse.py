"""The parsers behind the git box's named answers (`gitfacts`): subjects, words, names and
the version line, against what the callers parsed by hand before."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.transports.gitparse import (
    parse_names,
    parse_subjects,
    parse_version,
    parse_words,
    version_token,
)

OIDS = st.text("0123456789abcdef", min_size=40, max_size=40)
# A subject as `%s` prints it: one line (git folds the first paragraph onto it).
SUBJECTS = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=30
)


@given(st.lists(st.tuples(OIDS, SUBJECTS), max_size=6))
def test_subjects_round_trip(commits: list[tuple[str, str]]) -> None:
    raw = b"".join(f"{oid}\t{subject}\n".encode() for oid, subject in commits)
    assert parse_subjects(raw) == commits


def _old_latest_prune(raw: bytes) -> str | None:
    """`prune_due`'s hand parse, before the box named it."""
    for line in raw.splitlines():
        sha, _, subject = line.partition(b"\t")
        if subject.startswith(b"prune:"):
            return sha.decode("ascii")
    return None


@given(
    st.lists(
        st.tuples(OIDS, st.one_of(SUBJECTS, st.just("prune: x"), st.binary(max_size=12))),
        max_size=6,
    )
)
def test_the_latest_prune_is_found_as_before(commits: list[tuple[str, str | bytes]]) -> None:
    raw = b"".join(
        oid.encode() + b"\t" + (s if isinstance(s, bytes) else s.encode()) + b"\n"
        for oid, s in commits
    )
    latest = next((o for o, s in parse_subjects(raw) if s.startswith("prune:")), None)
    assert latest == _old_latest_prune(raw)


def test_subjects_keep_bad_utf8_and_lines_without_a_tab() -> None:
    assert parse_subjects(b"a\tprune: \xff\nstray\n") == [("a", "prune: \ufffd"), ("stray", "")]


@given(st.binary(max_size=60))
def test_words_are_what_the_text_split_gave(raw: bytes) -> None:
    old = raw.decode("utf-8", "surrogateescape").strip().split()  # `out(...).split()`
    assert parse_words(raw) == old


NAMES = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), min_size=1, max_size=12
)


@given(st.lists(NAMES, max_size=6))
def test_names_round_trip(names: list[str]) -> None:
    """Every name back as listed, whatever else it holds (`\r`, spaces, U+2028)."""
    assert parse_names("".join(f"{n}\n" for n in names).encode()) == names


def test_names_not_utf8_survive() -> None:
    assert parse_names(b"MEMORY_\xff.md\n\n") == ["MEMORY_\udcff.md"]


@given(st.integers(0, 10_000), st.integers(0, 10_000), st.text(max_size=12))
def test_versions_parse(major: int, minor: int, rest: str) -> None:
    text = f"git version {major}.{minor}{rest}"
    assert parse_version(text) == (major, minor) or rest[:1].isdigit()
    assert version_token(text) is not None


@given(st.text(max_size=30))
def test_anything_else_is_no_version(text: str) -> None:
    if not text.startswith("git version "):
        assert parse_version(text) is None
        assert version_token(text) is None


def test_version_examples() -> None:
    assert parse_version("git version 2.39.5") == (2, 39)
    assert version_token("git version 2.39.5 (Apple Git-154)") == "2.39.5"
    assert parse_version("git version two") is None
    assert version_token("") is None
