"""The gate: the two validation entry points the sync cycle uses.

`validate_tree` checks a whole candidate tree (names, entries, bytes, case collisions,
duplicate entries, then the graph). `validate_changes` checks every path changed by every
incoming or outgoing commit, not only the net diff, so a forbidden file that a later
commit deletes is still refused; and it replays each commit's adds and deletes onto an
index of folded names, so a case collision or duplicate entry that exists only inside the
history is refused too. Both are pure and report every problem at once, in a stable order.

A sync pays for what changed. The whole-tree name, mode and clash verdict of a tree (its
`TreeShape`) is kept, per process, by the tree's Git object id; a tree that a git adapter
derived from another by a diff (`tree_shape`) gets its shape from that tree's shape plus
the diff, equal to the full recomputation (property-tested), and only the changed paths'
bytes are read. A tree without an object id is checked from scratch. A CLI process, which
starts with no shapes, may also read and record them on disk (`SHAPES.records`, set by
`cache.open_records`; `shapestore.py`), by the same tree ids.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING

from memsync.validators.collisions import FoldedTree, case_collisions, duplicate_entries
from memsync.validators.graph import GraphValidator
from memsync.validators.paths import check_entry, check_name, check_text, within_cap
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem, Report
from memsync.validators.rightmemory import default_graph_validator
from memsync.validators.tree import BlobSource, Change, Entry, TreeView
from memsync.values import value

if TYPE_CHECKING:
    from memsync.validators.shapestore import ShapeStore


def _order(problem: Problem) -> tuple[str, str, int, str]:
    return (problem.path or "", problem.code, problem.line or 0, problem.message)


def validate_tree(
    tree: TreeView,
    policy: SyncPolicy,
    graph: GraphValidator | None = None,
    *,
    content_paths: Collection[str] | None = None,
) -> Report:
    """Every problem of one whole tree, the graph's included.

    `graph` defaults to `default_graph_validator()`, so a caller cannot skip the graph
    check by forgetting it; a package or test passes its own validator instead.

    Bytes are read only for regular files whose name passed and whose size is within the
    cap: a forbidden or unsafe path is reported for its name, not also for its bytes.
    `content_paths` limits the byte checks to those paths: a candidate that differs from an
    already validated tree only there needs no other file read (publication is O(diff));
    names, modes, sizes and collisions are still checked for every entry (through the
    tree's shape: from a kept or derived `TreeShape` when the tree names its object id).
    """
    shape = tree_shape(tree, tree.entries, policy)
    problems = [problem for found in shape.flagged.values() for problem in found]
    if content_paths is None:
        candidates: Iterable[str] = tree.entries
    else:
        candidates = (path for path in set(content_paths) if path in tree.entries)
    readable = sorted(
        path
        for path in candidates
        if check_name(path, policy) is None and within_cap(tree.entries[path], policy)
    )
    tree.preload(readable)
    for path in readable:
        text_problem = check_text(path, tree.content(path))
        if text_problem is not None:
            problems.append(text_problem)
    if shape.folded.crowded:  # only then is there a clash (see FoldedTree.crowded)
        problems += case_collisions(tree.entries, file_and_directory=False)
        problems += duplicate_entries(tree.entries, tree.duplicates)
    else:
        problems += duplicate_entries((), tree.duplicates)
    graph_report = (graph or default_graph_validator()).validate(tree)
    unique = sorted(set(problems) | set(graph_report.problems), key=_order)
    return Report(problems=tuple(unique), files=graph_report.files, items=graph_report.items)


TreePaths = Callable[[str], Collection[str]]
"""The paths of one commit's tree, by commit id (say `git.ls_tree`)."""


def validate_changes(
    changes: Sequence[Change],
    source: BlobSource,
    policy: SyncPolicy,
    *,
    base: Collection[str] = (),
    trees: TreePaths | None = None,
) -> Report:
    """Every problem in the paths changed by a series of commits, and in each commit's tree
    shape (case collisions and duplicate entries, commit by commit).

    Deletions are checked by name only; new sides also by mode, size and bytes. All
    needed blobs are read in one `source.read_many` call. A path and code reported by
    several commits is kept once, from the first commit (in `changes` order).

    Each commit's tree is its first parent's tree plus that diff, so only the paths a
    commit adds are checked against it (see `_shapes`). `base` holds the paths of the tree
    the series starts from (the excluded side; empty by default, which is exact for a
    history from its root commit); `trees` looks up the tree of a parent that is not in
    `changes`, used only when the changes name their parents.
    """
    found: dict[tuple[str | None, str], Problem] = {}

    def add(change: Change, problem: Problem | None) -> None:
        if problem is None or (problem.path, problem.code) in found:
            return
        message = f"{problem.message} (in commit {change.commit[:12]})"
        found[(problem.path, problem.code)] = Problem(
            problem.code, problem.path, problem.line, message
        )

    to_read: list[tuple[Change, Entry]] = []
    for change in changes:
        name_problem = check_name(change.path, policy)
        add(change, name_problem)
        entry = change.entry
        if entry is None:
            continue
        for problem in check_entry(change.path, entry, policy):
            add(change, problem)
        if name_problem is None and within_cap(entry, policy):
            to_read.append((change, entry))
    for change, problem in _shapes(changes, base, trees, policy):
        add(change, problem)
    blobs = _read_blobs([entry for _, entry in to_read], source)
    for change, entry in to_read:
        data = entry.data if entry.data is not None else blobs[_oid(entry)]
        add(change, check_text(change.path, data))
    files = len({c.path for c in changes})
    return Report(problems=tuple(sorted(found.values(), key=_order)), files=files)


def _shapes(
    changes: Sequence[Change], base: Collection[str], trees: TreePaths | None, policy: SyncPolicy
) -> Iterator[tuple[Change, Problem]]:
    """Case collisions and duplicate entries of every commit's tree, from its first-parent diff.

    When every change names its commit's parents, each commit's tree is built from its
    first parent's (kept while a later commit needs it, else looked up with `trees`, else
    assumed to be `base`), in parent-first order. A merge that listed fewer diffs than it
    has parents has a tree equal to one of its parents' trees: it adds no new shape, and a
    commit built on it looks its tree up. Without parents, the commits are taken as one
    line of history starting at `base`, each replaying its first listed diff: exact for a
    linear history, an approximation for a branching one (a path a merge brings in again is
    read as modified, and a clash is reported at the first commit of the line to hold it).
    """
    if trees is not None and _creates_nothing(changes):
        return  # no tree of the series gains a path: none gains a clash (see `_creates_nothing`)
    yield from _replayed(changes, base, trees, policy)


def _creates_nothing(changes: Sequence[Change]) -> bool:
    """Whether every change of a series deletes a path, or changes one that git says the
    parent its diff is against holds (`created is False`, never unknown, in a commit that
    names its parents and has one).

    Then `_replayed`, given each parent's true tree (`trees`), adds no path to any state
    (a path is added when the state lacks it or git says it is new; a deletion adds none),
    so it reports nothing: a clash is only ever reported for a path added. `_shapes` then
    needs no parent's tree: a history of edits reads neither the start's listing nor its
    shape (property-tested equal to the full replay).
    """
    return all(
        change.entry is None or (change.created is False and bool(change.parents))
        for change in changes
    )


def _replayed(
    changes: Sequence[Change], base: Collection[str], trees: TreePaths | None, policy: SyncPolicy
) -> Iterator[tuple[Change, Problem]]:
    """`_shapes` in full: every commit's tree replayed (see `_shapes`)."""
    by_commit: dict[str, list[Change]] = {}
    for change in changes:
        by_commit.setdefault(change.commit, []).append(change)
    if not all(change.parents is not None for change in changes):
        state = FoldedTree(base)
        for rows in by_commit.values():
            yield from _replay(state, [c for c in rows if c.diff == 0], exact=False)
        return
    parents = {commit: rows[0].parents or () for commit, rows in by_commit.items()}
    takes = {
        commit: ps[0]
        for commit, ps in parents.items()
        if ps and len({c.diff for c in by_commit[commit]}) == len(ps)
    }
    wanted: dict[str, int] = {}
    for parent in takes.values():
        wanted[parent] = wanted.get(parent, 0) + 1
    held: dict[str, FoldedTree] = {}

    def take(parent: str) -> FoldedTree:
        if parent not in held:
            held[parent] = _folded(trees(parent), policy) if trees is not None else FoldedTree(base)
        wanted[parent] -= 1
        return held.pop(parent) if wanted[parent] == 0 else held[parent].copy()

    for commit in _parents_first(by_commit, parents):
        if parents[commit] and commit not in takes:
            continue  # a merge whose tree equals one of its parents' trees
        state = take(takes[commit]) if commit in takes else FoldedTree()
        yield from _replay(state, [c for c in by_commit[commit] if c.diff == 0], exact=True)
        if wanted.get(commit, 0) > 0:
            held[commit] = state


def _replay(
    state: FoldedTree, rows: Sequence[Change], *, exact: bool
) -> Iterator[tuple[Change, Problem]]:
    """Apply one diff to `state` (deletions first) and check the paths it adds.

    A path git lists as new while the state already holds it is a second entry of one
    name when the state is `exact`, or when this very diff added it already (a diff names
    a path once per entry); otherwise it is a modification.
    """
    for change in rows:
        if change.entry is None:
            state.remove(change.path)
    added: list[Change] = []
    fresh: set[str] = set()
    for change in rows:
        if change.entry is None:
            continue
        again = bool(change.created) and (exact or change.path in fresh)
        if change.path not in state or again:
            state.add(change.path)
            added.append(change)
            fresh.add(change.path)
    for change in added:
        for problem in state.clashes(change.path):
            yield change, problem


def _parents_first(
    by_commit: Mapping[str, object], parents: Mapping[str, tuple[str, ...]]
) -> list[str]:
    """The commits, each after its first parent when that is one of them (listing order else)."""
    order: list[str] = []
    placed: set[str] = set()
    for commit in by_commit:
        chain: list[str] = []
        current: str | None = commit
        while current is not None and current in by_commit and current not in placed:
            chain.append(current)
            placed.add(current)
            ps = parents[current]
            current = ps[0] if ps else None
        order += reversed(chain)
    return order


def _oid(entry: Entry) -> str:
    if entry.oid is None:
        raise ValueError("a changed file has neither bytes nor an object id")
    return entry.oid


def _read_blobs(entries: Sequence[Entry], source: BlobSource) -> Mapping[str, bytes]:
    wanted = sorted({_oid(e) for e in entries if e.data is None})
    if not wanted:
        return {}
    blobs = source.read_many(wanted)
    missing = [oid for oid in wanted if oid not in blobs]
    if missing:
        raise KeyError(f"blob source did not return {len(missing)} object(s): {missing[0]}")
    return blobs


def _folded(paths: Collection[str], policy: SyncPolicy) -> FoldedTree:
    """A FoldedTree of `paths` the caller may change: from the tree's shape when the listing
    names its object id (kept, or derived from a kept one), else built from the paths."""
    if isinstance(paths, Mapping) and getattr(paths, "tree_oid", None):
        return tree_shape(paths, paths, policy).folded.copy()
    return FoldedTree(paths)


# -- tree shapes -------------------------------------------------------------------------------

Delta = Sequence[tuple[str, Entry | None]]
"""A diff between two trees: (path, the new entry or None when deleted), each path once."""


@value
class TreeShape:
    """The whole-tree verdict that does not read bytes: every path's name, mode and size
    problems (`flagged`, paths with none left out), and the folded paths for clashes.

    Shared between cycles once kept: never changed in place (`derive` copies).
    """

    folded: FoldedTree
    flagged: Mapping[str, tuple[Problem, ...]]

    @classmethod
    def of(cls, entries: Mapping[str, Entry], policy: SyncPolicy) -> TreeShape:
        flagged: dict[str, tuple[Problem, ...]] = {}
        for path, entry in entries.items():
            found = _entry_problems(path, entry, policy)
            if found:
                flagged[path] = found
        return cls(FoldedTree(entries), flagged)

    def derive(self, delta: Delta, policy: SyncPolicy) -> TreeShape:
        """The shape of this tree changed by `delta` (O(len(delta)) but for two dict copies)."""
        folded = self.folded.copy()
        flagged = dict(self.flagged)
        for path, entry in delta:
            if entry is None:
                folded.remove(path)
                flagged.pop(path, None)
        for path, entry in delta:
            if entry is None:
                continue
            if path not in folded:
                folded.add(path)
            found = _entry_problems(path, entry, policy)
            if found:
                flagged[path] = found
            else:
                flagged.pop(path, None)
        return TreeShape(folded, flagged)


def _entry_problems(path: str, entry: Entry, policy: SyncPolicy) -> tuple[Problem, ...]:
    name_problem = check_name(path, policy)
    found = check_entry(path, entry, policy)
    return tuple(found) if name_problem is None else (name_problem, *found)


class _Shapes:
    """The shapes of recently validated trees, by (tree object id, policy), least recently
    used forgotten past `paths` paths in all (a daemon keeps each root's latest tree)."""

    def __init__(self, paths: int) -> None:
        self._limit = paths
        self._held = 0
        self._lock = threading.Lock()
        self._items: OrderedDict[tuple[str, SyncPolicy], TreeShape] = OrderedDict()
        self.records: ShapeStore | None = None  # shapes on disk, for a CLI process

    def get(self, oid: str, policy: SyncPolicy) -> TreeShape | None:
        with self._lock:
            shape = self._items.get((oid, policy))
            if shape is not None:
                self._items.move_to_end((oid, policy))
            return shape

    def put(self, oid: str, policy: SyncPolicy, shape: TreeShape) -> None:
        with self._lock:
            old = self._items.pop((oid, policy), None)
            self._held -= 0 if old is None else len(old.folded)
            self._items[(oid, policy)] = shape
            self._held += len(shape.folded)
            while self._held > self._limit and len(self._items) > 1:
                _key, dropped = self._items.popitem(last=False)
                self._held -= len(dropped.folded)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._held = 0


SHAPES = _Shapes(paths=1_000_000)


def tree_shape(source: object, entries: Mapping[str, Entry], policy: SyncPolicy) -> TreeShape:
    """The shape of the tree `entries` lists.

    `source` (the view or listing) may say, as attributes a git adapter sets, which tree it
    is (`tree_oid`, a Git object id) and that it is the tree `base_oid`'s plus `delta` (git's
    own diff between the two trees): then the shape is the kept one, or derived from the
    base's kept shape (or recorded one, checked against the base's listing `base_entries`
    like any record); else it is computed from every entry. A view built any other way has
    no such attributes and is checked from scratch.
    """
    oid = getattr(source, "tree_oid", None)
    if not isinstance(oid, str):
        return TreeShape.of(entries, policy)
    kept = SHAPES.get(oid, policy)
    if kept is not None:
        return kept
    records = SHAPES.records
    kept = records.load(oid, policy, entries) if records is not None else None
    if kept is not None:
        SHAPES.put(oid, policy, kept)
        return kept
    base_oid, delta = getattr(source, "base_oid", None), getattr(source, "delta", None)
    base = SHAPES.get(base_oid, policy) if isinstance(base_oid, str) else None
    base_entries = getattr(source, "base_entries", None)
    if base is None and isinstance(base_oid, str) and isinstance(base_entries, Mapping):
        base = _recorded(base_oid, policy, base_entries)  # a fresh process: not kept yet
    derived: tuple[str, Delta] | None = None
    if base is not None and isinstance(base_oid, str) and delta is not None:
        derived = (base_oid, delta)
    if base is not None and derived is not None:
        shape = base.derive(derived[1], policy)
    else:
        shape = TreeShape.of(entries, policy)
    SHAPES.put(oid, policy, shape)
    if records is not None:  # a derived tree's record is a delta from its base's
        records.save(oid, policy, shape, entries, derived)
    return shape


def _recorded(oid: str, policy: SyncPolicy, entries: Mapping[str, Entry]) -> TreeShape | None:
    """Tree `oid`'s recorded shape (kept once read), when its record fits `entries`."""
    records = SHAPES.records
    shape = records.load(oid, policy, entries) if records is not None else None
    if shape is not None:
        SHAPES.put(oid, policy, shape)
    return shape


def shape_reader(oid: str, policy: SyncPolicy) -> Callable[[], None] | None:
    """What reads tree `oid`'s shape record ahead (`ShapeStore.read_ahead`), for a caller
    to run while it waits for something else (a fresh process, waiting for git, before the
    tree's listing is at hand); None when there is nothing to read (the shape is kept, or
    no records are kept in this process). The record's checks against the listing run
    when the shape is asked for, as for any record."""
    records = SHAPES.records
    if records is None or SHAPES.get(oid, policy) is not None:
        return None
    return records.expect(oid, policy)  # its `load` waits for it (not read twice)
