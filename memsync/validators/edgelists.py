"""The edge-list grammar: the `[type:id, ...]` a heading's anchor or a node's arrow carries.

An edge is `(type, target)`; an id is `[A-Za-z0-9_.-]+`, a type starts with a letter. A
list is split on commas; empty tokens are ignored, a token that is not `type:id` is kept
as bad (its block carries it; `edges.py` reports it). The known edge types are
`EDGE_TYPES`; what an edge may point at is the cross-file pass's (`edges.py`). The
pattern strings are shared with the node-line grammar (`nodelines.py`), whose fast path
reads clean lists in one pass.
"""

from __future__ import annotations

from memsync.lazypattern import lazy

EDGE_TYPES = frozenset(
    {"dep", "emb", "bak", "agg", "ver", "ext", "up", "rel", "loc", "run", "cfg", "out"}
    | {"in", "doc", "todo"}
)

ID = r"[A-Za-z0-9_.-]+"
ID_RE = lazy(ID)
_TYPE = r"[A-Za-z][A-Za-z0-9_-]*"
EDGE_RE = lazy(rf"({_TYPE}):[ \t]*({ID})")
# A whole list of well-formed tokens (the common case), read with one findall.
_CLEAN_LIST = lazy(rf"[ \t]*{_TYPE}:[ \t]*{ID}(?:[ \t]*,[ \t]*{_TYPE}:[ \t]*{ID})*[ \t]*")
# The same, possessive (no token can give back a character the next one needs): the fast
# path's pattern, which runs over every common line, does not keep backtracking points.
ID_P = r"[A-Za-z0-9_.-]++"
_TYPE_P = r"[A-Za-z][A-Za-z0-9_-]*+"
CLEAN_P = rf"(?:[ \t]*+{_TYPE_P}:[ \t]*+{ID_P}(?:[ \t]*+,[ \t]*+{_TYPE_P}:[ \t]*+{ID_P})*+[ \t]*+)?"

Edge = tuple[str, str]


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
