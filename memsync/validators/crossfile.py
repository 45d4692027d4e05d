"""The cross-file pass: the graph verdict of a tree from per-file summaries.

The same rules, in the same order, as `assembly.build_graph` (whose verdict this must equal
for every input, problem for problem): root documents, F# detail files loaded depth first,
anchor kinds per profile and tree, backing claims, cycles and owners, one id namespace
where the first occurrence wins, dangling and containment edges, Focus. What one file
decides alone comes precomputed in its `FileSummary`; this pass only joins the files, so
its cost is in the number of files and of cross-file edges, not in the size of the text.

Summaries come from a `SummarySource` (the parse cache, or a plain parse); a file's bytes
are read only when its summary is not known by content.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from itertools import repeat
from typing import Protocol

from memsync.validators.filesummary import CHAR_KINDS, NODE, FileSummary
from memsync.validators.problems import Problem
from memsync.validators.profile import PURSUIT, Profile
from memsync.validators.tree import Entry, TreeView, describe
from memsync.values import value

# An F# reference to follow: target file, owner heading's line, the scope it hands down.
_Ref = tuple[str, int, str | None]
_LABEL = {"F#": "F# detail file", "M#": "Markdown evidence file", "S#": "skill file"}


class SummarySource(Protocol):
    """Summaries of a tree's files, by path; `prefetch` reads the unknown ones in a batch."""

    def summary(self, tree: TreeView, path: str, *, pursuit: bool) -> FileSummary: ...

    def prefetch(self, tree: TreeView, paths: Iterable[str], *, pursuit: bool) -> None: ...


@value
class GraphVerdict:
    """What the graph rules say about a tree: every problem, sorted by (path, line, code,
    message); the graph files in load order; the M# and S# files that exist; the item count."""

    problems: tuple[Problem, ...]
    files: tuple[str, ...]
    evidence_files: tuple[str, ...]
    items: int


def judge(tree: TreeView, profile: Profile, source: SummarySource) -> GraphVerdict:
    """The graph verdict of `tree` under `profile`."""
    return _Join(tree, profile, source).run()


class _Loaded:
    __slots__ = ("dropped", "index", "path", "scope", "summary", "tree")

    def __init__(
        self, index: int, path: str, summary: FileSummary, tree: str, scope: str | None
    ) -> None:
        self.index = index
        self.path = path
        self.summary = summary
        self.tree = tree
        self.scope = scope  # the logical parent of the file's top-level items
        self.dropped: set[int] | None = None  # items that are not the kept occurrence


class _Join:
    def __init__(self, tree: TreeView, profile: Profile, source: SummarySource) -> None:
        self.tree = tree
        self.profile = profile
        self.source = source
        self.problems: list[Problem] = []  # what the files' structure decides
        self.local: dict[int, list[Problem]] = {}  # a file's own problems, by load index
        self.edge_found: dict[int, list[Problem]] = {}  # a file's edge problems
        self.focus_found: list[Problem] = []
        self.consulted: dict[str, int | None] = {}  # path -> mode of every entry looked at
        self.undecoded: list[tuple[str, bool]] = []  # (path, pursuit) read but not UTF-8
        self.loaded: list[_Loaded] = []
        self.by_path: dict[str, _Loaded] = {}
        self.owner: dict[str, int] = {}  # item id -> index of the file that keeps it
        self.evidence: dict[str, None] = {}
        self.claims: dict[str, tuple[str, str, str, int]] = {}  # folded path -> id, kind, at
        self.owner_of: dict[str, tuple[str, int]] = {}
        self.focus: list[tuple[str, str, int]] = []

    def problem(self, code: str, path: str, line: int | None, message: str) -> None:
        self.problems.append(Problem(code, path, line, message))

    def run(self) -> GraphVerdict:
        for path, tree in self.profile.roots:
            entry = self.entry(path)
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
        for loaded in self.loaded:
            found = self.edges(loaded)
            if found:
                self.edge_found[loaded.index] = found
        self.focus_found = self.check_focus()
        return self.verdict()

    def verdict(self) -> GraphVerdict:
        problems = list(self.problems)
        for found in self.local.values():
            problems += found
        for found in self.edge_found.values():
            problems += found
        problems += self.focus_found
        problems.sort(key=lambda p: (p.path or "", p.line or 0, p.code, p.message))
        return GraphVerdict(
            tuple(problems),
            tuple(loaded.path for loaded in self.loaded),
            tuple(self.evidence),
            len(self.owner),
        )

    def entry(self, path: str) -> Entry | None:
        """The tree's entry at `path`, remembered: the verdict depends on it."""
        entry = self.tree.get(path)
        self.consulted[path] = None if entry is None else entry.mode
        return entry

    # -- loading, in assembly's order ------------------------------------------------------

    def read(self, path: str, tree: str, scope: str | None) -> _Loaded | None:
        summary = self.source.summary(self.tree, path, pursuit=tree == PURSUIT)
        if not summary.decoded:
            self.undecoded.append((path, tree == PURSUIT))
            return None
        loaded = _Loaded(len(self.loaded), path, summary, tree, scope)
        self.loaded.append(loaded)
        self.by_path[path] = loaded
        found = self.local_problems(loaded)
        if found:
            self.local[loaded.index] = found
        return loaded

    def local_problems(self, loaded: _Loaded) -> list[Problem]:
        """What the file alone decides: its scanner problems and, in MF, its orphan prose."""
        summary, path = loaded.summary, loaded.path
        found = [Problem(code, path, line, text) for code, line, text in summary.problems]
        if self.profile.addressed_prose:
            for line, before_first in summary.orphans:
                where = (
                    "before the first heading" if before_first else "under a heading without an id"
                )
                message = (
                    f"text {where}: in a shared view every line must belong to an "
                    "addressable heading"
                )
                found.append(Problem("mf-orphan-prose", path, line, message))
        return found

    def load(self, root: str, tree: str) -> None:
        top = self.read(root, tree, None)
        if top is None:
            return
        stack: list[tuple[str, Iterator[_Ref]]] = [(root, iter(self.record(top)))]
        on_path = {root}
        while stack:
            path, refs = stack[-1]
            ref = next(refs, None)
            if ref is None:
                stack.pop()
                on_path.discard(path)
                continue
            target, line, scope = ref
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
            elif target not in self.by_path:
                detail = self.read(target, tree, scope)
                if detail is not None:
                    self.owner_of[target] = (path, line)
                    stack.append((target, iter(self.record(detail))))
                    on_path.add(target)

    def record(self, loaded: _Loaded) -> list[_Ref]:
        """Register a file's items (first occurrence wins), check its headings' kinds and
        claims, keep its Focus and MF prose problems; its F# references to follow."""
        summary, path = loaded.summary, loaded.path
        ids = summary.ids
        owner = self.owner
        before = len(owner)
        if owner.keys().isdisjoint(ids):  # the usual case: every item is new
            owner.update(zip(ids, repeat(loaded.index)))
            if len(owner) - before != len(ids):  # an id twice in this file
                for item_id in ids:
                    owner.pop(item_id, None)
                self.register_one_by_one(loaded)
        else:
            self.register_one_by_one(loaded)
        refs: list[_Ref] = []
        for item in summary.specials:
            target = self.check_kind(loaded, item)
            if target is not None:
                refs.append((target, summary.lines[item], self.resolve(loaded, item)))
        if self.profile.focus:
            self.focus += [(target, path, line) for target, line in summary.focus]
        if refs:
            self.source.prefetch(
                self.tree, [ref[0] for ref in refs], pursuit=loaded.tree == PURSUIT
            )
        return refs

    def register_one_by_one(self, loaded: _Loaded) -> None:
        summary = loaded.summary
        loaded.dropped = dropped = set()
        for item, item_id in enumerate(summary.ids):
            first = self.owner.get(item_id)
            if first is None:
                self.owner[item_id] = loaded.index
                continue
            dropped.add(item)
            where = self.loaded[first]
            line = where.summary.lines[where.summary.ids.index(item_id)]
            self.problem(
                "duplicate-id",
                loaded.path,
                summary.lines[item],
                f"id `{item_id}` is already used at {where.path}:{line}; "
                "that first occurrence is the one kept",
            )

    @staticmethod
    def kept(loaded: _Loaded, item: int) -> bool:
        return loaded.dropped is None or item not in loaded.dropped

    def resolve(self, loaded: _Loaded, item: int) -> str | None:
        """The nearest kept heading at or above `item` in its file, else the file's scope."""
        parents = loaded.summary.parents
        while item >= 0 and not self.kept(loaded, item):
            item = parents[item]
        return loaded.summary.ids[item] if item >= 0 else loaded.scope

    def check_kind(self, loaded: _Loaded, item: int) -> str | None:
        """Kind rules for an addressable heading; the F# detail file to load, if any."""
        summary, path, tree = loaded.summary, loaded.path, loaded.tree
        kind, item_id, line = (
            CHAR_KINDS[summary.kinds[item]],
            summary.ids[item],
            summary.lines[item],
        )
        refused = self.profile.kind_problem(tree, kind, item_id)
        if refused is not None:
            self.problem(refused[0], path, line, refused[1])
            return None
        backing_path = self.profile.backing_path(tree, kind, item_id)
        if backing_path is None:
            return None
        return self.claim(path, line, kind, item_id, backing_path)

    def claim(self, path: str, line: int, kind: str, item_id: str, backing: str) -> str | None:
        entry = self.entry(backing)
        first = self.claims.setdefault(backing.casefold(), (item_id, kind, path, line))
        if (first[0], first[1]) != (item_id, kind):
            self.problem(
                "backing-collision",
                path,
                line,
                f"backing file '{backing}' of {kind} heading `{item_id}` is already "
                f"claimed by {first[1]} heading `{first[0]}` at {first[2]}:{first[3]} "
                "(file names are compared case-insensitively)",
            )
            return None
        if entry is None or not entry.is_regular:
            state = "is missing" if entry is None else f"is {describe(entry)}, not a regular file"
            self.problem(
                "missing-backing-file",
                path,
                line,
                f"{_LABEL[kind]} '{backing}' for heading `{item_id}` {state}",
            )
            return None
        if kind != "F#":
            self.evidence[backing] = None
            return None
        return backing

    # -- edges and Focus, once every file is loaded ----------------------------------------

    def edges(self, loaded: _Loaded) -> list[Problem]:
        """The file's edge problems: its own (for kept items), then dangling and containment
        edges, which depend on every file."""
        summary, path = loaded.summary, loaded.path
        found: list[Problem] = []
        if not (summary.item_problems or summary.pending):
            return found
        lines = summary.lines
        dropped = loaded.dropped or ()
        for item, code, message in summary.item_problems:
            if item not in dropped:
                found.append(Problem(code, path, lines[item], message))
        namespace = self.profile.namespace
        owner = self.owner
        for item, kind, target in summary.pending:
            if item in dropped:
                continue
            item_id = summary.ids[item]
            if target not in owner:
                message = f"edge `{kind}:{target}` of `{item_id}` names no item in {namespace}"
                found.append(Problem("dangling-edge", path, lines[item], message))
            elif kind == "rel" and self.is_ancestor(loaded, item, target):
                message = (
                    f"`rel:{target}` of `{item_id}` points at a heading it is already nested "
                    "under; remove the edge, the nesting says it"
                )
                found.append(Problem("containment-edge", path, lines[item], message))
        return found

    def parent_of(self, loaded: _Loaded, item: int) -> str | None:
        return self.resolve(loaded, loaded.summary.parents[item])

    def is_ancestor(self, loaded: _Loaded, item: int, target: str) -> bool:
        current = self.parent_of(loaded, item)
        while current is not None:
            if current == target:
                return True
            where = self.loaded[self.owner[current]]
            current = self.parent_of(where, where.summary.ids.index(current))
        return False

    def check_focus(self) -> list[Problem]:
        found: list[Problem] = []
        seen: set[str] = set()
        for target, file, line in self.focus:
            if target in seen:
                message = f"Focus lists `{target}` more than once"
                found.append(Problem("duplicate-focus", file, line, message))
                continue
            seen.add(target)
            index = self.owner.get(target)
            if index is None:
                message = f"Focus names `{target}`, which is no item"
                found.append(Problem("dangling-focus", file, line, message))
                continue
            where = self.loaded[index]
            kind = where.summary.kinds[where.summary.ids.index(target)]
            if kind == NODE or where.tree != PURSUIT:
                what = "a node" if kind == NODE else "a Memory heading"
                message = f"Focus must name Pursuit headings; `{target}` is {what}"
                found.append(Problem("focus-not-heading", file, line, message))
        return found
