"""The whole RightMemory root check: the graph plus every auxiliary file's rules.

What `memsync validate` and the sync gate run over a root: the graph (rules 1-33), then
`corrections.md` shape (and capacity when asked: the sync gate never enforces it, as in
RightMemory, so that an overflow merged from two machines does not block unrelated sync),
the Agent Correction collections, the guidance inbox and the update queue and records.
"""

from __future__ import annotations

from memsync.validators.corrections import check_collections, check_corrections
from memsync.validators.graph import CacheChoice, GraphValidator, MemoryGraphValidator
from memsync.validators.inbox import check_inbox
from memsync.validators.problems import Report
from memsync.validators.queue import check_queue, check_records
from memsync.validators.tree import TreeView


class RootValidator:
    """A GraphValidator for a local memory root, auxiliary files included."""

    def __init__(self, *, enforce_capacity: bool, cache: CacheChoice = None) -> None:
        self.enforce_capacity = enforce_capacity
        self.graph = MemoryGraphValidator("local", cache=cache)

    def validate(self, tree: TreeView) -> Report:
        report = self.graph.validate(tree)
        extra = [
            *check_corrections(tree, enforce_capacity=self.enforce_capacity),
            *check_collections(tree),
            *check_inbox(tree),
            *check_queue(tree),
            *check_records(tree),
        ]
        return Report(problems=(*report.problems, *extra), files=report.files, items=report.items)


def default_graph_validator(
    *, enforce_capacity: bool = False, cache: CacheChoice = None
) -> GraphValidator:
    """What the gate, the sync cycle and the CLI use: the local graph plus the auxiliary
    file rules; the corrections capacity only when asked. Graph files are parsed through
    `cache` (None: the process's in-memory parse cache; `Uncached()`: no cache)."""
    return RootValidator(enforce_capacity=enforce_capacity, cache=cache)
