"""Cross-file assembly: from the root documents through F# backing files to one graph.

This module owns the rules that need more than one file (reference §2.1): root documents,
anchor kinds per profile and tree, the reserved Pursuit id, one case-sensitive id namespace
(first occurrence wins), backing files (case-insensitive claims, existence, cycles, a
detail file with two owners), MF prose placement, physical and logical parents, and
content hashes. Files are loaded depth first in the reference's order (a document, then
its F# detail files in document order), iteratively, so a long F# chain cannot overflow
the Python stack. It reads only through the TreeView and is linear in the input.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterator
from types import MappingProxyType

from memsync.validators.blocks import FocusRef, Heading, Node
from memsync.validators.document import Document, decode, scan
from memsync.validators.edges import check_edges, check_focus
from memsync.validators.gcpause import gc_paused
from memsync.validators.graphmodel import BackingRef, FocusEntry, Item, MemoryGraph
from memsync.validators.problems import Problem
from memsync.validators.profile import PURSUIT, Profile
from memsync.validators.tree import TreeView, describe

# An F# reference to follow: target file, owner heading's first and last line, owner scope.
_Ref = tuple[str, int, int, str | None]


def build_graph(
    tree: TreeView,
    profile: str = "local",
    *,
    root_path: str | None = None,
    namespace: str | None = None,
) -> tuple[MemoryGraph, list[Problem]]:
    """The graph of `tree` and every rule 1-33 problem, sorted by (path, line, code)."""
    builder = _Builder(tree, Profile.named(profile, root_path, namespace))
    with gc_paused():
        return builder.build()


class _Builder:
    def __init__(self, tree: TreeView, profile: Profile) -> None:
        self.tree = tree
        self.profile = profile
        self.problems: list[Problem] = []
        self.items: dict[str, Item] = {}
        self.bad: dict[str, tuple[str, ...]] = {}
        self.headings: list[tuple[str, str, int, int]] = []  # id, file, line, end line
        self.docs: dict[str, Document] = {}
        self.files: list[str] = []
        self.evidence: dict[str, None] = {}
        self.backing: dict[str, BackingRef] = {}
        self.claims: dict[str, BackingRef] = {}
        self.attached: dict[tuple[str, int], str] = {}
        self.owner_of: dict[str, tuple[str, int]] = {}
        self.owned: dict[str, list[tuple[int, int, str]]] = {}  # file -> owner spans
        self.focus: list[FocusEntry] = []

    def problem(self, code: str, path: str, line: int | None, message: str) -> None:
        self.problems.append(Problem(code, path, line, message))

    def build(self) -> tuple[MemoryGraph, list[Problem]]:
        import hashlib  # noqa: PLC0415 - OpenSSL's load: a graph built, not a sync's validation

        for path, tree in self.profile.roots:
            entry = self.tree.get(path)
            if entry is None:
                what = "MF Memory document" if self.profile.name == "mf" else "root document"
                self.problem("missing-root-document", path, None, f"{what} '{path}' is missing")
            elif not entry.is_regular:
                self.problem(
                    "missing-root-document",
                    path,
                    None,
                    f"'{path}' is not a regular file (it is {describe(entry)})",
                )
            else:
                self.load(path, tree)
        for item_id, path, line, end_line in self.headings:
            digest = hashlib.sha256(self.logical_text(path, line, end_line).encode())
            self.items[item_id] = self.items[item_id]._replace(content_hash=digest.hexdigest())
        self.problems += check_edges(self.items, self.bad, self.profile.namespace)
        self.problems += check_focus(self.focus, self.items)
        self.problems.sort(key=lambda p: (p.path or "", p.line or 0, p.code, p.message))
        graph = MemoryGraph(
            profile=self.profile.name,
            namespace=self.profile.namespace,
            items=MappingProxyType(self.items),
            files=tuple(self.files),
            evidence_files=tuple(self.evidence),
            backing=MappingProxyType(self.backing),
            focus=tuple(self.focus),
            documents=MappingProxyType(self.docs),
            attached=MappingProxyType(self.attached),
        )
        return graph, self.problems

    def read(self, path: str, tree: str) -> Document | None:
        text = decode(self.tree.content(path))
        if text is None:
            return None  # the path rules report `not-utf8`; the graph skips the file
        doc = scan(text, path, pursuit=tree == PURSUIT)
        self.docs[path] = doc
        self.files.append(path)
        self.problems += doc.problems
        return doc

    def load(self, root: str, tree: str) -> None:
        """Load a root document and, depth first, every F# detail file behind it."""
        doc = self.read(root, tree)
        if doc is None:
            return
        stack: list[tuple[str, Iterator[_Ref]]] = [(root, iter(self.record(doc, tree, None)))]
        on_path = {root}
        while stack:
            path, refs = stack[-1]
            ref = next(refs, None)
            if ref is None:
                stack.pop()
                on_path.discard(path)
                continue
            target, line, end_line, scope = ref
            owner = self.owner_of.get(target)
            if target in on_path:
                self.problem(
                    "backing-cycle",
                    path,
                    line,
                    f"F# backing file '{target}' is already being loaded above this heading "
                    "(the F# references form a cycle)",
                )
            elif owner is not None:
                self.problem(
                    "backing-multi-owner",
                    path,
                    line,
                    f"detail file '{target}' is already attached to the F# heading at "
                    f"{owner[0]}:{owner[1]}",
                )
            elif target not in self.docs:
                detail = self.read(target, tree)
                if detail is not None:
                    self.attached[(path, line)] = target
                    self.owner_of[target] = (path, line)
                    self.owned.setdefault(path, []).append((line, end_line, target))
                    stack.append((target, iter(self.record(detail, tree, scope))))
                    on_path.add(target)

    def record(self, doc: Document, tree: str, anchor: str | None) -> list[_Ref]:
        """Record a document's items, kinds, backing claims and Focus; its F# references."""
        import hashlib  # noqa: PLC0415 - loaded by `build`

        blocks = doc.blocks
        path = doc.path
        physical: list[str | None] = [None] * len(blocks)
        logical: list[str | None] = [None] * len(blocks)
        refs: list[_Ref] = []
        orphan_parents: set[int] = set()
        for index, block in enumerate(blocks):
            if isinstance(block, Node):
                if block.item_id in self.items:
                    self.duplicate(block.item_id, path, block.line)
                    continue
                parent = block.parent
                self.items[block.item_id] = Item(
                    block.item_id, "node", None, path, block.line, block.line,
                    physical[parent] if parent >= 0 else None,
                    logical[parent] if parent >= 0 else anchor,
                    block.edges,
                    hashlib.sha256(doc.lines[block.line - 1].encode()).hexdigest(),
                    tree,
                )  # fmt: skip
                if block.bad_edges:
                    self.bad[block.item_id] = block.bad_edges
            elif isinstance(block, Heading):
                parent = block.parent
                up = physical[parent] if parent >= 0 else None
                logical_up = logical[parent] if parent >= 0 else anchor
                own: str | None = None
                if block.item_id is not None and block.kind is not None:
                    if block.item_id in self.items:
                        self.duplicate(block.item_id, path, block.line)
                    else:
                        own = block.item_id
                        self.items[own] = Item(
                            own, "heading", block.kind, path, block.line, block.end_line,
                            up, logical_up, block.edges, "", tree,
                        )  # fmt: skip
                        self.headings.append((own, path, block.line, block.end_line))
                        if block.bad_edges:
                            self.bad[own] = block.bad_edges
                    target = self.check_kind(path, block, tree)
                    if target is not None:
                        refs.append((target, block.line, block.end_line, own or logical_up))
                physical[index] = own or up
                logical[index] = own or logical_up
            elif isinstance(block, FocusRef):
                if self.profile.focus:
                    self.focus.append(FocusEntry(block.target, path, block.line))
            elif self.profile.addressed_prose:
                self.check_prose(doc, block.line, block.parent, orphan_parents)
        self.tree.preload(ref[0] for ref in refs)
        return refs

    def duplicate(self, item_id: str, path: str, line: int) -> None:
        first = self.items[item_id]
        self.problem(
            "duplicate-id",
            path,
            line,
            f"id `{item_id}` is already used at {first.file}:{first.line}; "
            "that first occurrence is the one kept",
        )

    def check_kind(self, path: str, block: Heading, tree: str) -> str | None:
        """Kind rules for an addressable heading; the F# detail file to load, if any."""
        kind, item_id = block.kind or "", block.item_id or ""
        line = block.line
        refused = self.profile.kind_problem(tree, kind, item_id)
        if refused is not None:
            self.problem(refused[0], path, line, refused[1])
            return None
        backing_path = self.profile.backing_path(tree, kind, item_id)
        if backing_path is None:
            return None
        return self.claim(path, line, tree, kind, item_id, backing_path)

    def claim(
        self, path: str, line: int, tree: str, kind: str, item_id: str, backing_path: str
    ) -> str | None:
        entry = self.tree.get(backing_path)
        ref = BackingRef(
            item_id, kind, backing_path, path, line, entry is not None and entry.is_regular
        )
        first = self.claims.setdefault(backing_path.casefold(), ref)
        if (first.id, first.kind) != (item_id, kind):
            self.problem(
                "backing-collision",
                path,
                line,
                f"backing file '{backing_path}' of {kind} heading `{item_id}` is already "
                f"claimed by {first.kind} heading `{first.id}` at {first.file}:{first.line} "
                "(file names are compared case-insensitively)",
            )
            return None
        self.backing.setdefault(item_id, ref)
        if entry is None or not entry.is_regular:
            label = {"F#": "F# detail file", "M#": "Markdown evidence file", "S#": "skill file"}
            state = "is missing" if entry is None else f"is {describe(entry)}, not a regular file"
            self.problem(
                "missing-backing-file",
                path,
                line,
                f"{label[kind]} '{backing_path}' for heading `{item_id}` {state}",
            )
            return None
        if kind != "F#":
            self.evidence[backing_path] = None
            return None
        return backing_path

    def check_prose(self, doc: Document, line: int, parent: int, reported: set[int]) -> None:
        if parent in reported:
            return
        owner = doc.blocks[parent] if parent >= 0 else None
        if isinstance(owner, Heading) and owner.item_id is not None:
            return
        reported.add(parent)
        where = "before the first heading" if owner is None else "under a heading without an id"
        self.problem(
            "mf-orphan-prose",
            doc.path,
            line,
            f"text {where}: in a shared view every line must belong to an addressable heading",
        )

    def logical_text(self, path: str, start: int, end: int) -> str:
        """Lines `start..end` of a file with each owned F# detail file spliced in after
        its owner's lines, recursively; iterative so deep F# chains are fine."""
        parts: list[str] = []
        work: list[tuple[bool, str, int, int]] = [(True, path, start, end)]
        while work:
            expand, file, first, last = work.pop()
            lines = self.docs[file].lines
            if not expand:
                if first <= last:
                    parts.append("\n".join(lines[first - 1 : last]))
                continue
            owners = self.owned.get(file, ())
            todo: list[tuple[bool, str, int, int]] = []
            position = first
            k = bisect_left(owners, (first, 0, ""))
            while k < len(owners) and owners[k][0] <= last:
                _, owner_end, detail = owners[k]
                todo.append((False, file, position, owner_end))
                todo.append((True, detail, 1, len(self.docs[detail].lines)))
                position = max(position, owner_end + 1)
                k += 1
            todo.append((False, file, position, last))
            work += reversed(todo)
        return "\n".join(parts).rstrip()
