"""The prune ledger parser (reference §3.7): both reference forms, grace counts, sections
ended by any other `Word Word:` line; what we write reads back the same; junk never raises."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.cycles.ledger import (
    Entry,
    Ledger,
    clean_note,
    grace_due,
    parse_ledger,
    without_sections,
    written,
)

BODY = """\
Generation 3: 70 memory commits since 0123456789ab.

Removed:
- `login` short-lived tokens are gone
- MEMORY_deploy.md#old-rule superseded
- MEMORY.md#top-note
- none
- `bad id` has a space
- bare-word is not a reference
Skipped:
- `kept-anyway` still in force
Revival grace:
- `came-back` grace 1/2 wanted again
- MEMORY_x.md#second GRACE 2 / 3
- `no-count` kept without a count
Memsync-Operation: 20260101T000000-prune-abc
- `after-trailer` grace 1/2 not in a section any more
"""


def test_both_reference_forms_grace_counts_and_section_ends() -> None:
    ledger = parse_ledger(BODY)
    assert ledger.removed == (
        Entry("login", "short-lived tokens are gone"),
        Entry("old-rule", "superseded", "MEMORY_deploy.md"),
        Entry("top-note", "", "MEMORY.md"),
    )
    assert ledger.grace == (
        Entry("came-back", "wanted again", None, (1, 2)),
        Entry("second", "", "MEMORY_x.md", (2, 3)),
    )


def test_a_body_without_sections_is_an_empty_ledger() -> None:
    assert parse_ledger("prune: checkpoint\n\nNothing expired.\n") == Ledger()
    assert parse_ledger("") == Ledger()


def test_grace_starts_at_one_advances_and_ends_after_n() -> None:
    previous = Ledger(
        removed=(Entry("back"), Entry("still-gone")),
        grace=(
            Entry("second", grace=(1, 2)),
            Entry("done", grace=(2, 2)),
            Entry("gone", grace=(1, 2)),
        ),
    )
    present = {"back", "second", "done", "other"}
    assert grace_due(previous, present, 2) == {"back": 1, "second": 2}
    assert grace_due(previous, present, 0) == {}
    # A smaller setting than the ledger's N ends grace sooner.
    assert grace_due(previous, present, 1) == {"back": 1}


def test_what_we_write_keeps_other_text_and_reads_back() -> None:
    ledger = written(["b", "a"], {"c": 1}, 2, {"a": "why a", "c": "wanted"}, {"a": "MEMORY_x.md"})
    body = "Generation 2.\n\n" + ledger.render()
    assert parse_ledger(body) == ledger
    assert ledger.removed[0] == Entry("a", "why a", "MEMORY_x.md")
    assert without_sections(BODY + "\n" + ledger.render()).count("Removed:") == 0
    assert "Skipped:" in without_sections(BODY)


IDS = st.from_regex(r"[A-Za-z0-9_.-]{1,20}", fullmatch=True)
PATHS = st.one_of(
    st.none(),
    st.just("MEMORY.md"),
    st.from_regex(r"MEMORY_[A-Za-z0-9_.-]{0,12}\.md", fullmatch=True),
)
NOTES = st.text(st.characters(exclude_categories=["Cs"]), max_size=80)


@st.composite
def ledgers(draw: st.DrawFn) -> Ledger:
    removed = draw(st.dictionaries(IDS, st.tuples(NOTES, PATHS), max_size=6))
    graced = draw(
        st.dictionaries(
            IDS,
            st.tuples(NOTES, PATHS, st.integers(0, 999_999), st.integers(0, 999_999)),
            max_size=6,
        )
    )
    return Ledger(
        tuple(Entry(i, clean_note(n), p) for i, (n, p) in removed.items()),
        tuple(Entry(i, clean_note(n), p, (k, m)) for i, (n, p, k, m) in graced.items()),
    )


@given(ledgers(), st.text(max_size=200))
def test_round_trip_of_what_we_write(ledger: Ledger, before: str) -> None:
    # Whatever precedes the sections (a generation line, prose), they read back as written.
    prefix = without_sections(before)
    body = (prefix + "\n\n" if prefix else "") + ledger.render() + "\nMemsync-Operation: x\n"
    assert parse_ledger(body) == ledger


@given(st.text(max_size=2_000))
def test_junk_never_raises(text: str) -> None:
    ledger = parse_ledger(text)
    assert all(entry.grace is not None for entry in ledger.grace)
    assert parse_ledger(ledger.render()) == ledger


@given(
    st.lists(
        st.sampled_from(
            [
                "Removed:",
                "Revival grace:",
                "Skipped:",
                "- `a` x",
                "- `b` grace 1/2",
                "- MEMORY_c.md#c grace 3/4 y",
                "- none",
                "",
                "prose",
                "revival GRACE:",
                "- `",
                "- ``",
            ]
        ),
        max_size=30,
    )
)
def test_structured_junk_reads_back_the_same(lines: list[str]) -> None:
    ledger = parse_ledger("\n".join(lines))
    assert parse_ledger(ledger.render()) == ledger
