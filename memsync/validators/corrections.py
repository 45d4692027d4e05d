"""Shape and capacity of RightMemory's correction files (graph reference rules 34-36).

`corrections.md` is the Update role's edit feedback: `##` entries, each holding exactly the
`###` sections Candidate, Proposed edit and Accepted edit, in that order, none empty. Its
10-entry capacity is checked only when the caller asks (sync and role writes do not, so an
already merged overflow never blocks unrelated work). The two fixed Agent Correction
collections have hard limits that are always enforced.

The small Markdown scanner here (line splitting, fences, ATX headings) is shared with the
guidance inbox validator. Fenced code is opaque: nothing inside a fence is a heading.
Files that are absent, not regular or not UTF-8 are skipped; the path rules report those.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from memsync.lazypattern import lazy
from memsync.validators.problems import Problem
from memsync.validators.tree import TreeView

CORRECTIONS_PATH = "corrections.md"
COLLECTION_PATHS: tuple[str, ...] = (
    "MEMORY_agent-corrections-writing.md",
    "MEMORY_agent-corrections-design.md",
)
SECTIONS: tuple[str, ...] = ("Candidate", "Proposed edit", "Accepted edit")
MAX_CORRECTIONS = 10
MAX_COLLECTION_ENTRIES = 10
MAX_COLLECTION_LINES = 180
MAX_ENTRY_LINES = 16
MAX_LINE_CHARS = 200

_FENCE_OPEN = lazy(r"^ {0,3}(`{3,}|~{3,})(.*)$")
_FENCE_CLOSE = lazy(r"^ {0,3}(`{3,}|~{3,})[ \t]*$")


def split_lines(text: str) -> list[str]:
    """Lines as Git numbers them: split on LF only, a CR before it dropped."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def fence_mask(lines: Sequence[str]) -> tuple[list[bool], int | None]:
    """Which lines are fence delimiters or fenced content, and the line of an unclosed fence.

    A fence opens with three or more backticks or tildes after at most three spaces (a
    backtick fence's info string may not contain a backtick) and closes with a run of the
    same character at least as long, followed only by blanks.
    """
    mask: list[bool] = []
    opened: tuple[str, int, int] | None = None  # (char, length, 1-based line)
    for number, line in enumerate(lines, start=1):
        if opened is None:
            match = _FENCE_OPEN.match(line)
            if match and not (match.group(1)[0] == "`" and "`" in match.group(2)):
                opened = (match.group(1)[0], len(match.group(1)), number)
                mask.append(True)
            else:
                mask.append(False)
            continue
        mask.append(True)
        close = _FENCE_CLOSE.match(line)
        if close and close.group(1)[0] == opened[0] and len(close.group(1)) >= opened[1]:
            opened = None
    return mask, (opened[2] if opened else None)


def heading(line: str) -> tuple[int, str] | None:
    """(level, title) of an ATX heading line, or None. The title drops a closing `#` run.

    Written without a regular expression: a backtracking pattern is quadratic on long
    runs of blanks, and these files come from other machines.
    """
    text = line.lstrip(" ")
    if len(line) - len(text) > 3:
        return None
    level = len(text) - len(text.lstrip("#"))
    rest = text[level:]
    if not 1 <= level <= 6 or (rest and rest[0] not in " \t"):
        return None
    title = rest.strip(" \t")
    bare = title.rstrip("#")
    if not bare:
        return level, ""
    return level, (bare.rstrip(" \t") if bare[-1] in " \t" else title)


def read_text(tree: TreeView, path: str) -> str | None:
    """The text of a regular UTF-8 file, or None when it is absent, not regular or not UTF-8."""
    entry = tree.get(path)
    if entry is None or not entry.is_regular:
        return None
    try:
        return tree.content(path).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        return None


def _headings(lines: Sequence[str], levels: frozenset[int]) -> list[tuple[int, int, str]]:
    """(1-based line, level, title) of the unfenced headings of the given levels."""
    mask, _ = fence_mask(lines)
    found: list[tuple[int, int, str]] = []
    for number, (line, fenced) in enumerate(zip(lines, mask, strict=True), start=1):
        parsed = None if fenced else heading(line)
        if parsed is not None and parsed[0] in levels:
            found.append((number, parsed[0], parsed[1]))
    return found


def check_corrections(tree: TreeView, *, enforce_capacity: bool) -> list[Problem]:
    """`corrections-shape` (and, when asked, `corrections-capacity`) for `corrections.md`."""
    text = read_text(tree, CORRECTIONS_PATH)
    if text is None:
        return []
    lines = split_lines(text)
    # Only `##` and `###` are structural; `#` and `####`+ headings are section content.
    marks = _headings(lines, frozenset({2, 3}))
    problems: list[Problem] = []

    def shape(line: int, message: str) -> None:
        problems.append(Problem("corrections-shape", CORRECTIONS_PATH, line, message))

    entries: list[tuple[int, str, list[tuple[int, str]]]] = []
    for line, level, title in marks:
        if level == 2:
            entries.append((line, title, []))
        elif not entries:
            shape(line, f"section '### {title}' comes before any '##' correction entry")
        else:
            entries[-1][2].append((line, title))

    if enforce_capacity and len(entries) > MAX_CORRECTIONS:
        message = (
            f"corrections.md has {len(entries)} entries; at most {MAX_CORRECTIONS} are allowed"
        )
        problems.append(
            Problem("corrections-capacity", CORRECTIONS_PATH, entries[MAX_CORRECTIONS][0], message)
        )

    next_mark = {line: following for (line, _, _), (following, _, _) in pairwise(marks)}
    for entry_line, title, sections in entries:
        seen: dict[str, int] = {}
        for line, name in sections:
            if name not in SECTIONS:
                shape(line, f"entry '{title}' has an unexpected section '### {name}'")
            elif name in seen:
                shape(line, f"entry '{title}' repeats section '### {name}'")
            else:
                seen[name] = line
                end = next_mark.get(line, len(lines) + 1)
                if not "".join(lines[line : end - 1]).strip():
                    shape(line, f"entry '{title}' has an empty '### {name}' section")
        for name in SECTIONS:
            if name not in seen:
                shape(entry_line, f"entry '{title}' is missing section '### {name}'")
        present = [name for name in SECTIONS if name in seen]
        in_file = sorted(present, key=lambda name: seen[name])
        if in_file != present:
            first = next(a for a, b in zip(in_file, present, strict=True) if a != b)
            order = ", ".join(SECTIONS)
            shape(seen[first], f"entry '{title}' has its sections out of order (expected {order})")
    return problems


def check_collections(tree: TreeView) -> list[Problem]:
    """`collection-capacity` for the two fixed Agent Correction collections."""
    problems: list[Problem] = []
    for path in COLLECTION_PATHS:
        text = read_text(tree, path)
        if text is not None:
            problems += _collection_problems(path, split_lines(text))
    return problems


def _collection_problems(path: str, lines: Sequence[str]) -> list[Problem]:
    problems: list[Problem] = []

    def capacity(line: int, message: str) -> None:
        problems.append(Problem("collection-capacity", path, line, message))

    starts = [line for line, _, _ in _headings(lines, frozenset({3}))]
    if len(starts) > MAX_COLLECTION_ENTRIES:
        capacity(
            starts[MAX_COLLECTION_ENTRIES],
            f"{len(starts)} '###' entries; at most {MAX_COLLECTION_ENTRIES} are allowed",
        )
    filled = [number for number, line in enumerate(lines, start=1) if line.strip()]
    if len(filled) > MAX_COLLECTION_LINES:
        capacity(
            filled[MAX_COLLECTION_LINES],
            f"{len(filled)} non-empty lines; at most {MAX_COLLECTION_LINES} are allowed",
        )
    # An entry runs from its heading (counted) to the line before the next `###` heading.
    for start, end in zip(starts, [*starts[1:], len(lines) + 1][: len(starts)], strict=True):
        count = sum(1 for line in lines[start - 1 : end - 1] if line.strip())
        if count > MAX_ENTRY_LINES:
            capacity(
                start,
                f"entry at line {start} has {count} non-empty lines; "
                f"at most {MAX_ENTRY_LINES} are allowed",
            )
    long_lines = [n for n, line in enumerate(lines, start=1) if len(line) > MAX_LINE_CHARS]
    if long_lines:
        first = long_lines[0]
        capacity(
            first,
            f"{len(long_lines)} line(s) over {MAX_LINE_CHARS} characters; "
            f"the first is line {first} ({len(lines[first - 1])} characters)",
        )
    return problems
