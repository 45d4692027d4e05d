"""The per-file scanner: one RightMemory Markdown document in, a flat list of blocks out.

This module owns the document grammar of one file (reference §1.4): addressable headings
`#{1,4} Title {KIND id}` with an optional `→ [edges]`, plain headings, node bullets
``- `id` text → [edges]``, prose, fenced code, Pursuit `## Focus` references and legacy
Pursuit fields, plus the rules that one file alone decides (heading depth and terminal
placement, ids, edge-list syntax, nodes under F# or terminal headings).

Scanning is one pass over the lines, so its cost is linear in the size of the file.
Cross-file rules (kinds per profile, duplicate ids, backing files, edges, Focus targets)
belong to `assembly.py` and `edges.py`. Line numbers are 1-based; a line is what lies
between two `\\n` (a trailing `\\r` is ignored), never what `str.splitlines` would split.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from memsync.validators.problems import Problem

EDGE_TYPES = frozenset(
    {"dep", "emb", "bak", "agg", "ver", "ext", "up", "rel", "loc", "run", "cfg", "out"}
    | {"in", "doc", "todo"}
)
ANCHOR_KINDS = frozenset({"#", "F#", "M#", "S#", "MF#", "MQ#"})
TERMINAL_KINDS = frozenset({"F#", "M#", "S#", "MF#", "MQ#"})

_ID = r"[A-Za-z0-9_.-]+"
ID_RE = re.compile(_ID)
_KIND = r"MF#|MQ#|F#|M#|S#|#"
_HEADING = re.compile(r"(#+)(?:[ \t]|$)")
# The anchor, then nothing or an edge list: the lazy title finds the first anchor that fits.
_ANCHOR = re.compile(
    rf"#+[ \t]+(.*?)\{{({_KIND})({_ID})\}}[ \t]*(?:(?:→|->)[ \t]*\[(.*)\])?[ \t]*$"
)
_KNOWN_MARKER = re.compile(rf"\{{({_KIND})([^}}]*)\}}")
_ANY_MARKER = re.compile(r"\{([A-Za-z]+#)([^}]*)\}")
_FOCUS_HEADING = re.compile(r"#{1,2}[ \t]+focus[ \t]*$", re.IGNORECASE)
_BULLET = re.compile(r"[ \t]*-[ \t]+`([^`]+)`(?=[ \t]|$)")
# Greedy prefix: the last arrow whose bracketed list closes the line is the edge list.
_NODE_EDGES = re.compile(r".*[ \t](?:→|->)[ \t]*\[(.*)\][ \t]*$")
_FIELD = re.compile(r"[ \t]*\*\*(State|Next|Done when|Status):\*\*", re.IGNORECASE)
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)$")
_TYPE = r"[A-Za-z][A-Za-z0-9_-]*"
EDGE_RE = re.compile(rf"({_TYPE}):[ \t]*({_ID})")
# A whole list of well-formed tokens (the common case), read with one findall.
_CLEAN_LIST = re.compile(rf"[ \t]*{_TYPE}:[ \t]*{_ID}(?:[ \t]*,[ \t]*{_TYPE}:[ \t]*{_ID})*[ \t]*")
_AFTER_ARROW = re.compile(r"[ \t]*\[(.*)\][ \t]*$")
# The common node line in one match: a valid id, then a clean (or empty) edge list closing
# the line. A clean list holds no arrow or bracket, so its arrow is the line's last one: the
# same edge list `_edge_list` finds, with no problem to report. Anything else takes the
# general path (`_BULLET`, `_Scanner.node`).
_FAST_NODE = re.compile(
    rf"[ \t]*-[ \t]+`({_ID})`(?=[ \t]).*[ \t](?:→|->)[ \t]*\[((?:{_CLEAN_LIST.pattern})?)\][ \t]*$"
)

_ID_HINT = "use only letters, digits, '.', '_' and '-'"
_F_MOVE = (
    "an F# heading keeps only its body here; "
    "move this {0} into the backing file of the F# heading at line {1}"
)
_MESSAGES = {
    "heading-under-f": _F_MOVE,
    "node-under-f": _F_MOVE,
    "heading-under-terminal": "the `####` terminal reference at line {0} cannot contain headings",
    "node-under-terminal": "the `####` terminal reference at line {0} cannot contain nodes",
    "heading-too-deep": "headings deeper than `####` are not allowed",
    "terminal-kind": "a `####` heading must be a terminal reference: "
    "{{F#id}}, {{M#id}}, {{S#id}}, {{MF#id}} or {{MQ#id}}",
    "terminal-parent": "a `####` terminal reference must sit directly under a `###` heading",
    "malformed-edge-list": "after the anchor of heading `{0}` only an edge list such as "
    "`→ [dep:other-id]` may follow",
    "invalid-id": f"heading id `{{0}}` is not valid: {_ID_HINT}",
    "unsupported-marker": "heading marker `{0}` is not one of #, F#, M#, S#, MF#, MQ#",
    "invalid-node-id": f"node id `{{0}}` is not valid: {_ID_HINT}",
    "node-missing-edges": "node `{0}` needs an edge list at the end of its line, such as `→ []`",
    "invalid-focus-id": f"Focus reference `{{0}}` is not a valid id: {_ID_HINT}",
}

Span = tuple[int, int]
Edge = tuple[str, str]


class Heading(NamedTuple):
    """A heading; `item_id` is None for a plain (unaddressed) heading."""

    line: int
    end_line: int  # the last line before the next heading of the same or a lower depth
    depth: int
    title: str
    kind: str | None  # the anchor kind, when the anchor parsed with a valid id
    item_id: str | None
    edges: tuple[Edge, ...]
    bad_edges: tuple[str, ...]  # edge-list tokens that are not `type:id`
    edge_span: Span | None  # columns of the text between the brackets, if any
    parent: int  # index of the physical parent heading in `blocks`; -1 is the document
    body: Span | None  # its own prose lines, before its first child heading


class Node(NamedTuple):
    """A node bullet ``- `id` text → [edges]``."""

    line: int
    item_id: str
    edges: tuple[Edge, ...]
    bad_edges: tuple[str, ...]
    edge_span: Span
    parent: int


class FocusRef(NamedTuple):
    """A ``- `id` …`` bullet inside a Pursuit `## Focus` section: a reference, not a node."""

    line: int
    target: str
    parent: int


class Prose(NamedTuple):
    """A run of body text, from its first to its last non-blank line."""

    line: int
    end_line: int
    parent: int


class Fence(NamedTuple):
    """Fenced code; its lines are opaque. An unclosed fence runs to the end of the file."""

    line: int
    end_line: int
    parent: int
    closed: bool


Block = Heading | Node | FocusRef | Prose | Fence


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


def parse_edge_list(text: str) -> tuple[tuple[Edge, ...], tuple[str, ...]]:
    """Well-formed `(type, target)` pairs and malformed tokens; empty tokens are ignored."""
    if _CLEAN_LIST.fullmatch(text):
        return tuple(EDGE_RE.findall(text)), ()
    edges: list[Edge] = []
    bad: list[str] = []
    for raw in text.split(","):
        token = raw.strip()
        if not token:
            continue
        match = EDGE_RE.fullmatch(token)
        if match is None:
            bad.append(token)
        else:
            edges.append((match[1], match[2]))
    return tuple(edges), tuple(bad)


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
    def __init__(self, path: str, lines: Sequence[str], pursuit: bool) -> None:
        self.path = path
        self.lines = lines
        self.pursuit = pursuit
        self.blocks: list[Block] = []
        self.problems: list[Problem] = []
        self.stack: list[_Open] = []
        self.first_heading = 0
        self.prose_start = 0
        self.prose_end = 0
        self.in_focus = False
        self.in_next = False

    def problem(self, code: str, line: int, *values: object) -> None:
        message = _MESSAGES[code].format(*values)
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
        self.blocks[opened.index] = heading._replace(end_line=end_line, body=body)

    def run(self) -> None:
        fence: tuple[str, int, int, int] | None = None  # char, length, start line, parent
        fast_node, findall, add = _FAST_NODE.match, EDGE_RE.findall, self.blocks.append
        new = tuple.__new__
        stack = self.stack
        for number, line in enumerate(self.lines, 1):
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
            if first in ("-", " ", "\t") and not self.in_focus:
                fast = fast_node(line)
                if fast is not None:  # what `node` does for such a line, inline
                    parent = -1
                    if stack:
                        top = stack[-1]
                        if top.terminal or top.f_owner:
                            self.misplaced_node(number, top)
                        parent = top.index
                    if self.prose_start:
                        self.flush()
                    listed = fast[2]
                    edges = tuple(findall(listed)) if listed else ()
                    # A Node without the generated `__new__`'s Python-level call.
                    add(new(Node, (number, fast[1], edges, (), fast.span(2), parent)))
                    continue
            bullet = _BULLET.match(line) if first in ("-", " ", "\t") else None
            if bullet is None:
                self.prose(number, line)
            elif self.in_focus:
                self.focus(number, line, bullet[1])
            else:
                self.node(number, line, bullet)
        if fence is not None:
            self.blocks.append(Fence(fence[2], len(self.lines), fence[3], False))
        self.flush()
        while self.stack:
            self.close(self.stack.pop(), len(self.lines))

    def heading(self, number: int, line: str) -> None:
        depth = len(line) - len(line.lstrip("#"))
        self.flush()
        while self.stack and self.stack[-1].depth >= depth:
            self.close(self.stack.pop(), number - 1)
        parent = self.stack[-1] if self.stack else None
        if parent is None:
            self.first_heading = self.first_heading or number
        elif not parent.first_child:
            parent.first_child = number
        title, kind, item_id, edge_text, edge_span = self.anchor(number, line)
        edges, bad = parse_edge_list(edge_text) if edge_text else ((), ())
        f_owner = parent.f_owner if parent else 0
        terminal = parent.terminal if parent else 0
        if f_owner:
            self.problem("heading-under-f", number, "heading", f_owner)
        if terminal:
            self.problem("heading-under-terminal", number, terminal)
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
        heading = Heading(
            number, number, depth, title, kind, item_id, edges, bad, edge_span,
            parent.index if parent else -1, None,
        )  # fmt: skip
        self.stack.append(
            _Open(
                len(self.blocks),
                heading,
                number if kind == "F#" else f_owner,
                number if depth == 4 and kind in TERMINAL_KINDS else terminal,
            )
        )
        self.blocks.append(heading)

    def anchor(
        self, number: int, line: str
    ) -> tuple[str, str | None, str | None, str, Span | None]:
        """Title, kind, id, edge-list text and its span; problems for a bad anchor."""
        full = _ANCHOR.match(line)
        if full is not None:
            span = (full.start(4), full.end(4)) if full[4] is not None else None
            return full[1].strip(), full[2], full[3], full[4] or "", span
        title = line.lstrip("#").strip()
        known = _KNOWN_MARKER.search(line)
        if known is not None:
            if ID_RE.fullmatch(known[2]):
                self.problem("malformed-edge-list", number, known[2])
                return line[: known.start()].lstrip("#").strip(), known[1], known[2], "", None
            self.problem("invalid-id", number, known[2])
            return title, None, None, "", None
        unknown = _ANY_MARKER.search(line)
        if unknown is not None:
            self.problem("unsupported-marker", number, unknown[1])
        return title, None, None, "", None

    def node(self, number: int, line: str, bullet: re.Match[str]) -> None:
        opened = self.stack[-1] if self.stack else None
        if opened is not None and opened.terminal:
            self.problem("node-under-terminal", number, opened.terminal)
        if opened is not None and opened.f_owner:
            self.problem("node-under-f", number, "node", opened.f_owner)
        item_id = bullet[1]
        if not ID_RE.fullmatch(item_id):
            self.problem("invalid-node-id", number, item_id)
            self.prose(number, line)
            return
        listed = _edge_list(line, bullet.end())
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
        if not ID_RE.fullmatch(target):
            self.problem("invalid-focus-id", number, target)
            self.prose(number, line)
            return
        self.flush()
        self.blocks.append(FocusRef(number, target, self.parent))


def _edge_list(line: str, start: int) -> re.Match[str] | None:
    """The node's edge list: the last arrow after `start` whose `[...]` ends the line."""
    arrow = max(line.rfind("→", start), line.rfind("->", start))
    if arrow > start and line[arrow - 1] in " \t":
        listed = _AFTER_ARROW.match(line, arrow + (1 if line[arrow] == "→" else 2))
        if listed is not None:
            return listed
    return _NODE_EDGES.match(line, start)


def _closes(line: str, char: str, length: int) -> bool:
    stripped = line.lstrip(" ")
    if len(line) - len(stripped) > 3 or not stripped.startswith(char * length):
        return False
    return not stripped.lstrip(char).strip()


def scan(text: str, path: str, *, pursuit: bool = False) -> Document:
    """Scan one document. `pursuit` turns on Focus sections and legacy Pursuit fields."""
    lines = split_lines(text)
    scanner = _Scanner(path, lines, pursuit)
    scanner.run()
    first = scanner.first_heading or len(lines) + 1
    return Document(
        path=path,
        lines=tuple(lines),
        blocks=tuple(scanner.blocks),
        problems=tuple(scanner.problems),
        pursuit=pursuit,
        body=(1, first - 1) if first > 1 else None,
    )
