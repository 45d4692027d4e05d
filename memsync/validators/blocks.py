"""What the scanner makes of one file's lines: a flat list of blocks, in document order.

A block is a heading (addressable or plain), a node bullet, a Pursuit Focus reference,
a run of prose or fenced code; each names its physical parent heading by index in the
list (-1 is the document). `NodeRun` stands for the `Node` blocks of a run of common node
lines, for the summary pass (`scan_blocks`). Line numbers are 1-based, spans inclusive
line ranges or column ranges as named.
"""

from __future__ import annotations

from typing import NamedTuple

from memsync.validators.edgelists import Edge

Span = tuple[int, int]


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


class NodeRun(NamedTuple):
    """Nodes of consecutive common lines (empty lines between) under one parent, as the
    summary pass takes them (`scan_blocks`): what their `Node` blocks would say, with no
    object per node. Their edge lists are clean (no problem), not yet split into edges."""

    lines: list[int]
    ids: tuple[str, ...]
    lists: tuple[str, ...]
    parent: int
