"""Properties of the graph parser: generated valid graphs validate clean, and one mutation of
each kind is always caught with its code.

`valid_graphs()` is also used by the editor properties (`test_editor.py`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.assembly import build_graph
from memsync.validators.edgelists import EDGE_TYPES
from memsync.validators.problems import Problem
from memsync.validators.tree import TreeView
from tests.unit.draws import flag, integer, pick

TYPES = sorted(EDGE_TYPES)
PREFIXES = ("n", "Topic.", "x_y-", "A", "Rules.", "v2.")
FENCES = ("", "", "```", "~~~~", "  ```")
ARROWS = (" → ", " -> ", " →", "  -> ")


@dataclass
class GenItem:
    id: str
    heading: bool
    tree: str
    anchor: str | None
    ancestors: tuple[str, ...]  # logical ancestor headings, nearest first
    edges: list[tuple[str, str]] = field(default_factory=list)
    file: str = ""
    line: int = 0


@dataclass
class GenHeading:
    depth: int
    item: GenItem | None  # None: a plain heading
    prose: bool
    fields: bool  # legacy Pursuit fields, with a `**Next:**` block closed by another field
    fence: str  # "" or a fence opener ("```" / "~~~~")
    arrow: str
    nodes: list[GenItem] = field(default_factory=list)
    children: list[GenHeading] = field(default_factory=list)
    detail: GenDoc | None = None


@dataclass
class GenDoc:
    path: str
    tree: str
    nodes: list[GenItem] = field(default_factory=list)
    headings: list[GenHeading] = field(default_factory=list)


@dataclass
class Generated:
    files: dict[str, str]
    items: dict[str, GenItem]
    focus: list[str]

    def tree(self, files: Mapping[str, str] | None = None) -> TreeView:
        return TreeView.from_bytes({p: t.encode() for p, t in (files or self.files).items()})


class _Gen:
    def __init__(self, draw: st.DrawFn) -> None:
        self.draw = draw
        self.count = 0
        self.items: dict[str, GenItem] = {}
        self.evidence: dict[str, str] = {}
        self.budget = integer(draw, 4, 40)

    def new_id(self) -> str:
        self.count += 1
        return f"{pick(self.draw, PREFIXES)}{self.count}"

    def item(
        self, heading: bool, tree: str, anchor: str | None, ancestors: tuple[str, ...]
    ) -> GenItem:
        made = GenItem(self.new_id(), heading, tree, anchor, ancestors)
        self.items[made.id] = made
        self.budget -= 1
        return made

    def nodes(self, tree: str, ancestors: tuple[str, ...]) -> list[GenItem]:
        wanted = integer(self.draw, 0, 3) if self.budget > 0 else 0
        return [self.item(False, tree, None, ancestors) for _ in range(wanted)]

    def document(self, path: str, tree: str, ancestors: tuple[str, ...], top: int) -> GenDoc:
        doc = GenDoc(path, tree, nodes=self.nodes(tree, ancestors))
        depth = integer(self.draw, 1, top)
        for _ in range(integer(self.draw, 0, 3)):
            if self.budget <= 0:
                break
            doc.headings.append(self.heading(depth, tree, ancestors))
        return doc

    def heading(self, depth: int, tree: str, ancestors: tuple[str, ...]) -> GenHeading:
        draw = self.draw
        kinds = ["#", "#", "#", "F#", None]
        if tree == "memory":
            kinds += ["M#", "S#", "MF#", "MQ#"]
        if depth == 4:
            kinds = ["F#", "M#", "S#", "MF#", "MQ#"] if tree == "memory" else ["F#"]
        anchor = pick(draw, kinds)
        item = self.item(True, tree, anchor, ancestors) if anchor else None
        made = GenHeading(
            depth,
            item,
            prose=flag(draw),
            fields=tree == "pursuit" and flag(draw),
            fence=pick(draw, FENCES),
            arrow=pick(draw, ARROWS),
        )
        below = (item.id, *ancestors) if item else ancestors
        if anchor == "F#":
            assert item is not None
            prefix = "MEMORY_" if tree == "memory" else "PURSUIT_"
            made.detail = self.document(f"{prefix}{item.id}.md", tree, below, 3)
        elif anchor in ("M#", "S#"):
            assert item is not None
            prefix = "MEMORY_" if anchor == "M#" else "MEMORY_SKILL_"
            # Evidence is free Markdown: node-like lines in it are not graph items.
            self.evidence[f"{prefix}{item.id}.md"] = "Evidence.\n- `not-an-item` → [dep:x]\n"
        elif depth < 4 and anchor not in ("MF#", "MQ#"):
            made.nodes = self.nodes(tree, below)
            child_depth = depth + 1
            for _ in range(integer(draw, 0, 2)):
                if self.budget <= 0 or child_depth > 4 or (child_depth == 4 and depth != 3):
                    break
                made.children.append(self.heading(child_depth, tree, below))
        return made

    def edges(self) -> None:
        ids = sorted(self.items)
        for item in self.items.values():
            candidates = [i for i in ids if i != item.id]
            if not candidates:
                continue
            drawn = [
                (pick(self.draw, TYPES), pick(self.draw, candidates))
                for _ in range(integer(self.draw, 0, 3))
            ]
            for edge in drawn:
                if edge not in item.edges and not (edge[0] == "rel" and edge[1] in item.ancestors):
                    item.edges.append(edge)


def _edge_list(item: GenItem, arrow: str, optional: bool) -> str:
    if optional and not item.edges:
        return ""
    return f"{arrow}[{', '.join(f'{t}:{x}' for t, x in item.edges)}]"


def _render_node(node: GenItem, lines: list[str], indent: str) -> None:
    node.line = len(lines) + 1
    lines.append(f"{indent}- `{node.id}` remembered fact{_edge_list(node, ' → ', False)}")


def _render_heading(heading: GenHeading, lines: list[str], files: dict[str, str]) -> None:
    marks = "#" * heading.depth
    item = heading.item
    if item is None:
        lines.append(f"{marks} Plain section")
    else:
        item.line = len(lines) + 1
        anchor = f"{{{item.anchor}{item.id}}}"
        lines.append(f"{marks} Title {item.id} {anchor}{_edge_list(item, heading.arrow, True)}")
    if heading.prose:
        lines += ["Some prose about it, with `code` and a {#not-an-anchor}.", ""]
    if heading.fields:
        lines += ["**State:** active", "**Next:**", "- `do` write the thing", "- `b` → []"]
        lines += ["**Done when:** it is written"]
    if heading.fence:
        closing = heading.fence.strip()
        lines += [heading.fence + "md", "# Not a heading {#fenced}", "- `fenced` → [dep:nowhere]"]
        lines += ["````" if closing == "~~~~" else "~~~", closing]
    for index, node in enumerate(heading.nodes):
        _render_node(node, lines, "  " if index % 2 else "")
    for child in heading.children:
        _render_heading(child, lines, files)
    if heading.detail is not None:
        _render_doc(heading.detail, files)


def _render_doc(doc: GenDoc, files: dict[str, str], focus: list[str] | None = None) -> None:
    lines: list[str] = []
    for node in doc.nodes:
        _render_node(node, lines, "")
    if focus is not None:
        lines += ["## Focus", "Current priorities:"]
        lines += [f"- `{target}` because it matters" for target in focus]
    for heading in doc.headings:
        _render_heading(heading, lines, files)
    for item in _doc_items(doc):
        item.file = doc.path
    files[doc.path] = "\n".join(lines) + "\n"


def _doc_items(doc: GenDoc) -> list[GenItem]:
    out = list(doc.nodes)
    stack = list(doc.headings)
    while stack:
        heading = stack.pop()
        out += [heading.item] if heading.item else []
        out += heading.nodes
        stack += heading.children
    return out


@st.composite
def valid_graphs(draw: st.DrawFn) -> Generated:
    gen = _Gen(draw)
    memory = gen.document("MEMORY.md", "memory", (), 3)
    # PURSUITS.md starts with `## Focus`, so its first heading must end that section.
    pursuits = gen.document("PURSUITS.md", "pursuit", (), 2)
    gen.edges()
    headings = sorted(i.id for i in gen.items.values() if i.heading and i.tree == "pursuit")
    focus = draw(st.lists(st.sampled_from(headings), unique=True)) if headings else []
    files: dict[str, str] = dict(gen.evidence)
    _render_doc(memory, files)
    _render_doc(pursuits, files, focus)
    return Generated(files, gen.items, focus)


def _problems(files: Mapping[str, str]) -> list[Problem]:
    return build_graph(TreeView.from_bytes({p: t.encode() for p, t in files.items()}))[1]


@given(valid_graphs())
def test_generated_graphs_validate_clean(generated: Generated) -> None:
    graph, problems = build_graph(generated.tree())
    assert problems == []
    assert set(graph.items) == set(generated.items)
    for item in generated.items.values():
        got = graph.items[item.id]
        assert (got.file, got.line, got.edges) == (item.file, item.line, tuple(item.edges))
        assert got.logical_parent == (item.ancestors[0] if item.ancestors else None)
        assert got.kind == ("heading" if item.heading else "node")
    assert [entry.target for entry in graph.focus] == generated.focus


def _replace_line(files: dict[str, str], path: str, line: int, new: str | None) -> None:
    lines = files[path].split("\n")
    if new is None:
        del lines[line - 1]
    else:
        lines[line - 1] = new
    files[path] = "\n".join(lines)


@given(valid_graphs(), st.data())
def test_deleting_an_edge_target_is_a_dangling_edge(
    generated: Generated, data: st.DataObject
) -> None:
    edges = [
        (item, target)
        for item in generated.items.values()
        for _, target in item.edges
        if target not in item.ancestors  # the source must survive the deletion
    ]
    if not edges:
        return
    _, target_id = data.draw(st.sampled_from(edges))
    target = generated.items[target_id]
    files = dict(generated.files)
    if target.heading:
        line = files[target.file].split("\n")[target.line - 1]
        _replace_line(files, target.file, target.line, line.split(" {")[0])
    else:
        _replace_line(files, target.file, target.line, None)
    assert "dangling-edge" in {p.code for p in _problems(files)}


@given(valid_graphs(), st.data())
def test_duplicating_an_id_is_caught(generated: Generated, data: st.DataObject) -> None:
    if not generated.items:
        return
    item_id = data.draw(st.sampled_from(sorted(generated.items)))
    files = dict(generated.files)
    files["MEMORY.md"] = f"- `{item_id}` the same id again → []\n" + files["MEMORY.md"]
    problems = _problems(files)
    assert "duplicate-id" in {p.code for p in problems}
    [duplicate] = [p for p in problems if p.code == "duplicate-id"]
    assert item_id in duplicate.message


@given(valid_graphs(), st.data())
def test_breaking_an_edge_token_is_a_malformed_edge(
    generated: Generated, data: st.DataObject
) -> None:
    with_edges = sorted(i.id for i in generated.items.values() if i.edges)
    if not with_edges:
        return
    item = generated.items[data.draw(st.sampled_from(with_edges))]
    kind, target = data.draw(st.sampled_from(item.edges))
    files = dict(generated.files)
    line = files[item.file].split("\n")[item.line - 1]
    at = line.rfind(f"{kind}:{target}")
    broken = line[:at] + f"{kind}={target}" + line[at + len(kind) + 1 + len(target) :]
    _replace_line(files, item.file, item.line, broken)
    problems = _problems(files)
    assert {(p.code, p.path, p.line) for p in problems} == {
        ("malformed-edge", item.file, item.line)
    }


@given(valid_graphs(), st.data())
def test_f_files_referencing_each_other_are_a_backing_cycle(
    generated: Generated, data: st.DataObject
) -> None:
    files = dict(generated.files)
    owners = sorted(i.id for i in generated.items.values() if i.anchor == "F#")
    use_existing: bool = data.draw(st.booleans())
    if owners and use_existing:
        owner = generated.items[data.draw(st.sampled_from(owners))]
        prefix = "MEMORY_" if owner.tree == "memory" else "PURSUIT_"
        first = owner.id
    else:
        prefix, first = "MEMORY_", "zz-cycle-a"
        files["MEMORY.md"] += f"# Loop start {{F#{first}}}\n"
        files[f"MEMORY_{first}.md"] = ""
    files[f"{prefix}{first}.md"] += "\n# Onward {F#zz-cycle-b}\n"
    files[f"{prefix}zz-cycle-b.md"] = f"# Back {{F#{first}}}\n"
    problems = _problems(files)
    cycles = [p for p in problems if p.code == "backing-cycle"]
    assert [(p.path, p.line) for p in cycles] == [(f"{prefix}zz-cycle-b.md", 1)]
