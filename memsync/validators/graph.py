"""The graph-validator interface and the RightMemory graph validator behind it.

A graph validator sees the whole tree and reports RightMemory graph problems (CONTRACT
§3, "RightMemory graph", reference rules 1-33). `MemoryGraphValidator` runs the full
parser (`document.py` per file, `assembly.py` across files, `edges.py` for edges and
Focus). Auxiliary files (corrections, inbox, update queue) are not its business:
`rightmemory.RootValidator` adds those rules, and `rightmemory.default_graph_validator()`
is what the gate, the sync cycle and the CLI use.

A graph validator always runs, even when the gate already found path or byte problems,
so it tolerates files that are not valid UTF-8 (it skips them; the gate reports them).
"""

from __future__ import annotations

from typing import Protocol

from memsync.validators.assembly import build_graph
from memsync.validators.graphmodel import Profile
from memsync.validators.problems import Report
from memsync.validators.tree import TreeView

__all__ = [
    "GraphValidator",
    "MemoryGraphValidator",
    "build_graph",
]


class GraphValidator(Protocol):
    """Validates the memory graph of one whole tree."""

    def validate(self, tree: TreeView) -> Report: ...


class MemoryGraphValidator:
    """The full RightMemory graph rules for one profile.

    The Report counts `files` as the RightMemory files read (graph files plus existing M#
    and S# backing files) and `items` as the ids in the graph.
    """

    def __init__(
        self, profile: str = "local", *, root_path: str | None = None, namespace: str | None = None
    ) -> None:
        Profile.named(profile, root_path, namespace)  # reject a bad profile now, not later
        self.profile = profile
        self.root_path = root_path
        self.namespace = namespace

    def validate(self, tree: TreeView) -> Report:
        graph, problems = build_graph(
            tree, self.profile, root_path=self.root_path, namespace=self.namespace
        )
        files = len(graph.files) + len(graph.evidence_files)
        return Report(problems=tuple(problems), files=files, items=len(graph.items))
