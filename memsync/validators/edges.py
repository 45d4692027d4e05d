"""Edge and Focus rules (reference §2.2, rules 25-33), checked once every file is loaded.

Each edge gets at most one problem, the first that applies in this order: malformed,
duplicate, self, unknown type, dangling, containment. Only parsed graph items count as
targets: ids inside M# or S# files, or inside imported MF packages, are not graph items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from memsync.validators.edgelists import EDGE_TYPES
from memsync.validators.graphmodel import FocusEntry, Item
from memsync.validators.problems import Problem
from memsync.validators.profile import PURSUIT


def check_edges(
    items: Mapping[str, Item], bad_tokens: Mapping[str, tuple[str, ...]], namespace: str
) -> list[Problem]:
    """Problems of every edge of every item; `bad_tokens` are the unparseable tokens."""
    out: list[Problem] = []
    for item_id, tokens in bad_tokens.items():
        item = items[item_id]
        out += [
            Problem(
                "malformed-edge",
                item.file,
                item.line,
                f"edge `{token}` of `{item_id}` is not of the form type:id",
            )
            for token in tokens
        ]
    for item in items.values():
        if item.edges:
            out += _item_edges(items, item, namespace)
    return out


def _item_edges(items: Mapping[str, Item], item: Item, namespace: str) -> list[Problem]:
    out: list[Problem] = []
    edges = item.edges
    seen: set[tuple[str, str]] | None = set() if len(edges) > 1 else None
    for edge in edges:
        kind, target = edge
        code = ""
        if seen is not None and edge in seen:
            code, message = "duplicate-edge", f"`{item.id}` lists edge `{kind}:{target}` twice"
        elif target == item.id:
            code, message = "self-edge", f"`{item.id}` has an edge `{kind}:{target}` to itself"
        elif kind not in EDGE_TYPES:
            code = "unknown-edge-type"
            known = ", ".join(sorted(EDGE_TYPES))
            message = f"edge type `{kind}` of `{item.id}` is unknown; use one of {known}"
        elif target not in items:
            code = "dangling-edge"
            message = f"edge `{kind}:{target}` of `{item.id}` names no item in {namespace}"
        elif kind == "rel" and _is_ancestor(items, item, target):
            code = "containment-edge"
            message = (
                f"`rel:{target}` of `{item.id}` points at a heading it is already nested "
                "under; remove the edge, the nesting says it"
            )
        if seen is not None:
            seen.add(edge)
        if code:
            out.append(Problem(code, item.file, item.line, message))
    return out


def _is_ancestor(items: Mapping[str, Item], item: Item, target: str) -> bool:
    current = item.logical_parent
    while current is not None:
        if current == target:
            return True
        current = items[current].logical_parent
    return False


def check_focus(entries: Iterable[FocusEntry], items: Mapping[str, Item]) -> list[Problem]:
    """Duplicate, dangling and non-heading Focus references, in document order."""
    out: list[Problem] = []
    seen: set[str] = set()
    for target, file, line in entries:
        item = items.get(target)
        if target in seen:
            out.append(
                Problem("duplicate-focus", file, line, f"Focus lists `{target}` more than once")
            )
            continue
        seen.add(target)
        if item is None:
            out.append(
                Problem("dangling-focus", file, line, f"Focus names `{target}`, which is no item")
            )
        elif item.kind != "heading" or item.tree != PURSUIT:
            where = "a node" if item.kind == "node" else "a Memory heading"
            out.append(
                Problem(
                    "focus-not-heading",
                    file,
                    line,
                    f"Focus must name Pursuit headings; `{target}` is {where}",
                )
            )
    return out
