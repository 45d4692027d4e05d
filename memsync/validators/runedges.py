"""The edges of a file's runs of common node lines, read all at once (the summary pass).

A run's edge lists are clean (`document`'s fast path: `type:id` tokens, commas, blanks);
most hold one or two edges. One `findall` over all of a file's lists splits each into its
first edge, its second and the rest, one row per list, so the columns line up with the
items. The one-file edge rules (no edge twice, no edge to itself, a known type) are then
checked column by column with no Python-level step per item, and the edges left for the
graph (a target defined in another file, or `rel`) are picked the same way. A file with
anything else (a third edge, a repeated target, an unknown type, an edge to itself) is
left to the item-by-item pass in `summary._edges`, which names the problem. Both give the
same answer: `tests/unit/test_document_fastpath.py` compares the summaries.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from itertools import chain, compress
from operator import eq, itemgetter, or_

from memsync.lazypattern import lazy
from memsync.validators.edgelists import EDGE_RE, EDGE_TYPES, Edge

# (the first item of a run, each item's clean edge-list text, "" for none)
RunLists = tuple[int, Sequence[str]]
# (item index, edge type, target): an edge whose verdict needs the whole graph.
Pending = tuple[int, str, str]

_T = r"[A-Za-z][A-Za-z0-9_-]*+"
_I = r"[A-Za-z0-9_.-]++"
# One clean, non-empty list per line: its first edge, its second, what follows a second comma.
_CELLS = lazy(
    rf"^[ \t]*+({_T}):[ \t]*+({_I})(?:[ \t]*+,[ \t]*+({_T}):[ \t]*+({_I}))?"
    rf"(?:[ \t]*+,(.*))?[ \t]*+$",
    re.MULTILINE,
)


def run_edges(
    ids: Sequence[str], local: set[str], runs: Sequence[RunLists]
) -> list[Pending] | None:
    """The pending edges of the runs' items, by item then edge; None when some edge needs
    the item-by-item pass."""
    lists: list[str] = []
    items: list[int] = []
    for base, texts in runs:
        lists += texts
        items += range(base, base + len(texts))
    if "" in lists:  # items with an empty list have no edge
        kept = list(map(bool, lists))
        lists, items = list(compress(lists, kept)), list(compress(items, kept))
        if not lists:
            return []
    cells = _CELLS.findall("\n".join(lists))
    if len(cells) != len(lists):
        return None  # not one clean list per line: never for a run's lists
    kinds1, targets1, kinds2, targets2, rests = zip(*cells, strict=True)
    if any(rests):
        return None  # a third edge
    named = {*kinds1, *kinds2}
    named.discard("")
    if not named <= EDGE_TYPES:
        return None
    owners = list(map(ids.__getitem__, items))
    if any(map(eq, targets1, owners)) or any(map(eq, targets2, owners)):
        return None  # an edge to itself
    if any(map(eq, targets1, targets2)):
        return None  # perhaps an edge twice
    far = {*targets1, *targets2}.difference(local)
    far.discard("")
    rel = "rel" in named
    if not far and not rel:
        return []
    first = map(far.__contains__, targets1)
    second = map(far.__contains__, targets2)
    if rel:
        first = map(or_, first, map("rel".__eq__, kinds1))
        second = map(or_, second, map("rel".__eq__, kinds2))
    picked = chain(
        compress(zip(items, kinds1, targets1, strict=True), first),
        compress(zip(items, kinds2, targets2, strict=True), second),
    )
    intern = sys.intern
    # Stable: an item's first edge, listed before its second, stays before it.
    return sorted(
        ((item, intern(kind), intern(target)) for item, kind, target in picked),
        key=itemgetter(0),
    )


def expanded(runs: Sequence[RunLists]) -> list[tuple[int, list[Edge], tuple[str, ...]]]:
    """Each item of the runs with an edge list, with its edges: the item-by-item form."""
    findall = EDGE_RE.findall
    return [
        (base + at, findall(text), ())
        for base, texts in runs
        for at, text in enumerate(texts)
        if text
    ]
