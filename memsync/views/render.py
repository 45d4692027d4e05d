"""The extractive render: a provider root and a recipe in, the view's `dist/` files out.

This module owns the projection of reference §2.7 (shared views): the provider's local
graph (which must have no problems) is cut down to what the recipe selects, line by line,
so that every kept line is a line of the source and every kept item sits at its original
place. Included headings bring their whole subtree (across F# detail files), included
nodes their own line, included files their whole document (with the F# owner heading as
context); logical ancestors of anything kept are emitted as heading lines only. Excluded
ids, MF#/MQ# headings and managed example blocks cut whole subtrees.

The result must pass the MF profile, so the render also drops what an imported package may
not hold: edges to items outside the package, prose and fences that do not sit under an
addressable heading, and plain headings with nothing addressable below them. F# detail
files are rendered the same way; M# and S# backing files are copied byte for byte.

Pure and deterministic: the same tree and recipe give the same bytes (LF line endings, one
trailing newline), in one pass over the blocks of each file.
"""

from __future__ import annotations

from collections.abc import Sequence

from memsync.errors import ProblemError, require
from memsync.validators.assembly import build_graph
from memsync.validators.blocks import Block, Fence, Heading, Node, Prose
from memsync.validators.document import Document
from memsync.validators.edgelists import EDGE_RE
from memsync.validators.graphmodel import MemoryGraph
from memsync.validators.paths import check_utf8
from memsync.validators.problems import Problem
from memsync.validators.profile import MEMORY
from memsync.validators.tree import TreeView
from memsync.views.recipe import Recipe

ROOT = "MEMORY.md"
DIST = "dist/"
EXAMPLE_START = "<!-- rightmemory:example:start -->"
EXAMPLE_END = "<!-- rightmemory:example:end -->"
DROPPED_KINDS = frozenset({"MF#", "MQ#"})  # an import cannot re-share a live connection
_SHOWN = 3  # how many problems the message of a RenderError spells out


class RenderError(ProblemError):
    """The view cannot be rendered: the root's graph or the recipe has problems, or the
    selection leaves nothing addressable. `problems` lists every one."""

    exit_code = 1

    def __init__(self, message: str, problems: Sequence[Problem], *, hint: str) -> None:
        shown = "; ".join(p.message for p in problems[:_SHOWN])
        more = f" (and {len(problems) - _SHOWN} more)" if len(problems) > _SHOWN else ""
        super().__init__(f"{message}: {shown}{more}", problems, hint=hint)


def render_dist(tree: TreeView, recipe: Recipe) -> dict[str, bytes]:
    """The `dist/` files of `recipe`'s extractive view of `tree`, by path, sorted.

    Raises RenderError when the tree's local graph has problems, when the recipe names an
    id or file that is not part of Memory, or when nothing addressable is left.
    """
    graph, problems = build_graph(tree)
    if problems:
        raise RenderError(
            f"the memory graph has {len(problems)} problem(s)",
            problems,
            hint="run `memsync validate` on the root, fix what it reports, then render again",
        )
    problems = _unreadable(graph, tree)
    if problems:
        raise RenderError(
            "a Memory file of the root is not UTF-8",
            problems,
            hint="fix the file's encoding, then render again",
        )
    problems = _check_recipe(graph, recipe)
    if problems:
        raise RenderError(
            f"recipe of view {recipe.view_id} names what cannot be shared",
            problems,
            hint="list only Memory headings, nodes and graph files in the recipe",
        )
    return _Projection(graph, recipe).render(tree)


def _unreadable(graph: MemoryGraph, tree: TreeView) -> list[Problem]:
    """Memory graph files the graph skipped because they are not UTF-8 (the path rules,
    not the graph, report those; a render cannot go on without them)."""
    paths = [] if ROOT in graph.documents else [ROOT]
    paths += [
        ref.path
        for ref in graph.backing.values()
        if ref.kind == "F#"
        and ref.exists
        and ref.path not in graph.documents
        and graph.items[ref.id].tree == MEMORY
    ]
    problems = [check_utf8(path, tree.content(path)) for path in paths]
    return sorted(p for p in problems if p is not None)


def _check_recipe(graph: MemoryGraph, recipe: Recipe) -> list[Problem]:
    """Every recipe entry that is not a Memory item (of the right kind) or graph file."""
    where = f"shared_views/{recipe.view_id}/recipe.toml"
    out: list[Problem] = []

    def bad(code: str, message: str) -> None:
        out.append(Problem(code, where, None, message))

    lists = (
        ("include_headings", recipe.include_headings, "heading"),
        ("include_nodes", recipe.include_nodes, "node"),
        ("exclude_ids", recipe.exclude_ids, None),
    )
    for key, ids, kind in lists:
        for item_id in ids:
            item = graph.items.get(item_id)
            if item is None:
                bad("recipe-unknown-id", f"{key}: `{item_id}` is no item of the memory graph")
            elif item.tree != MEMORY:
                bad("recipe-pursuit-id", f"{key}: `{item_id}` is a Pursuit item, not Memory")
            elif kind is not None and item.kind != kind:
                bad(
                    "recipe-wrong-kind",
                    f"{key}: `{item_id}` is a {item.kind}; list it under include_{item.kind}s",
                )
    for path in recipe.include_files:
        doc = graph.documents.get(path)
        if doc is None and path in graph.evidence_files:
            bad("recipe-not-graph-file", f"include_files: '{path}' is an M# or S# backing file")
        elif doc is None:
            bad("recipe-not-graph-file", f"include_files: '{path}' is no graph file of the root")
        elif doc.pursuit:
            bad("recipe-pursuit-file", f"include_files: '{path}' is a Pursuit file, not Memory")
    return out


def _addressable(block: Block) -> bool:
    return isinstance(block, Heading) and block.kind is not None and block.item_id is not None


def _item_id(block: Block) -> str | None:
    """The id of an item's block (a node or an addressable heading), else None."""
    if isinstance(block, Node) or (isinstance(block, Heading) and block.kind is not None):
        return block.item_id
    return None


def _last_line(block: Block) -> int:
    return block.end_line if isinstance(block, Prose | Fence) else block.line


def _example_lines(doc: Document) -> bytearray:
    """Flags (by line number) of the lines inside managed example blocks, markers included.

    Markers count only in prose (never inside fenced code); a start marker may end a line of
    text, as in the installer's template, and the whole line goes. An unclosed block runs to
    the end of the file.
    """
    region = bytearray(len(doc.lines) + 1)
    inside = False
    for block in doc.blocks:
        if isinstance(block, Prose):
            for number in range(block.line, block.end_line + 1):
                text = doc.lines[number - 1]
                inside = inside or EXAMPLE_START in text
                if inside or EXAMPLE_END in text:
                    region[number] = 1
                    inside = inside and EXAMPLE_END not in text
        elif inside:
            last = _last_line(block)
            region[block.line : last + 1] = b"\x01" * (last - block.line + 1)
    return region


class _File:
    """Per-block decisions for one Memory graph file."""

    __slots__ = ("cut", "doc", "doc_cut", "full", "keep", "region")

    def __init__(self, doc: Document, doc_cut: bool) -> None:
        count = len(doc.blocks)
        self.doc = doc
        self.doc_cut = doc_cut  # the owning F# heading is cut
        self.region = _example_lines(doc)
        self.cut = bytearray(count)  # inside an excluded, MF#/MQ# or example subtree
        self.full = bytearray(count)  # inside an included heading or file
        self.keep = bytearray(count)  # emitted


class _Projection:
    def __init__(self, graph: MemoryGraph, recipe: Recipe) -> None:
        self.graph = graph
        self.recipe = recipe
        self.files: dict[str, _File] = {}
        self.where: dict[str, tuple[_File, int]] = {}  # item id -> its block
        self.owner: dict[str, str] = {}  # detail file -> its F# heading's id
        self.shown: set[str] = set()  # ids of emitted items

    def render(self, tree: TreeView) -> dict[str, bytes]:
        self.mark()
        self.select()
        if not self.shown:
            empty = Problem(
                "view-empty", DIST + ROOT, None, "the selection leaves nothing addressable"
            )
            raise RenderError(
                f"view {self.recipe.view_id} renders an empty MEMORY.md",
                [empty],
                hint="select at least one Memory item that is not excluded",
            )
        out: dict[str, bytes] = {DIST + ROOT: self.text(self.files[ROOT])}
        for item_id in sorted(self.shown):
            ref = self.graph.backing.get(item_id)
            if ref is None:
                continue
            if ref.kind == "F#":
                out[DIST + ref.path] = self.text(self.files[ref.path])
            else:
                data = tree.content(ref.path)
                problem = check_utf8(ref.path, data)
                if problem is not None:
                    raise RenderError(
                        "a backing file is not UTF-8", [problem], hint="fix its encoding"
                    )
                out[DIST + ref.path] = data
        return dict(sorted(out.items()))

    def mark(self) -> None:
        """Cut and full flags, top down: each file after the F# heading that owns it."""
        exclude = set(self.recipe.exclude_ids)
        headings = set(self.recipe.include_headings)
        included_files = set(self.recipe.include_files)
        inherited: dict[str, tuple[bool, bool]] = {ROOT: (False, ROOT in included_files)}
        for path in self.graph.files:
            doc = self.graph.documents[path]
            if doc.pursuit or path not in inherited:
                continue
            doc_cut, doc_full = inherited[path]
            state = self.files[path] = _File(doc, doc_cut)
            for index, block in enumerate(doc.blocks):
                parent = block.parent
                cut = bool(state.cut[parent]) if parent >= 0 else doc_cut
                full = bool(state.full[parent]) if parent >= 0 else doc_full
                item_id = _item_id(block)
                if item_id is not None:
                    self.where[item_id] = (state, index)
                    cut = cut or item_id in exclude
                    full = full or item_id in headings
                if isinstance(block, Heading | Node):
                    cut = cut or bool(state.region[block.line])
                if isinstance(block, Heading) and block.kind in DROPPED_KINDS:
                    cut = True
                state.cut[index], state.full[index] = cut, full
                if isinstance(block, Heading) and block.kind == "F#" and item_id is not None:
                    detail = require(self.graph.attached.get((path, block.line)), path)
                    self.owner[detail] = item_id
                    inherited[detail] = (cut, full or detail in included_files)

    def select(self) -> None:
        """Which blocks are emitted: selections, their ancestors, and what MF allows."""
        nodes = set(self.recipe.include_nodes)
        for state in self.files.values():
            for index, block in enumerate(state.doc.blocks):
                item_id = _item_id(block)
                selected = state.full[index] or item_id in nodes
                if item_id is not None and selected and not state.cut[index]:
                    self.show(item_id)
        for path in self.recipe.include_files:
            owner = self.owner.get(path)
            if owner is not None and not self.files[path].doc_cut:
                self.show(owner)
        for state in self.files.values():
            self.keep_structure(state)

    def show(self, item_id: str | None) -> None:
        """Emit an item and its logical ancestors, up to the first one already emitted."""
        items = self.graph.items
        while item_id is not None and item_id not in self.shown:
            self.shown.add(item_id)
            state, index = self.where[item_id]
            state.keep[index] = 1
            item_id = items[item_id].logical_parent

    def keep_structure(self, state: _File) -> None:
        """Plain headings over something emitted, and prose under emitted full headings."""
        blocks = state.doc.blocks
        below = bytearray(state.keep)  # something addressable is emitted at or below
        for index in range(len(blocks) - 1, -1, -1):
            block = blocks[index]
            if below[index] and block.parent >= 0:
                below[block.parent] = 1
            if isinstance(block, Heading) and not _addressable(block):
                state.keep[index] = below[index] and not state.cut[index]
            elif isinstance(block, Prose | Fence):
                parent = block.parent
                owned = parent >= 0 and _addressable(blocks[parent])
                state.keep[index] = owned and state.full[index] and not state.cut[index]
                if isinstance(block, Fence) and state.region[block.line]:
                    state.keep[index] = 0

    def text(self, state: _File) -> bytes:
        """The emitted lines of one file, blank runs outside fences collapsed."""
        doc = state.doc
        lines = doc.lines
        blocks = doc.blocks
        out: list[tuple[str, bool]] = []  # (line, opaque)
        for index, block in enumerate(blocks):
            if not state.keep[index]:
                continue
            last = _last_line(block)
            if isinstance(block, Heading | Node):
                out.append((self.edges(lines[block.line - 1], block), False))
            elif isinstance(block, Fence):
                out += [(line, True) for line in lines[block.line - 1 : last]]
            else:
                out += [
                    (lines[n - 1] if lines[n - 1].strip() else "", False)
                    for n in range(block.line, last + 1)
                    if not state.region[n]
                ]
            following = blocks[index + 1].line if index + 1 < len(blocks) else len(lines) + 1
            if following > last + 1:
                out.append(("", False))
        kept: list[str] = []
        blank = True  # drops leading blank lines too
        for line, opaque in out:
            if not opaque and not line:
                if blank:
                    continue
                blank = True
            else:
                blank = False
            kept.append(line)
        while kept and not kept[-1].strip():
            kept.pop()
        return ("\n".join(kept) + "\n").encode("utf-8") if kept else b""

    def edges(self, line: str, block: Heading | Node) -> str:
        """The line with edges to items outside the package removed (`→ []` may remain)."""
        if block.edge_span is None or all(t in self.shown for _, t in block.edges):
            return line
        first, last = block.edge_span
        kept: list[str] = []
        for raw in line[first:last].split(","):
            match = EDGE_RE.fullmatch(raw.strip())
            if match is not None and match[2] in self.shown:
                kept.append(raw.strip())
        return line[:first] + ", ".join(kept) + line[last:]
