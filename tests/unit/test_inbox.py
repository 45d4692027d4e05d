"""The guidance inbox: validation (rule 40, sync §2.5), the model, and the three-way merge."""

from __future__ import annotations

import re
from datetime import date, datetime

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from memsync.validators.inbox import (
    TITLE,
    Inbox,
    InboxConflict,
    InboxEntry,
    InboxInvalid,
    check_inbox,
    inbox_problems,
    merge_inbox,
    parse_inbox,
    render_inbox,
)
from memsync.validators.tree import MODE_SYMLINK, Entry, TreeView

GI1 = "GI-20260105-0a1b2c3d"
GI2 = "GI-20260106-deadbeef"


def block(entry_id: str = GI1, body: str = "Prefer small commits.", when: str = "") -> str:
    submitted = when or "2026-01-05T10:00:00Z"
    return f"## {entry_id}\n\nSession: s-1\nSubmitted: {submitted}\n\n{body}\n"


VALID = f"{TITLE}\n\n{block(GI1)}\n{block(GI2, 'Second.', '2026-01-06T08:00:00.250Z')}"


def lines_of(text: str) -> list[int | None]:
    problems = inbox_problems(text)
    assert {p.code for p in problems} <= {"inbox-invalid"}
    assert all(p.path == "AGENT_GUIDANCE_INBOX.md" for p in problems)
    return [p.line for p in problems]


def test_valid_inbox_is_clean_and_parses() -> None:
    assert inbox_problems(VALID) == []
    inbox = parse_inbox(VALID)
    assert [(e.id, e.session, e.submitted, e.body, e.line) for e in inbox.entries] == [
        (GI1, "s-1", "2026-01-05T10:00:00Z", "Prefer small commits.", 3),
        (GI2, "s-1", "2026-01-06T08:00:00.250Z", "Second.", 10),
    ]
    assert render_inbox(inbox) == VALID


def test_title_only_and_crlf_are_valid() -> None:
    assert inbox_problems(TITLE + "\n") == []
    assert inbox_problems(TITLE) == []
    assert inbox_problems(VALID.replace("\n", "\r\n")) == []


@pytest.mark.parametrize(
    "first", ["", "# Pending agent guidance", "# Pending Agent Guidance ", "x"]
)
def test_first_line_must_be_the_title(first: str) -> None:
    assert 1 in lines_of(first + "\n\n" + block())


def test_content_before_the_first_entry() -> None:
    assert lines_of(f"{TITLE}\n\nhello\n\n{block()}") == [3]
    assert lines_of(f"{TITLE}\nstray text only\n") == [2]


@pytest.mark.parametrize(
    "heading",
    [
        "## GI-2026010-0a1b2c3d",
        "## GI-20260105-0A1B2C3D",
        "## GI-20260105-0a1b2c3",
        "##  GI-20260105-0a1b2c3d",
        "### GI-20260105-0a1b2c3d",
        "## GI-20260105-0a1b2c3d ",
        "## GI-20261305-0a1b2c3d",
        "##GI-20260105-0a1b2c3d",
    ],
)
def test_malformed_entry_heading(heading: str) -> None:
    text = f"{TITLE}\n\n{block(GI2)}\n{heading}\n"
    assert lines_of(text) == [10]


def test_duplicate_ids() -> None:
    assert lines_of(f"{TITLE}\n\n{block()}\n{block()}") == [10]


@pytest.mark.parametrize(
    ("provenance", "line"),
    [
        ("Submitted: 2026-01-05T10:00:00Z\n", 5),  # Session missing (and Submitted misplaced)
        ("Session:\nSubmitted: 2026-01-05T10:00:00Z\n", 5),
        ("session: s\nSubmitted: 2026-01-05T10:00:00Z\n", 5),
    ],
)
def test_session_is_required(provenance: str, line: int) -> None:
    text = f"{TITLE}\n\n## {GI1}\n\n{provenance}\nbody\n"
    assert line in lines_of(text)


@pytest.mark.parametrize(
    "submitted",
    [
        "2026-01-05T10:00:00",
        "2026-01-05T10:00:00+00:00",
        "2026-01-05",
        "2026-02-30T10:00:00Z",
        "2026-01-05 10:00:00Z",
        "yesterday",
    ],
)
def test_submitted_must_be_utc_with_z(submitted: str) -> None:
    text = f"{TITLE}\n\n## {GI1}\n\nSession: s\nSubmitted: {submitted}\n\nbody\n"
    assert lines_of(text) == [6]


def test_submitted_line_must_follow_session() -> None:
    text = f"{TITLE}\n\n## {GI1}\n\nSession: s\n\nSubmitted: 2026-01-05T10:00:00Z\n\nbody\n"
    assert lines_of(text) == [6]


@pytest.mark.parametrize("after", ["", "\n", "\n   \n\n"])
def test_body_must_not_be_empty(after: str) -> None:
    text = f"{TITLE}\n\n## {GI1}\n\nSession: s\nSubmitted: 2026-01-05T10:00:00Z\n{after}"
    assert lines_of(text) == [3]
    assert lines_of(text + f"## {GI2}\n\nSession: s\nSubmitted: 2026-01-05T10:00:00Z\n\nx\n") == [3]


def test_unclosed_fence() -> None:
    text = TITLE + "\n\n" + block(body="```py\nprint(1)")
    assert lines_of(text) == [8]


def test_fenced_entry_headings_are_body_text() -> None:
    body = f"See:\n~~~\n## {GI2}\n## GI-bad\n~~~"
    text = f"{TITLE}\n\n{block(body=body)}"
    assert inbox_problems(text) == []
    assert parse_inbox(text).entries[0].body == body


def test_check_inbox_reads_the_tree() -> None:
    assert check_inbox(TreeView({})) == []
    assert check_inbox(TreeView.from_bytes({"AGENT_GUIDANCE_INBOX.md": VALID.encode()})) == []
    bad = TreeView.from_bytes({"AGENT_GUIDANCE_INBOX.md": b"# Wrong\n"})
    assert [(p.code, p.line) for p in check_inbox(bad)] == [("inbox-invalid", 1)]
    # Not UTF-8, or not a regular file: the byte and path rules own those.
    assert check_inbox(TreeView.from_bytes({"AGENT_GUIDANCE_INBOX.md": b"\xff\n"})) == []
    link = TreeView({"AGENT_GUIDANCE_INBOX.md": Entry(MODE_SYMLINK, 1, data=b"x")})
    assert check_inbox(link) == []


def test_parse_inbox_raises_with_problems() -> None:
    with pytest.raises(InboxInvalid) as caught:
        parse_inbox("nope\n")
    assert [p.line for p in caught.value.problems] == [1]


def test_entry_line_is_not_part_of_equality() -> None:
    assert InboxEntry(GI1, "s", "t", "b", 3) == InboxEntry(GI1, "s", "t", "b", 99)


# --- merge -----------------------------------------------------------------------------


def test_merge_examples() -> None:
    base = f"{TITLE}\n\n{block(GI1)}"
    ours = base + "\n" + block(GI2, "ours", "2026-01-06T00:00:00Z")
    third = "GI-20260101-00000001"
    theirs = base + "\n" + block(third, "theirs", "2026-01-01T00:00:00Z")
    merged = parse_inbox(merge_inbox(base, ours, theirs))
    assert [e.id for e in merged.entries] == [GI1, third, GI2]
    # A missing side is an empty inbox; deletions propagate.
    assert merge_inbox(None, None, None) == TITLE + "\n"
    assert merge_inbox(base, None, base) == TITLE + "\n"
    assert merge_inbox(None, ours, None) == render_inbox(parse_inbox(ours))


def test_merge_conflict_names_the_entry() -> None:
    base = f"{TITLE}\n\n{block(GI1)}"
    ours, theirs = f"{TITLE}\n\n{block(GI1, 'one')}", f"{TITLE}\n\n{block(GI1, 'two')}"
    with pytest.raises(InboxConflict) as caught:
        merge_inbox(base, ours, theirs)
    assert caught.value.entry_id == GI1
    assert GI1 in str(caught.value) and "manual review" in str(caught.value)
    # Deleting on one side while editing on the other is a conflict as well.
    with pytest.raises(InboxConflict):
        merge_inbox(base, TITLE + "\n", theirs)


def test_merge_refuses_an_invalid_side() -> None:
    with pytest.raises(InboxInvalid):
        merge_inbox(TITLE + "\n", "garbage\n", None)


# --- properties ------------------------------------------------------------------------

_SAFE_LINE = re.compile(r" {0,3}(#{1,6}[ \t]*GI-|`{3,}|~{3,})")
lines_st = st.text(st.characters(blacklist_characters="\r\n"), max_size=30).filter(
    lambda line: _SAFE_LINE.match(line) is None
)
fenced_st = st.just(f"```\n## {GI1}\n```")
bodies_st = st.lists(st.one_of(lines_st, fenced_st), min_size=1, max_size=5).map("\n".join)
bodies_st = bodies_st.filter(
    lambda body: bool(body.strip()) and bool(body.split("\n")[0].strip())
    and bool(body.split("\n")[-1].strip())
)  # fmt: skip
ids_st = st.builds(
    lambda day, suffix: f"GI-{day.year:04d}{day.month:02d}{day.day:02d}-{suffix}",
    st.dates(date(2000, 1, 1), date(2099, 12, 31)),
    st.text("0123456789abcdef", min_size=8, max_size=8),
)
times_st = st.datetimes(datetime(2000, 1, 1), datetime(2099, 12, 31)).map(
    lambda moment: moment.isoformat(timespec="seconds") + "Z"
)
sessions_st = st.text("abcdefXYZ0123456789-_.:", min_size=1, max_size=12)
entries_st = st.builds(InboxEntry, ids_st, sessions_st, times_st, bodies_st)
inboxes_st = st.lists(entries_st, max_size=6, unique_by=lambda e: e.id).map(
    lambda items: Inbox(tuple(items))
)


@given(inboxes_st)
def test_parse_render_round_trip(inbox: Inbox) -> None:
    text = render_inbox(inbox)
    assert inbox_problems(text) == []
    assert parse_inbox(text) == inbox
    assert render_inbox(parse_inbox(text)) == text


# Made once, not per draw (Hypothesis validates each new strategy object); same examples.
_FATES = st.sampled_from(["keep", "drop", "edit"])
_ADDED = st.lists(entries_st, max_size=3, unique_by=lambda e: e.id)


@st.composite
def derived(draw: st.DrawFn, base: Inbox) -> Inbox:
    """A plausible later version of `base`: some entries dropped or edited, some appended."""
    kept: list[InboxEntry] = []
    for entry in base.entries:
        fate = draw(_FATES)
        if fate == "edit":
            kept.append(InboxEntry(entry.id, entry.session, entry.submitted, draw(bodies_st)))
        elif fate == "keep":
            kept.append(entry)
    taken = {e.id for e in base.entries}
    added = draw(_ADDED)
    added = sorted((e for e in added if e.id not in taken), key=lambda e: (e.submitted, e.id))
    return Inbox(tuple(kept + added))


@given(st.data())
def test_merge_with_an_unchanged_side_takes_the_other(data: st.DataObject) -> None:
    base = data.draw(inboxes_st)
    other = data.draw(derived(base))
    b, x = render_inbox(base), render_inbox(other)
    assert merge_inbox(b, x, b) == x
    assert merge_inbox(b, b, x) == x
    assert merge_inbox(b, x, x) == x


@given(st.data())
def test_merge_is_deterministic_and_symmetric(data: st.DataObject) -> None:
    base = data.draw(inboxes_st)
    b, o, t = (render_inbox(i) for i in (base, data.draw(derived(base)), data.draw(derived(base))))
    try:
        merged = merge_inbox(b, o, t)
    except InboxConflict as first:
        with pytest.raises(InboxConflict) as second:
            merge_inbox(b, t, o)
        assert second.value.entry_id == first.entry_id
        return
    assert merged == merge_inbox(b, o, t)
    assert merged == merge_inbox(b, t, o)
    assert inbox_problems(merged) == []
    assert render_inbox(parse_inbox(merged)) == merged


@given(st.data())
def test_a_true_conflict_names_its_entry(data: st.DataObject) -> None:
    base = data.draw(inboxes_st.filter(lambda inbox: bool(inbox.entries)))
    target = data.draw(st.sampled_from(base.entries))
    one, two = data.draw(bodies_st), data.draw(bodies_st)
    assume(len({one, two, target.body}) == 3)

    def edited(body: str) -> str:
        entries = [
            InboxEntry(e.id, e.session, e.submitted, body) if e.id == target.id else e
            for e in base.entries
        ]
        return render_inbox(Inbox(tuple(entries)))

    with pytest.raises(InboxConflict) as caught:
        merge_inbox(render_inbox(base), edited(one), edited(two))
    assert caught.value.entry_id == target.id


@given(st.text())
def test_arbitrary_text_never_crashes(text: str) -> None:
    assert isinstance(inbox_problems(text), list)
