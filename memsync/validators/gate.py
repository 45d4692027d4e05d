"""The gate: the two validation entry points the sync cycle uses.

`validate_tree` checks a whole candidate tree (names, entries, bytes, case collisions,
duplicate entries, then the graph). `validate_changes` checks every path changed by every
incoming or outgoing commit, not only the net diff, so a forbidden file that a later
commit deletes is still refused; and it replays each commit's adds and deletes onto an
index of folded names, so a case collision or duplicate entry that exists only inside the
history is refused too. Both are pure and report every problem at once, in a stable order.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence

from memsync.validators.collisions import FoldedTree, case_collisions, duplicate_entries
from memsync.validators.graph import GraphValidator
from memsync.validators.paths import check_entry, check_name, check_text, within_cap
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem, Report
from memsync.validators.rightmemory import default_graph_validator
from memsync.validators.tree import BlobSource, Change, Entry, TreeView


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
    names, modes, sizes and collisions are still checked for every entry.
    """
    problems: list[Problem] = []
    readable: list[str] = []
    for path in sorted(tree.entries):
        entry = tree.entries[path]
        name_problem = check_name(path, policy)
        if name_problem is not None:
            problems.append(name_problem)
        problems += check_entry(path, entry, policy)
        if name_problem is None and within_cap(entry, policy):
            readable.append(path)
    if content_paths is not None:
        wanted = set(content_paths)
        readable = [path for path in readable if path in wanted]
    tree.preload(readable)
    for path in readable:
        text_problem = check_text(path, tree.content(path))
        if text_problem is not None:
            problems.append(text_problem)
    problems += case_collisions(tree.entries, file_and_directory=False)
    problems += duplicate_entries(tree.entries, tree.duplicates)
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
    for change, problem in _shapes(changes, base, trees):
        add(change, problem)
    blobs = _read_blobs([entry for _, entry in to_read], source)
    for change, entry in to_read:
        data = entry.data if entry.data is not None else blobs[_oid(entry)]
        add(change, check_text(change.path, data))
    files = len({c.path for c in changes})
    return Report(problems=tuple(sorted(found.values(), key=_order)), files=files)


def _shapes(
    changes: Sequence[Change], base: Collection[str], trees: TreePaths | None
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
            held[parent] = FoldedTree(trees(parent) if trees is not None else base)
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
