"""The gate: the two validation entry points the sync cycle uses.

`validate_tree` checks a whole candidate tree (names, entries, bytes, case collisions,
then the graph). `validate_changes` checks every path changed by every incoming or
outgoing commit, not only the net diff, so a forbidden file that a later commit deletes
is still refused. Both are pure and report every problem at once, in a stable order.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from memsync.validators.graph import GraphValidator, default_graph_validator
from memsync.validators.paths import (
    case_collisions,
    check_entry,
    check_name,
    check_text,
    within_cap,
)
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem, Report
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
    problems += case_collisions(tree.entries)
    graph_report = (graph or default_graph_validator()).validate(tree)
    unique = sorted(set(problems) | set(graph_report.problems), key=_order)
    return Report(problems=tuple(unique), files=graph_report.files, items=graph_report.items)


def validate_changes(changes: Sequence[Change], source: BlobSource, policy: SyncPolicy) -> Report:
    """Every problem in the paths changed by a series of commits.

    Deletions are checked by name only; new sides also by mode, size and bytes. All
    needed blobs are read in one `source.read_many` call. A path and code reported by
    several commits is kept once, from the first commit (in `changes` order).
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
    blobs = _read_blobs([entry for _, entry in to_read], source)
    for change, entry in to_read:
        data = entry.data if entry.data is not None else blobs[_oid(entry)]
        add(change, check_text(change.path, data))
    files = len({c.path for c in changes})
    return Report(problems=tuple(sorted(found.values(), key=_order)), files=files)


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
