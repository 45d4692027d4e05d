"""Removing items from a RightMemory tree, keeping it valid (what a prune applies).

`remove_items` computes new file contents from a TreeView and a set of ids; it writes
nothing. Removing a heading removes its whole subtree: its body, child headings and
nodes, the detail file behind an F# heading (recursively, with every F# detail file
inside it) and the evidence file behind an M# or S# heading. Removing a node removes its
line. Then every remaining edge and Focus reference that names a removed id is dropped,
so a tree that validated before still validates after.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Collection

from memsync.validators.assembly import build_graph
from memsync.validators.blocks import FocusRef, Heading, Node
from memsync.validators.edgelists import EDGE_RE
from memsync.validators.graphmodel import MemoryGraph
from memsync.validators.tree import TreeView


def remove_items(tree: TreeView, ids: Collection[str]) -> dict[str, bytes | None]:
    """The new bytes of every file that changes (None: delete the file).

    Raises KeyError for an id that is not an item of the tree's (local) graph.
    """
    if isinstance(ids, str):
        raise TypeError("give a collection of ids, not one string")
    graph, _ = build_graph(tree)
    unknown = sorted(set(ids) - graph.items.keys())
    if unknown:
        raise KeyError(f"no item with id {unknown[0]!r} (of {len(unknown)} unknown)")
    removal = _Removal(graph)
    for item_id in ids:
        removal.remove(item_id)
    return removal.render(tree)


class _Removal:
    def __init__(self, graph: MemoryGraph) -> None:
        self.graph = graph
        self.removed: set[str] = set()
        self.deleted: dict[str, None] = {}
        self.drops: dict[str, list[tuple[int, int]]] = {}
        self.block_lines: dict[str, list[int]] = {}

    def remove(self, item_id: str) -> None:
        items = self.graph.items
        work = [item_id]
        while work:
            current = work.pop()
            if current in self.removed:
                continue
            self.removed.add(current)
            item = items[current]
            if item.kind == "heading":
                self.drop_backing(current, work)
            if item.file in self.deleted:
                continue
            self.drops.setdefault(item.file, []).append((item.line, item.end_line))
            if item.end_line > item.line:
                work += self.items_in(item.file, item.line + 1, item.end_line)

    def drop_backing(self, item_id: str, work: list[str]) -> None:
        item = self.graph.items[item_id]
        detail = self.graph.attached.get((item.file, item.line))
        if detail is not None:
            self.delete(detail, work)
        ref = self.graph.backing.get(item_id)
        if (
            ref is not None
            and ref.kind in ("M#", "S#")
            and (ref.file, ref.line) == (item.file, item.line)
            and ref.exists
        ):
            self.deleted[ref.path] = None

    def delete(self, path: str, work: list[str]) -> None:
        if path in self.deleted:
            return
        self.deleted[path] = None
        length = len(self.graph.documents[path].lines)
        work += self.items_in(path, 1, length)

    def items_in(self, path: str, first: int, last: int) -> list[str]:
        """Ids recorded at blocks of `path` that start within lines `first..last`."""
        doc = self.graph.documents[path]
        lines = self.block_lines.get(path)
        if lines is None:
            lines = self.block_lines[path] = [block.line for block in doc.blocks]
        out: list[str] = []
        items = self.graph.items
        for index in range(bisect_left(lines, first), len(lines)):
            block = doc.blocks[index]
            if block.line > last:
                break
            if isinstance(block, Heading | Node) and block.item_id is not None:
                item = items.get(block.item_id)
                if item is not None and (item.file, item.line) == (path, block.line):
                    out.append(block.item_id)
        return out

    def render(self, tree: TreeView) -> dict[str, bytes | None]:
        out: dict[str, bytes | None] = dict.fromkeys(sorted(self.deleted))
        for path in self.graph.files:
            if path in self.deleted:
                continue
            edited = self.edit(path, tree.content(path).decode("utf-8"))
            if edited is not None:
                out[path] = edited.encode("utf-8")
        return out

    def edit(self, path: str, text: str) -> str | None:
        """The new text of one kept graph file, or None when nothing in it changes."""
        doc = self.graph.documents[path]
        bom = "\ufeff" if text.startswith("\ufeff") else ""
        lines = text.removeprefix("\ufeff").split("\n")
        dropped = bytearray(len(lines) + 1)
        for first, last in self.drops.get(path, ()):
            dropped[first : last + 1] = b"\x01" * (last - first + 1)
        changed = bool(self.drops.get(path))
        for block in doc.blocks:
            if dropped[block.line]:
                continue
            if isinstance(block, FocusRef):
                if block.target in self.removed:
                    dropped[block.line] = 1
                    changed = True
            elif (
                isinstance(block, Heading | Node)
                and block.edge_span is not None
                and any(target in self.removed for _, target in block.edges)
            ):
                lines[block.line - 1] = self.without_removed(lines[block.line - 1], block.edge_span)
                changed = True
        if not changed:
            return None
        # A text ending in a newline splits into a last empty piece that is never dropped,
        # so the trailing newline survives.
        kept = [line for number, line in enumerate(lines, 1) if not dropped[number]]
        return bom + "\n".join(kept)

    def without_removed(self, line: str, span: tuple[int, int]) -> str:
        first, last = span
        kept: list[str] = []
        for raw in line[first:last].split(","):
            token = raw.strip()
            match = EDGE_RE.fullmatch(token)
            if token and (match is None or match[2] not in self.removed):
                kept.append(token)
        return line[:first] + ", ".join(kept) + line[last:]
