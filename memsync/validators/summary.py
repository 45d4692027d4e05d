"""The per-file pass: one document's bytes in, a compact `FileSummary` out.

A summary holds everything the graph rules need from one file that depends only on the
file's bytes, its path and whether it is read as Pursuit: the items it defines (ids, lines,
kinds, the nearest addressable heading above each), the one-file problems with their lines,
each item's own edge problems (kept only if the item turns out to be the first occurrence
of its id), the edges whose verdict needs other files (a target defined elsewhere, or a
`rel` edge whose ancestors may cross files), its Focus references and its MF prose
problems. Nothing here knows the profile, the load order or other files: `crossfile.py`
does that. Because a summary is a function of (bytes, path, pursuit), it can be cached by
content (`cache.py`).

The summary itself is `filesummary.py`'s (a sync that reads stored summaries loads no
parser, issue 18). A summary is compact on purpose: a daemon keeps one per graph file of
every root it syncs. Ids are strings in one tuple (a heading's id is interned: headings are
what other files' edges name most; interning every node id costs a cold validation 3-4% and
saves little), lines and parents are machine-integer arrays, kinds one string with a
character per item; the edge types and targets left for the graph are interned; no per-item
objects or dicts.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from operator import itemgetter
from typing import cast

from memsync.validators.blocks import Block, Fence, FocusRef, Heading, Node, NodeRun, Prose
from memsync.validators.document import Document, decode, scan_blocks
from memsync.validators.edgelists import EDGE_TYPES, Edge
from memsync.validators.filesummary import (
    KIND_CHARS,
    NODE,
    UNDECODABLE,
    FileSummary,
    ItemProblem,
)
from memsync.validators.problems import Problem
from memsync.validators.runedges import Pending, RunLists, expanded, run_edges

# (item index, its well-formed edges, its malformed edge tokens): an item with an edge list.
Edged = tuple[int, Sequence[Edge], tuple[str, ...]]


def summarize_bytes(data: bytes, path: str, *, pursuit: bool) -> FileSummary:
    """The summary of a file's bytes; UNDECODABLE when they are not UTF-8."""
    text = decode(data)
    if text is None:
        return UNDECODABLE
    blocks, problems = scan_blocks(text, path, pursuit=pursuit)
    return summarize_blocks(blocks, problems)


def summarize(doc: Document) -> FileSummary:
    """The summary of one scanned document."""
    return summarize_blocks(doc.blocks, doc.problems)


def summarize_blocks(blocks: Sequence[Block | NodeRun], problems: Sequence[Problem]) -> FileSummary:
    """The summary of one document's blocks (`NodeRun`s or not) and one-file problems."""
    ids: list[str] = []
    lines = array("I")
    parents = array("i")
    kinds: list[str] = []
    specials: list[int] = []
    focus: list[tuple[str, int]] = []
    orphans: list[tuple[int, bool]] = []
    reported: set[int] = set()
    # block -> the item of the nearest addressable heading; nearest[-1] is the document's
    nearest = [-1] * (len(blocks) + 1)
    edged: list[Edged] = []
    runs: list[RunLists] = []
    add_id, add_line, add_parent, add_kind = ids.append, lines.append, parents.append, kinds.append
    for index, block in enumerate(blocks):
        cls = type(block)
        if cls is Node:  # the common block: unpacked, not looked up field by field
            line, item_id, edges, bad, _span, parent = block  # type: ignore[misc]
            if edges or bad:
                edged.append((len(ids), edges, bad))
            add_id(item_id)
            add_line(line)
            add_parent(nearest[parent] if parent >= 0 else -1)
            add_kind(NODE)
        elif cls is NodeRun:
            run: NodeRun = block  # type: ignore[assignment]
            _add_run(run, nearest[run.parent], (ids, lines, parents, kinds), runs)
        elif cls is Heading:
            heading: Heading = block  # type: ignore[assignment]
            up = nearest[heading.parent] if heading.parent >= 0 else -1
            if heading.item_id is not None and heading.kind is not None:
                item = len(ids)
                add_id(sys.intern(heading.item_id))
                add_line(heading.line)
                add_parent(up)
                add_kind(KIND_CHARS[heading.kind])
                if heading.kind != "#":
                    specials.append(item)
                if heading.edges or heading.bad_edges:
                    edged.append((item, heading.edges, heading.bad_edges))
                nearest[index] = item
            else:
                nearest[index] = up
        elif cls is FocusRef:
            ref: FocusRef = block  # type: ignore[assignment]
            focus.append((sys.intern(ref.target), ref.line))
        elif (text := cast(Prose | Fence, block)).parent not in reported:
            owner = blocks[text.parent] if text.parent >= 0 else None
            if not (isinstance(owner, Heading) and owner.item_id is not None):
                reported.add(text.parent)
                orphans.append((text.line, owner is None))
    pending, item_problems = _edges(ids, edged, runs)
    return FileSummary(
        ids=tuple(ids),
        lines=lines,
        parents=parents,
        kinds="".join(kinds),
        specials=tuple(specials),
        pending=pending,
        item_problems=item_problems,
        problems=tuple((p.code, p.line or 0, p.message) for p in problems),
        orphans=tuple(orphans),
        focus=tuple(focus),
    )


def _add_run(
    run: NodeRun,
    parent: int,  # its nearest addressable heading's item, or -1
    items: tuple[list[str], array[int], array[int], list[str]],
    runs: list[RunLists],
) -> None:
    """Add the items of a run of nodes (ids, lines, parents, kinds), and its edge lists
    (clean ones: no malformed token), which `run_edges` reads all at once."""
    ids, lines, parents, kinds = items
    base = len(ids)
    ids += run.ids
    lines.extend(run.lines)
    parents.extend(array("i", (parent,)) * len(run.ids))
    kinds.append(NODE * len(run.ids))
    runs.append((base, run.lists))


def _edges(
    ids: list[str], edged: list[Edged], runs: list[RunLists]
) -> tuple[tuple[Pending, ...], tuple[ItemProblem, ...]]:
    """Each item's edge problems that one file decides (rules 25-28, in edges.py's order:
    malformed, duplicate, self, unknown type) and the edges left for the graph to judge.
    The runs' edges are read all at once (`run_edges`) unless one of them needs a word."""
    if not edged and not runs:
        return (), ()
    local = set(ids)
    from_runs = run_edges(ids, local, runs) if runs else []
    if from_runs is None:  # item by item, in item order (each item is in one of the two)
        edged = sorted([*edged, *expanded(runs)], key=itemgetter(0))
        from_runs = []
    intern = sys.intern
    types = EDGE_TYPES
    pending: list[Pending] = []
    found: list[ItemProblem] = []
    for item, edges, bad in edged:
        item_id = ids[item]
        if bad:
            found += [
                (
                    item,
                    "malformed-edge",
                    f"edge `{token}` of `{item_id}` is not of the form type:id",
                )
                for token in bad
            ]
        # No edge twice (the usual case): no need to remember which were seen.
        count = len(edges)
        twice = count > 1 and (edges[0] == edges[1] if count == 2 else len(set(edges)) < count)
        seen: set[Edge] | None = set() if twice else None
        for edge in edges:
            kind, target = edge
            if seen is not None and edge in seen:
                found.append(
                    (item, "duplicate-edge", f"`{item_id}` lists edge `{kind}:{target}` twice")
                )
            elif target == item_id:
                found.append(
                    (item, "self-edge", f"`{item_id}` has an edge `{kind}:{target}` to itself")
                )
            elif kind not in types:
                known = ", ".join(sorted(EDGE_TYPES))
                message = f"edge type `{kind}` of `{item_id}` is unknown; use one of {known}"
                found.append((item, "unknown-edge-type", message))
            elif kind == "rel" or target not in local:
                # A target defined in this file is an item whichever occurrence is kept.
                pending.append((item, intern(kind), intern(target)))
            if seen is not None:
                seen.add(edge)
    if from_runs:
        pending = sorted([*pending, *from_runs], key=itemgetter(0)) if pending else from_runs
    return tuple(pending), tuple(found)
