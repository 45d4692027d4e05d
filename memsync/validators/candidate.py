"""The candidate check: every check a candidate commit passes, run in one place (pure).

A caller chooses which checks apply, its policy: a role's write grants over the diff, a
rule of its own already reduced to problems (say prune's revival grace), the path rules
over every commit of a history (`History`), signature problems judged elsewhere, and the
candidate's whole tree with the bytes of the changed files or of every file. This runs
them in one fixed order, cheapest first: a change outside the grants (or against the
caller's rule) is the whole answer, and a history that breaks the path rules is not read
again as a tree (the refusal stands either way; the tree would repeat its problems);
signature problems are always reported. Nothing here is skipped to save time on a
candidate that passes: a check is left out only by the caller not asking for it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from memsync.validators.gate import TreePaths, validate_changes, validate_tree
from memsync.validators.grants import check_grants
from memsync.validators.graph import GraphValidator
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem, Report
from memsync.validators.tree import BlobSource, Change, TreeView
from memsync.values import value


@value
class History:
    """The commits a candidate brings, each change of each one (`validate_changes`)."""

    changes: Sequence[Change]
    source: BlobSource
    trees: TreePaths | None = None  # a parent's tree paths, for parents outside `changes`


def check_candidate(
    tree: TreeView | Callable[[], TreeView] | None,
    policy: SyncPolicy,
    *,
    graph: GraphValidator | None = None,
    content_paths: Collection[str] | Callable[[], Collection[str]] | None = None,
    history: History | Callable[[], History] | None = None,
    grants: str | None = None,
    diff: Sequence[tuple[str, str]] = (),
    also: Sequence[Problem] = (),
    signatures: Sequence[Problem] = (),
) -> Report:
    """The problems of the checks asked for: `grants` (the role whose write grants bound
    `diff`, the (status, path) changes from the start to the candidate) and `also` first,
    alone when they find any; then `history`; then the `tree` (its graph included; bytes
    only of `content_paths` when given) when the history passed; then `signatures`.

    `history`, `tree` and `content_paths` may be given as functions, called only when
    that check runs (a change outside the grants reads no history, a refused history no
    tree). The report's counts are the tree's when a
    tree is checked, else the history's files."""
    first: list[Problem] = []
    if grants is not None:
        first += check_grants(grants, diff, policy)
    first += also
    if first:
        return Report(problems=tuple(dict.fromkeys(first)))
    problems: list[Problem] = []
    files, items = 0, 0
    if history is not None:
        commits = history() if callable(history) else history
        report = validate_changes(commits.changes, commits.source, policy, trees=commits.trees)
        problems += report.problems
        files = report.files
    if tree is not None and not problems:
        view = tree() if callable(tree) else tree
        paths = content_paths() if callable(content_paths) else content_paths
        report = validate_tree(view, policy, graph, content_paths=paths)
        problems += report.problems
        files, items = report.files, report.items
    problems += signatures
    return Report(problems=tuple(dict.fromkeys(problems)), files=files, items=items)
