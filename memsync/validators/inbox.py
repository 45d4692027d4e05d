"""The agent guidance inbox (`AGENT_GUIDANCE_INBOX.md`): its model, validator and merge.

The file is the title line `# Pending Agent Guidance`, then entries, each:

    ## GI-YYYYMMDD-<8 lowercase hex>

    Session: <session id>
    Submitted: <ISO-8601 UTC time ending in Z>

    <non-empty free-form body>

Nothing but blank lines may sit between the title and the first entry, and fenced code
must be closed (a `## GI-` line inside a fence is body text). `merge_inbox` is the
deterministic three-way merge sync uses when only the inbox conflicts: entry by entry,
the side that changed wins, deletions propagate, and an entry changed differently on both
sides raises `InboxConflict` for a person to settle.
"""

from __future__ import annotations

from datetime import datetime

from memsync.errors import MemsyncError, ProblemError
from memsync.lazypattern import lazy
from memsync.validators.auxpaths import INBOX_PATH
from memsync.validators.corrections import fence_mask, read_text, split_lines
from memsync.validators.problems import Problem
from memsync.validators.tree import TreeView
from memsync.values import field, value

TITLE = "# Pending Agent Guidance"
_ENTRY = lazy(r"## (GI-([0-9]{8})-[0-9a-f]{8})")
_SUBMITTED = lazy(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,6})?Z")
# Anything that looks like an attempt at an entry heading but is not exactly one.
_GI_LIKE = lazy(r" {0,3}#{1,6}[ \t]*GI-")


@value
class InboxEntry:
    """One pending guidance entry. `line` (its heading's line) is not part of equality."""

    id: str
    session: str
    submitted: str
    body: str
    line: int = field(default=0, compare=False)


@value
class Inbox:
    """A parsed inbox file: its entries, in order."""

    entries: tuple[InboxEntry, ...] = ()


class InboxInvalid(ProblemError):
    """A side given to `parse_inbox` or `merge_inbox` is not a valid inbox."""

    exit_code = 3

    def __init__(self, problems: list[Problem]) -> None:
        super().__init__(f"{INBOX_PATH} is not a valid guidance inbox", problems)


class InboxConflict(MemsyncError):
    """Both sides changed one entry differently; a person has to choose."""

    def __init__(self, entry_id: str) -> None:
        super().__init__(
            f"guidance entry {entry_id} was changed differently on both sides "
            "and needs manual review",
            hint=f"edit {INBOX_PATH} so that {entry_id} holds the wanted text, then commit",
        )
        self.entry_id = entry_id


def _valid_day(digits: str) -> bool:
    try:
        datetime.strptime(digits, "%Y%m%d")
    except ValueError:
        return False
    return True


def _valid_submitted(value: str) -> bool:
    if _SUBMITTED.fullmatch(value) is None:
        return False
    try:
        datetime.fromisoformat(value[:-1])
    except ValueError:
        return False
    return True


def _parse(text: str) -> tuple[Inbox, list[Problem]]:
    lines = split_lines(text)
    problems: list[Problem] = []

    def invalid(line: int, message: str) -> None:
        problems.append(Problem("inbox-invalid", INBOX_PATH, line, message))

    if not lines or lines[0] != TITLE:
        invalid(1, f"the first line must be exactly '{TITLE}'")
    mask, unclosed = fence_mask(lines)
    starts: list[tuple[int, str]] = []  # (0-based index, id)
    for index in range(1, len(lines)):
        line = lines[index]
        if mask[index]:
            continue
        match = _ENTRY.fullmatch(line)
        if match is not None and _valid_day(match.group(2)):
            starts.append((index, match.group(1)))
        elif match is not None or _GI_LIKE.match(line):
            invalid(index + 1, "malformed entry heading; expected '## GI-YYYYMMDD-<8 hex>'")
    first = starts[0][0] if starts else len(lines)
    stray = next((i for i in range(1, first) if lines[i].strip()), None)
    if stray is not None:
        invalid(stray + 1, "only blank lines may come between the title and the first entry")
    if unclosed is not None:
        invalid(unclosed, "fenced code block is never closed")

    entries: list[InboxEntry] = []
    seen: set[str] = set()
    for position, (start, entry_id) in enumerate(starts):
        end = starts[position + 1][0] if position + 1 < len(starts) else len(lines)
        number = start + 1
        if entry_id in seen:
            invalid(number, f"duplicate entry id {entry_id}")
        seen.add(entry_id)
        cursor = start + 1
        while cursor < end and not lines[cursor].strip():
            cursor += 1
        session = _field(lines, cursor, end, "Session: ")
        if not session:
            invalid(min(cursor, end - 1) + 1, f"{entry_id}: expected a 'Session: <id>' line")
        submitted = _field(lines, cursor + 1, end, "Submitted: ")
        if not _valid_submitted(submitted):
            invalid(
                min(cursor + 1, end - 1) + 1,
                f"{entry_id}: expected a 'Submitted: <UTC time like 2026-01-31T09:30:00Z>' line",
            )
        body_lines = lines[min(cursor + 2, end) : end]
        body = _trim_blank(body_lines)
        if not body:
            invalid(number, f"{entry_id}: the guidance body is empty")
        entries.append(InboxEntry(entry_id, session, submitted, body, number))
    return Inbox(tuple(entries)), problems


def _field(lines: list[str], index: int, end: int, prefix: str) -> str:
    if index >= end or not lines[index].startswith(prefix):
        return ""
    return lines[index].removeprefix(prefix).strip()


def _trim_blank(lines: list[str]) -> str:
    """The lines joined, without leading and trailing blank lines (indentation is kept)."""
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return "\n".join(lines[start:end])


def inbox_problems(text: str) -> list[Problem]:
    """Every `inbox-invalid` problem of one inbox text."""
    return _parse(text)[1]


def parse_inbox(text: str) -> Inbox:
    """The parsed inbox; `InboxInvalid` when the text breaks any inbox rule."""
    inbox, problems = _parse(text)
    if problems:
        raise InboxInvalid(problems)
    return inbox


def render_inbox(inbox: Inbox) -> str:
    """The canonical text: title, then entries separated by one blank line, LF endings."""
    parts = [TITLE]
    for entry in inbox.entries:
        parts.append(
            f"## {entry.id}\n\nSession: {entry.session}\nSubmitted: {entry.submitted}\n\n"
            f"{entry.body}"
        )
    return "\n\n".join(parts) + "\n"


def check_inbox(tree: TreeView) -> list[Problem]:
    """`inbox-invalid` problems of the tree's inbox; an absent inbox is fine.

    A non-regular or non-UTF-8 inbox is skipped: the path and byte rules report it.
    """
    text = read_text(tree, INBOX_PATH)
    return [] if text is None else inbox_problems(text)


def merge_inbox(base: str | None, ours: str | None, theirs: str | None) -> str:
    """Three-way merge by entry id (a missing side is an empty inbox).

    Per id: equal sides are kept; the side that differs from the base wins (a deletion
    included); otherwise `InboxConflict`. Surviving base entries keep the base order;
    additions follow, sorted by (submitted, id). Ids are visited in sorted order, so the
    first conflict reported does not depend on which side is "ours".
    """
    sides = [parse_inbox(text) if text is not None else Inbox() for text in (base, ours, theirs)]
    base_map, ours_map, theirs_map = ({e.id: e for e in side.entries} for side in sides)
    chosen: dict[str, InboxEntry] = {}
    for entry_id in sorted(base_map.keys() | ours_map.keys() | theirs_map.keys()):
        old, mine, other = base_map.get(entry_id), ours_map.get(entry_id), theirs_map.get(entry_id)
        if mine == other:
            pick = mine
        elif mine == old:
            pick = other
        elif other == old:
            pick = mine
        else:
            raise InboxConflict(entry_id)
        if pick is not None:
            chosen[entry_id] = pick
    kept = [chosen[e.id] for e in sides[0].entries if e.id in chosen]
    added = sorted(
        (entry for entry_id, entry in chosen.items() if entry_id not in base_map),
        key=lambda entry: (entry.submitted, entry.id),
    )
    return render_inbox(Inbox(tuple(kept + added)))
