"""The graph-validator interface and the RightMemory graph validator behind it.

A graph validator sees the whole tree and reports RightMemory graph problems (CONTRACT
§3, "RightMemory graph", reference rules 1-33). `MemoryGraphValidator` runs the full
parser (`document.py` per file, `assembly.py` across files, `edges.py` for edges and
Focus). Auxiliary files (corrections, inbox, update queue) are not its business:
`rightmemory.RootValidator` adds those rules, and `rightmemory.default_graph_validator()`
is what the gate, the sync cycle and the CLI use.

A graph validator always runs, even when the gate already found path or byte problems,
so it tolerates files that are not valid UTF-8 (it skips them; the gate reports them).

Validation does not build the MemoryGraph: `validate_graph` runs the per-file pass
(`summary.py`, through the parse cache of `cache.py`) and the cross-file pass
(`crossfile.py`), whose verdict equals `build_graph`'s problem for problem.
`assembly.build_graph` stays for the readers that need the graph itself (the editor,
renders, cycles). With a parse cache, the cross-file state of the last trees validated is
kept too (`lineage.py`), and a tree that changes a few files of one of them is joined from
it incrementally; a cache with lineage records (a CLI process's, `lineagestore.py`) also
looks there, and records the lineage of the tree it validated for the next process.
"""

from __future__ import annotations

from typing import Protocol

from memsync.validators.cache import CachedSummaries, ParseCache, Uncached, default_cache
from memsync.validators.crossfile import GraphVerdict, _Join, judge
from memsync.validators.gcpause import gc_paused
from memsync.validators.lineage import Lineage, Spoiled
from memsync.validators.problems import Report
from memsync.validators.profile import Profile
from memsync.validators.tree import TreeView

__all__ = [
    "GraphValidator",
    "MemoryGraphValidator",
    "validate_graph",
]

CacheChoice = ParseCache | Uncached | None
"""A parse cache; None for the process's default one; `Uncached()` to parse every file."""


def validate_graph(
    tree: TreeView,
    profile: str = "local",
    *,
    root_path: str | None = None,
    namespace: str | None = None,
    cache: CacheChoice = None,
) -> GraphVerdict:
    """The graph verdict of `tree`: the same problems as `build_graph`, sorted the same way,
    with only the files not in `cache` read and parsed."""
    rules = Profile.named(profile, root_path, namespace)
    if isinstance(cache, Uncached):
        with gc_paused():
            return judge(tree, rules, cache)
    chosen = default_cache() if cache is None else cache
    source = chosen.session()
    try:
        with gc_paused():
            return _join(tree, rules, source, chosen)
    finally:
        source.close()


def _join(
    tree: TreeView, rules: Profile, source: CachedSummaries, cache: ParseCache
) -> GraphVerdict:
    """Advance a kept lineage of this profile that `tree` follows (`lineage.py`), else one
    from the cache's records on disk, else run the full cross-file pass and keep its lineage
    for the next tree (and record it, when the cache has records)."""
    taken = cache.take_lineages(rules)
    records = cache.records
    try:
        for lineage in list(taken):
            changed = lineage.changes(tree, source)
            if changed is None:
                continue
            taken.remove(lineage)
            verdict = _advance(lineage, tree, source, changed)
            if verdict is not None:
                cache.steps += 1
                taken.insert(0, lineage)
                if records is not None:
                    records.save(tree, lineage, changed=bool(changed))
                return verdict
            break  # a spoiled lineage is dropped
        stored = records.load(tree, rules, source) if records is not None else None
        if records is not None and stored is not None:
            lineage, changed = stored
            verdict = _advance(lineage, tree, source, changed)
            if verdict is not None:
                cache.restores += 1
                taken.insert(0, lineage)
                records.save(tree, lineage, changed=bool(changed))
                return verdict
        join = _Join(tree, rules, source)
        verdict = join.run()
        cache.joins += 1
        kept = Lineage.keep(join, source)
        if kept is not None:
            taken.insert(0, kept)
            if records is not None:
                records.save(tree, kept)
        return verdict
    finally:
        cache.give_lineages(taken)


def _advance(
    lineage: Lineage, tree: TreeView, source: CachedSummaries, changed: list[tuple[int, str]]
) -> GraphVerdict | None:
    """`lineage.advance`, None when it cannot be taken or a stored summary was damaged."""
    try:
        return lineage.advance(tree, source, changed)
    except Spoiled:
        return None


class GraphValidator(Protocol):
    """Validates the memory graph of one whole tree."""

    def validate(self, tree: TreeView) -> Report: ...


class MemoryGraphValidator:
    """The full RightMemory graph rules for one profile.

    The Report counts `files` as the RightMemory files read (graph files plus existing M#
    and S# backing files) and `items` as the ids in the graph.
    """

    def __init__(
        self,
        profile: str = "local",
        *,
        root_path: str | None = None,
        namespace: str | None = None,
        cache: CacheChoice = None,
    ) -> None:
        Profile.named(profile, root_path, namespace)  # reject a bad profile now, not later
        self.profile = profile
        self.root_path = root_path
        self.namespace = namespace
        self.cache = cache

    def validate(self, tree: TreeView) -> Report:
        verdict = validate_graph(
            tree,
            self.profile,
            root_path=self.root_path,
            namespace=self.namespace,
            cache=self.cache,
        )
        files = len(verdict.files) + len(verdict.evidence_files)
        return Report(problems=verdict.problems, files=files, items=verdict.items)
