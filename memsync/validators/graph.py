"""The graph-validator interface, and the root-document check that stands in for it.

A graph validator sees the whole tree and reports RightMemory graph problems (CONTRACT
§3, "RightMemory graph"). For now `RootDocumentsValidator` only checks that the two root
documents exist as regular files; the next issue replaces it with the full RightMemory
graph parser (ids, headings, backing files, edges, focus) behind the same Protocol, and
`default_graph_validator()` will then return that parser instead.

A graph validator always runs, even when the gate already found path or byte problems,
so it must tolerate files that are not valid UTF-8 (the gate reports those itself).
"""

from __future__ import annotations

from typing import Protocol

from memsync.validators.policy import ROOT_DOCUMENTS
from memsync.validators.problems import ProblemList, Report
from memsync.validators.tree import MODE_GITLINK, MODE_SYMLINK, TreeView


class GraphValidator(Protocol):
    """Validates the memory graph of one whole tree."""

    def validate(self, tree: TreeView) -> Report: ...


class RootDocumentsValidator:
    """`MEMORY.md` and `PURSUITS.md` must exist and be regular files."""

    def validate(self, tree: TreeView) -> Report:
        problems = ProblemList()
        for name in ROOT_DOCUMENTS:
            entry = tree.get(name)
            if entry is None:
                problems.add("missing-root-document", name, f"'{name}' is missing")
            elif not entry.is_regular:
                kind = _kind(entry.mode)
                message = f"'{name}' is not a regular file (it is {kind})"
                problems.add("missing-root-document", name, message)
        documents = sum(1 for p, e in tree.entries.items() if p.endswith(".md") and e.is_regular)
        return problems.report(files=documents, items=0)


def _kind(mode: int) -> str:
    if mode == MODE_SYMLINK:
        return "a symbolic link"
    if mode == MODE_GITLINK:
        return "a submodule"
    return f"a special file, mode {mode:06o}"


def default_graph_validator() -> GraphValidator:
    """The graph validator the sync cycle uses."""
    return RootDocumentsValidator()
