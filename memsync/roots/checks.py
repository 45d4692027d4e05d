"""Which checks a candidate passes: a caller's policy, read from git and run in one place.

Every caller of the gate (the admission transaction for sync, autocommit, cycle landings,
repair and revocation; push; init) says what applies to it, never how to run it:

    grants  the role whose write grants bound the change (a cycle role, the repair role)
    also    a rule of the caller's own over (start, candidate) (prune's revival grace)
    history every commit from the start to the candidate passes the path rules
    signed  every such commit carries a pinned signer's signature (`roots.*.admission`)
    tree    the candidate's tree: bytes of the changed files, of every file, or (for a
            history checked before anything is staged) not at all

`Checks.check` gathers what those need from the git box and hands it to the pure
`validators.candidate.check_candidate`, which reports every problem at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Literal

from memsync.transports.git import Git, GitBlobs
from memsync.validators.candidate import History, check_candidate
from memsync.validators.graph import GraphValidator
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem, Report
from memsync.validators.tree import Change, TreeView
from memsync.values import value

if TYPE_CHECKING:
    from memsync.roots.admission import SignedAdmission

EMPTY_TREE = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"  # git's empty tree (SHA-1 repos)

# A caller's own rule over (start, candidate), already reduced to problems.
Rule = Callable[[str, str], Sequence[Problem]]


@value
class Checks:
    """The checks one caller's candidates pass (see the module docstring)."""

    graph: GraphValidator | None = None  # None: `default_graph_validator()`
    grants: str | None = None
    also: Rule | None = None
    history: bool = True
    signed: SignedAdmission | None = None
    tree: Literal["changed", "whole", "none"] = "changed"

    def check(
        self,
        git: Git,
        policy: SyncPolicy,
        start: str | None,
        candidate: str,
        files: Sequence[str] | None = None,
        *,
        changes: Sequence[Change] | None = None,
        view: TreeView | None = None,
    ) -> Report:
        """Every problem of `candidate` against `start` (None: a history from its root
        commit). What the caller already read from git is passed, not read again: `files`
        (the paths changed from `start`), `changes` (`git.changes(candidate, start)`),
        `view` (`git.tree_view(candidate)`)."""
        base = start or EMPTY_TREE

        def history() -> History:
            listed = changes if changes is not None else git.changes(candidate, start)[1]
            return History(listed, GitBlobs(git), git.ls_tree)

        content: Sequence[str] | Callable[[], Sequence[str]] | None = None
        if self.tree == "changed":
            content = files if files is not None else lambda: git.changed_paths(base, candidate)
        tree: TreeView | Callable[[], TreeView] | None = None
        if self.tree != "none":  # read only when the checks before it passed
            tree = view if view is not None else lambda: git.tree_view(candidate)
        return check_candidate(
            tree,
            policy,
            graph=self.graph,
            content_paths=content,
            history=history if self.history else None,
            grants=self.grants,
            diff=git.tree_diff(base, candidate) if self.grants is not None else (),
            also=self.also(base, candidate) if self.also is not None else (),
            signatures=self.signed.judge(git, candidate, start) if self.signed else (),
        )
