"""The prune ledger: the body of a `prune:` commit (reference §3.7), parsed and written.

    Removed:
    - `item-id` why it went
    - MEMORY_deploy.md#other-id why it went
    Revival grace:
    - `came-back` grace 1/2 why it stays

Only the `Removed:` and `Revival grace:` sections are read; any other `Word Word:` line
(a `Skipped:` section, a `Memsync-Operation:` trailer) ends the current section. An entry
is a `- ` line whose reference is `MEMORY(_x).md#id` or a backticked id, then free text;
a grace entry must say `grace K/N` and is dropped without it. `- none` and prose lines are
not entries. Parsing never fails: junk yields fewer entries, never an error.

Revival grace is decided here, not by the model: an item the previous ledger removed that
is present again is kept at this prune as `grace 1/N`; one the previous ledger kept as
`grace K/N` with K < N is kept again as `grace K+1/N`; after N it is judged like any other.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

REMOVED, GRACE = "Removed:", "Revival grace:"
DEFAULT_REVIVAL_GRACE = 2

_HEADER = re.compile(r"[A-Za-z][A-Za-z0-9_-]*(?: [A-Za-z0-9_-]+)*:(?:[ \t].*)?")
_ENTRY = re.compile(r"[ \t]*[-*][ \t]+(.*)")
_ID = r"[A-Za-z0-9_.-]+"
_PATH = r"MEMORY(?:_[A-Za-z0-9_.-]*)?\.md"
_TICKED = re.compile(rf"`(?:({_PATH})#)?({_ID})`(?=\s|$)")
_PLAIN = re.compile(rf"({_PATH})#({_ID})(?=\s|$)")
_GRACE = re.compile(r"\bgrace[ \t]+(\d{1,6})[ \t]*/[ \t]*(\d{1,6})\b", re.IGNORECASE)
NOTE_MAX = 300


@dataclass(frozen=True)
class Entry:
    """One ledger line: the item, the file it was named with (if any), the free text, and
    for a grace entry its `grace K/N`."""

    item: str
    note: str = ""
    path: str | None = None
    grace: tuple[int, int] | None = None

    def render(self) -> str:
        ref = f"{self.path}#{self.item}" if self.path else f"`{self.item}`"
        parts = [ref]
        if self.grace is not None:
            parts.append(f"grace {self.grace[0]}/{self.grace[1]}")
        if self.note:
            parts.append(self.note)
        return "- " + " ".join(parts)


@dataclass(frozen=True)
class Ledger:
    removed: tuple[Entry, ...] = ()
    grace: tuple[Entry, ...] = ()

    def render(self) -> str:
        """The two sections, each entry on its line (`- none` for an empty section)."""
        lines = [REMOVED, *(e.render() for e in self.removed)]
        if not self.removed:
            lines.append("- none")
        lines += [GRACE, *(e.render() for e in self.grace)]
        if not self.grace:
            lines.append("- none")
        return "\n".join(lines)

    def summary(self) -> str:
        """One short paragraph for a prompt: what the previous prune removed and kept."""
        removed = ", ".join(e.item for e in self.removed) or "none"
        kept = ", ".join(f"{e.item} ({e.grace[0]}/{e.grace[1]})" for e in self.grace if e.grace)
        return f"removed: {removed}\nin revival grace: {kept or 'none'}"

    def notes(self) -> dict[str, str]:
        """id -> the free text given for it (removed entries first)."""
        found: dict[str, str] = {}
        for entry in (*self.removed, *self.grace):
            if entry.note:
                found.setdefault(entry.item, entry.note)
        return found


def parse_ledger(body: str) -> Ledger:
    """The `Removed:` and `Revival grace:` entries of a commit body (never raises)."""
    removed: dict[str, Entry] = {}
    grace: dict[str, Entry] = {}
    section: dict[str, Entry] | None = None
    for raw in body.splitlines():
        line = raw.rstrip()
        header = _section_of(line)
        if header is not None:
            section = {REMOVED: removed, GRACE: grace}.get(header)
            continue
        if section is None:
            continue
        entry = _entry(line, graced=section is grace)
        if entry is not None:
            section.setdefault(entry.item, entry)
    return Ledger(tuple(removed.values()), tuple(grace.values()))


def _section_of(line: str) -> str | None:
    """The canonical name of a section header line, `""` for another header, None if none."""
    if not _HEADER.fullmatch(line):
        return None
    name = line.split(":", 1)[0].strip().casefold()
    if name == "removed":
        return REMOVED
    if name == "revival grace":
        return GRACE
    return ""


def _entry(line: str, *, graced: bool) -> Entry | None:
    bullet = _ENTRY.fullmatch(line)
    if bullet is None:
        return None
    text = bullet.group(1).strip()
    ref = _TICKED.match(text) or _PLAIN.match(text)  # a bare word (`- none`) is neither
    if ref is None:
        return None
    path, item = ref.group(1), ref.group(2)
    rest = text[ref.end() :].strip()
    counted = None
    if graced:
        found = _GRACE.search(rest)
        if found is None:
            return None
        counted = (int(found.group(1)), int(found.group(2)))
        rest = (rest[: found.start()] + rest[found.end() :]).strip()
    return Entry(item, clean_note(rest), path, counted)


def clean_note(text: str) -> str:
    """One line of at most NOTE_MAX characters."""
    text = " ".join(text.split())
    return text if len(text) <= NOTE_MAX else text[: NOTE_MAX - 1] + "…"


def grace_due(previous: Ledger, present: Collection[str], limit: int) -> dict[str, int]:
    """id -> K: the items this prune must keep, as `grace K/limit` (see the module text)."""
    due: dict[str, int] = {}
    if limit <= 0:
        return due
    for entry in previous.removed:
        if entry.item in present:
            due[entry.item] = 1
    for entry in previous.grace:
        if entry.grace is None or entry.item not in present:
            continue
        count = entry.grace[0]
        if count < limit:
            due[entry.item] = max(due.get(entry.item, 0), count + 1)
    return due


def written(
    removed: Iterable[str],
    graced: Mapping[str, int],
    limit: int,
    notes: Mapping[str, str],
    paths: Mapping[str, str] | None = None,
) -> Ledger:
    """The ledger a landed prune records: what actually went and what grace kept."""
    paths = paths or {}
    return Ledger(
        tuple(Entry(i, clean_note(notes.get(i, "")), paths.get(i)) for i in sorted(set(removed))),
        tuple(
            Entry(i, clean_note(notes.get(i, "")), paths.get(i), (k, limit))
            for i, k in sorted(graced.items())
        ),
    )


def without_sections(body: str) -> str:
    """`body` without its `Removed:` and `Revival grace:` sections (what else it says stays)."""
    kept: list[str] = []
    skipping = False
    for raw in body.splitlines():
        header = _section_of(raw.rstrip())
        if header is not None:
            skipping = header in (REMOVED, GRACE)
        if not skipping:
            kept.append(raw)
    return "\n".join(kept).strip()
