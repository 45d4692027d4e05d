"""One RightMemory Markdown document scanned: its lines in, a flat list of blocks out.

This module owns the scan of one file (reference §1.4): one pass over the lines, so its
cost is linear in the size of the file, that sorts each line into a heading (the heading
grammar: `headings.py`), a node bullet or a Pursuit `## Focus` reference (the node-line
grammar and its fast path for runs of common lines: `nodelines.py`; edge lists:
`edgelists.py`), prose, fenced code or a legacy Pursuit field, and makes the blocks
(`blocks.py`). It decides the rules that one file alone decides and that need the headings
above a line: heading depth and terminal placement, nodes and headings under F# or terminal
headings. Cross-file rules (kinds per profile, duplicate ids, backing files, edges, Focus
targets) belong to `assembly.py` and `edges.py`. Line numbers are 1-based; a line is what
lies between two `\\n` (a trailing `\\r` is ignored), never what `str.splitlines` would split.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from memsync.lazypattern import lazy
from memsync.validators import edgelists, headings, nodelines
from memsync.validators.blocks import Block, Fence, FocusRef, Heading, Node, NodeRun, Prose, Span
from memsync.validators.edgelists import EDGE_RE, parse_edge_list
from memsync.validators.headings import TERMINAL_KINDS, unanchored
from memsync.validators.nodelines import Runs, edge_list
from memsync.validators.problems import Problem
from memsync.validators.scanwords import MESSAGES

# The patterns the scan calls per line, bound by assignment: CPython compiles `NAME.match()`
# on a name an import bound as an attribute load (a new bound method per call), not as a
# method call.
_HEADING, _ANCHOR, _FOCUS_HEADING = headings.HEADING, headings.ANCHOR, headings.FOCUS_HEADING
_BULLET, _FAST_NODE, _ID_RE = nodelines.BULLET, nodelines.FAST_NODE, edgelists.ID_RE
_FIELD = lazy(r"[ \t]*\*\*(State|Next|Done when|Status):\*\*", re.IGNORECASE)
_FENCE = lazy(r" {0,3}(`{3,}|~{3,})(.*)$")


@dataclass(frozen=True)
class Document:
    """One scanned file: its lines (without terminators), blocks and one-file problems."""

    path: str
    lines: tuple[str, ...]
    blocks: tuple[Block, ...]
    problems: tuple[Problem, ...]
    pursuit: bool
    body: Span | None  # the text before the first heading


def decode(data: bytes) -> str | None:
    """The text of a document, or None when it is not UTF-8 (the path rules report that)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.removeprefix("\ufeff")


def split_lines(text: str) -> list[str]:
    """Lines as the scanner numbers them: split on `\\n`, a trailing `\\r` dropped."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    if "\r" in text:
        lines = [line.removesuffix("\r") for line in lines]
    return lines


class _Open:
    """A heading whose end is not known yet, with what its descendants inherit."""

    __slots__ = ("depth", "f_owner", "first_child", "heading", "index", "terminal")

    def __init__(self, index: int, heading: Heading, f_owner: int, terminal: int) -> None:
        self.index = index
        self.heading = heading
        self.depth = heading.depth
        self.f_owner = f_owner  # line of the nearest F# heading at or above, or 0
        self.terminal = terminal  # line of the enclosing `####` terminal, or 0
        self.first_child = 0


class _Scanner:
    def __init__(self, path: str, lines: Sequence[str], pursuit: bool, *, runs: bool) -> None:
        self.path = path
        self.lines = lines
        self.pursuit = pursuit
        self.runs = runs  # NodeRun blocks for the common node lines, not Node blocks
        self.blocks: list[Block | NodeRun] = []
        self.problems: list[Problem] = []
        self.stack: list[_Open] = []
        self.first_heading = 0
        self.prose_start = 0
        self.prose_end = 0
        self.in_focus = False
        self.in_next = False

    def problem(self, code: str, line: int, *values: object) -> None:
        message = MESSAGES[code].format(*values)
        self.problems.append(Problem(code, self.path, line, message))

    @property
    def parent(self) -> int:
        return self.stack[-1].index if self.stack else -1

    def prose(self, number: int, line: str) -> None:
        if line.strip():
            if not self.prose_start:
                self.prose_start = number
            self.prose_end = number

    def flush(self) -> None:
        if self.prose_start:
            self.blocks.append(Prose(self.prose_start, self.prose_end, self.parent))
            self.prose_start = 0

    def close(self, opened: _Open, end_line: int) -> None:
        heading = opened.heading
        body_end = (opened.first_child or end_line + 1) - 1
        body = (heading.line + 1, body_end) if body_end > heading.line else None
        # What `_replace(end_line=..., body=...)` makes, without its Python-level calls.
        fields = (heading[0], end_line, *heading[2:10], body)
        self.blocks[opened.index] = tuple.__new__(Heading, fields)

    def run(self, text: str) -> None:
        """Scan `self.lines`; `text` is what they were split from (for `Runs`)."""
        fence: tuple[str, int, int, int] | None = None  # char, length, start line, parent
        lines = self.lines
        runs = Runs(text)
        number = 0
        while number < len(lines):
            line = lines[number]
            number += 1
            if fence is not None:
                if _closes(line, fence[0], fence[1]):
                    self.blocks.append(Fence(fence[2], number, fence[3], True))
                    fence = None
                continue
            if not line:  # every other path leaves an empty line alone
                continue
            first = line[:1]
            if first == "#" and _HEADING.match(line):
                self.heading(number, line)
                continue
            if first in ("`", "~", " "):
                opened = _FENCE.match(line)
                if opened and not (opened[1][0] == "`" and "`" in opened[2]):
                    self.flush()
                    fence = (opened[1][0], len(opened[1]), number, self.parent)
                    continue
            if self.pursuit and self.pursuit_prose(number, line, first):
                continue
            if first not in ("-", " ", "\t"):
                self.prose(number, line)
                continue
            if not self.in_focus and (run := runs.starting(number)) is not None:
                number = self.fast_nodes(runs.body, run, number)
                continue
            bullet = _BULLET.match(line)
            if bullet is None:
                self.prose(number, line)
            elif self.in_focus:
                self.focus(number, line, bullet[1])
            else:
                self.node(number, line, bullet)
        if fence is not None:
            self.blocks.append(Fence(fence[2], len(lines), fence[3], False))
        self.flush()
        while self.stack:
            self.close(self.stack.pop(), len(lines))

    def fast_nodes(self, body: str, run: re.Match[str], at: int) -> int:
        """The nodes of a run of common lines starting at line `at`: what `node` does for
        each, with one parent (no heading between). Returns the run's last node line."""
        top = self.stack[-1] if self.stack else None
        parent = top.index if top is not None else -1
        if self.prose_start:
            self.flush()
        start, end = run.span()
        ids, lists, gaps = zip(*_FAST_NODE.findall(body, start, end), strict=True)
        numbers = list(accumulate(map(len, gaps[:-1]), initial=at))
        if top is not None and (top.terminal or top.f_owner):
            for number in numbers:
                self.misplaced_node(number, top)
        if self.runs:
            self.blocks.append(tuple.__new__(NodeRun, (numbers, ids, lists, parent)))
            return numbers[-1]
        findall, new, add = EDGE_RE.findall, tuple.__new__, self.blocks.append
        for number, fast in zip(numbers, _FAST_NODE.finditer(body, start, end), strict=True):
            listed, first = fast[2], fast.start()
            edges = tuple(findall(listed)) if listed else ()
            span = (fast.start(2) - first, fast.end(2) - first)
            # A Node without the generated `__new__`'s Python-level call.
            add(new(Node, (number, fast[1], edges, (), span, parent)))
        return numbers[-1]

    def heading(self, number: int, line: str) -> None:
        depth = len(line) - len(line.lstrip("#"))
        if self.prose_start:
            self.flush()
        stack = self.stack
        while stack and stack[-1].depth >= depth:
            self.close(stack.pop(), number - 1)
        parent = stack[-1] if stack else None
        if parent is None:
            self.first_heading = self.first_heading or number
        elif not parent.first_child:
            parent.first_child = number
        full = _ANCHOR.match(line)
        if full is not None:  # the usual anchor, read in place (`unanchored` reads the rest)
            title, kind, item_id, edge_text = full.group(1, 2, 3, 4)
            title = title.strip()
            edge_span = full.span(4) if edge_text is not None else None
        else:
            title, kind, item_id, problem = unanchored(line)
            if problem is not None:
                self.problem(problem[0], number, problem[1])
            edge_text, edge_span = "", None
        edges, bad = parse_edge_list(edge_text) if edge_text else ((), ())
        if parent is not None:
            f_owner, terminal = parent.f_owner, parent.terminal
            if f_owner:
                self.problem("heading-under-f", number, "heading", f_owner)
            if terminal:
                self.problem("heading-under-terminal", number, terminal)
        else:
            f_owner = terminal = 0
        if depth > 4:
            self.problem("heading-too-deep", number)
        elif depth == 4:
            if kind not in TERMINAL_KINDS:
                self.problem("terminal-kind", number)
            if parent is None or parent.depth != 3:
                self.problem("terminal-parent", number)
        if self.pursuit:
            self.in_next = False
            if depth <= 2:
                self.in_focus = _FOCUS_HEADING.match(line) is not None
        # A Heading without the generated `__new__`'s Python-level call.
        fields = (
            number, number, depth, title, kind, item_id, edges, bad, edge_span,
            parent.index if parent else -1, None,
        )  # fmt: skip
        heading = tuple.__new__(Heading, fields)
        stack.append(
            _Open(
                len(self.blocks),
                heading,
                number if kind == "F#" else f_owner,
                number if depth == 4 and kind in TERMINAL_KINDS else terminal,
            )
        )
        self.blocks.append(heading)

    def node(self, number: int, line: str, bullet: re.Match[str]) -> None:
        opened = self.stack[-1] if self.stack else None
        if opened is not None and opened.terminal:
            self.problem("node-under-terminal", number, opened.terminal)
        if opened is not None and opened.f_owner:
            self.problem("node-under-f", number, "node", opened.f_owner)
        item_id = bullet[1]
        if not _ID_RE.fullmatch(item_id):
            self.problem("invalid-node-id", number, item_id)
            self.prose(number, line)
            return
        listed = edge_list(line, bullet.end())
        if listed is None:
            self.problem("node-missing-edges", number, item_id)
            self.prose(number, line)
            return
        if self.prose_start:
            self.flush()
        edges, bad = parse_edge_list(listed[1])
        span = (listed.start(1), listed.end(1))
        self.blocks.append(Node(number, item_id, edges, bad, span, opened.index if opened else -1))

    def pursuit_prose(self, number: int, line: str, first: str) -> bool:
        """A legacy Pursuit field, or a line of a `**Next:**` field: prose, nothing else."""
        field = _FIELD.match(line) if first in ("*", " ", "\t") else None
        if field is not None:
            self.in_next = field[1].lower() == "next"
            self.prose(number, line)
            return True
        if self.in_next:
            self.prose(number, line)
            return True
        return False

    def misplaced_node(self, number: int, opened: _Open) -> None:
        if opened.terminal:
            self.problem("node-under-terminal", number, opened.terminal)
        if opened.f_owner:
            self.problem("node-under-f", number, "node", opened.f_owner)

    def focus(self, number: int, line: str, target: str) -> None:
        if not _ID_RE.fullmatch(target):
            self.problem("invalid-focus-id", number, target)
            self.prose(number, line)
            return
        self.flush()
        self.blocks.append(FocusRef(number, target, self.parent))


def _closes(line: str, char: str, length: int) -> bool:
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3 or not stripped.startswith(char * length):
        return False
    return not stripped.lstrip(char).strip()


def scan(text: str, path: str, *, pursuit: bool = False) -> Document:
    """Scan one document. `pursuit` turns on Focus sections and legacy Pursuit fields."""
    lines = split_lines(text)
    scanner = _Scanner(path, lines, pursuit, runs=False)
    scanner.run(text)
    first = scanner.first_heading or len(lines) + 1
    return Document(
        path=path,
        lines=tuple(lines),
        blocks=tuple(scanner.blocks),  # type: ignore[arg-type]  # no NodeRun without runs
        problems=tuple(scanner.problems),
        pursuit=pursuit,
        body=(1, first - 1) if first > 1 else None,
    )


def scan_blocks(
    text: str, path: str, *, pursuit: bool = False
) -> tuple[list[Block | NodeRun], list[Problem]]:
    """What `scan` finds, for the summary pass: the blocks, with a `NodeRun` for each run
    of common node lines where `scan` has their `Node` blocks, and the problems."""
    scanner = _Scanner(path, split_lines(text), pursuit, runs=True)
    scanner.run(text)
    return scanner.blocks, scanner.problems
