"""The whole RightMemory root check: the graph plus every auxiliary file's rules.

What `memsync validate` and the sync gate run over a root: the graph (rules 1-33), then
`corrections.md` shape (and capacity when asked: the sync gate never enforces it, as in
RightMemory, so that an overflow merged from two machines does not block unrelated sync),
the Agent Correction collections, the guidance inbox and the update queue and records.
"""

from __future__ import annotations

from memsync.validators.auxpaths import INBOX_PATH, queue_paths
from memsync.validators.cache import Uncached, content_id, default_cache
from memsync.validators.corrections import (
    COLLECTION_PATHS,
    CORRECTIONS_PATH,
    check_collections,
    check_corrections,
)
from memsync.validators.graph import CacheChoice, GraphValidator, MemoryGraphValidator
from memsync.validators.problems import Problem, Report
from memsync.validators.tree import TreeView


class RootValidator:
    """A GraphValidator for a local memory root, auxiliary files included.

    The auxiliary verdict is a function of the auxiliary files' entries and bytes; when the
    tree names every one of them by content id, it is kept in the parse cache under those
    ids, and a tree whose auxiliary files did not change reads none of them.
    """

    def __init__(self, *, enforce_capacity: bool, cache: CacheChoice = None) -> None:
        self.enforce_capacity = enforce_capacity
        self.cache = cache
        self.graph = MemoryGraphValidator("local", cache=cache)

    def validate(self, tree: TreeView) -> Report:
        report = self.graph.validate(tree)
        extra = self.auxiliary(tree)
        return Report(problems=(*report.problems, *extra), files=report.files, items=report.items)

    def auxiliary(self, tree: TreeView) -> tuple[Problem, ...]:
        listed = queue_paths(tree)
        memo = None if isinstance(self.cache, Uncached) else (self.cache or default_cache())
        key = None if memo is None else self.key(tree, listed)
        if memo is not None and key is not None:
            found = memo.recall(key)
            if found is not None:
                return found
        extra = (
            *check_corrections(tree, enforce_capacity=self.enforce_capacity),
            *check_collections(tree),
            *_inbox_problems(tree),
            *_queue_problems(tree, listed),
        )
        if memo is not None and key is not None:
            memo.remember(key, extra)
        return extra

    def key(self, tree: TreeView, listed: list[str]) -> tuple[object, ...] | None:
        """Every auxiliary path with its mode and content id; None when one has no id."""
        parts: list[object] = ["aux", self.enforce_capacity]
        for path in (CORRECTIONS_PATH, *COLLECTION_PATHS, INBOX_PATH, *listed):
            entry = tree.get(path)
            if entry is None:
                parts.append(path)
                continue
            known = content_id(tree, path) if entry.is_regular else entry.oid
            if known is None:
                return None
            parts.append((path, entry.mode, known))
        return tuple(parts)


def _inbox_problems(tree: TreeView) -> list[Problem]:
    """`inbox.check_inbox`: an absent inbox has no problems (it reads nothing else), so a
    tree without one loads no inbox rules."""
    if tree.get(INBOX_PATH) is None:
        return []
    from memsync.validators.inbox import check_inbox  # noqa: PLC0415 - an inbox to check

    return check_inbox(tree)


def _queue_problems(tree: TreeView, listed: list[str]) -> list[Problem]:
    """`queue.check_queue` and `queue.check_records` over `listed` (`queue_paths`): the
    queue rules read only those paths, so a tree without any loads no queue rules."""
    if not listed:
        return []
    from memsync.validators.queue import check_queue, check_records  # noqa: PLC0415

    return [*check_queue(tree, listed), *check_records(tree, listed)]


def default_graph_validator(
    *, enforce_capacity: bool = False, cache: CacheChoice = None
) -> GraphValidator:
    """What the gate, the sync cycle and the CLI use: the local graph plus the auxiliary
    file rules; the corrections capacity only when asked. Graph files are parsed through
    `cache` (None: the process's in-memory parse cache; `Uncached()`: no cache)."""
    return RootValidator(enforce_capacity=enforce_capacity, cache=cache)
