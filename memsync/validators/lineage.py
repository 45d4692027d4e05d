"""The incremental join: the cross-file verdict of a tree from the previous tree's.

A daemon validates one root after another commit, and a commit usually changes a file or
two. `Lineage` keeps what the cross-file pass (`crossfile._Join`) worked out for a tree —
the files in load order with their content keys, the id -> file map, the problems by file,
the entries it looked at, the edges that name other files — and `Lineage.advance` applies
the summaries of the files that changed instead of joining every file again.

Exactness first: `advance` gives up (and the caller runs the full pass) whenever the change
could alter an outcome that depends on the load order or on more than the changed files:

* an entry the pass looked at (a root document, a claimed backing file) changed its mode or
  appeared or went; a file that was not UTF-8 changed;
* a changed file's headings of kinds other than `#` changed (kind, id or line) or sit under
  other ancestors: F# structure, claims and scopes stay exactly as they were;
* a duplicate id: the previous tree had one (a lineage is only kept without), or a changed
  file brings an id that another file, or the file itself, already defines;
* too many files changed for the step to pay.

What remains is local to the changed files and the ids they add or remove: their own
problems, their edges, the edges elsewhere that name an added or removed id (found through
an index by target), and Focus (few entries, checked again whole).

A lineage may also come from disk (`lineagestore.py`, for a fresh CLI process): its files'
summaries are then decoded only when the step reads them, and the files naming an id are
found in each file's edge targets as text (`named`) instead of an index built from every
summary. A stored summary that turns out damaged raises `Spoiled`: the step is not taken.
"""

from __future__ import annotations

from collections.abc import Iterable
from itertools import repeat
from typing import Protocol

from memsync.validators.crossfile import GraphVerdict, _Join, _Loaded
from memsync.validators.filesummary import FileSummary
from memsync.validators.profile import PURSUIT, Profile
from memsync.validators.tree import TreeView

MAX_CHANGED = 64  # beyond this many changed files (or half the files) the full pass runs


class Spoiled(Exception):
    """A lineage read from disk held a damaged summary: drop it and run the full pass."""


def named_text(summary: FileSummary) -> bytes:
    """The targets of a file's pending edges, each between newlines (ids hold none), UTF-8."""
    text = "\n" + "\n".join(target for _item, _kind, target in summary.pending) + "\n"
    return text.encode("utf-8", "surrogatepass")


class KeyedSource(Protocol):
    """A summary source that also names a file's content key (the parse cache's session)."""

    def key(self, tree: TreeView, path: str, *, pursuit: bool) -> str: ...

    def summary(self, tree: TreeView, path: str, *, pursuit: bool) -> FileSummary: ...

    def prefetch(self, tree: TreeView, paths: Iterable[str], *, pursuit: bool) -> None: ...


def _structure(summary: FileSummary) -> tuple[tuple[str, str, int, tuple[str, ...]], ...]:
    """Each non-`#` heading's kind, id, line and the ids of the headings above it."""
    ids, parents, kinds, lines = summary.ids, summary.parents, summary.kinds, summary.lines
    shape = []
    for item in summary.specials:
        above: list[str] = []
        up = parents[item]
        while up >= 0:
            above.append(ids[up])
            up = parents[up]
        shape.append((kinds[item], ids[item], lines[item], tuple(above)))
    return tuple(shape)


class Lineage:
    """The cross-file state of one validated tree, to validate its successor from."""

    __slots__ = ("focus_of", "join", "keys", "named", "targets", "undecoded", "verdict")

    def __init__(
        self,
        join: _Join,
        keys: list[str],
        undecoded: list[str],
        *,
        named: list[bytes] | None = None,
        focus_of: dict[int, tuple[tuple[str, int], ...]] | None = None,
    ) -> None:
        """`named` and `focus_of` (each file's edge targets and Focus, by load index) are
        given for a lineage read from disk, whose summaries are not all at hand."""
        join.tree = None  # type: ignore[assignment]  # hold no bytes between validations
        join.source = None  # type: ignore[assignment]
        self.join = join
        self.keys = keys
        self.undecoded = undecoded
        self.verdict: GraphVerdict = join.verdict()
        # target id -> {load index: how many of that file's pending edges name it}; None
        # when `named` answers instead
        self.targets: dict[str, dict[int, int]] | None = None if named is not None else {}
        self.named = named
        if focus_of is None:
            focus_of = {
                loaded.index: loaded.summary.focus for loaded in join.loaded if loaded.summary.focus
            }
        self.focus_of = focus_of  # load index -> the file's Focus (target, line), when any
        if named is None:
            for loaded in join.loaded:
                self.index_edges(loaded.index, loaded.summary, 1)

    @property
    def profile(self) -> Profile:
        return self.join.profile

    @classmethod
    def keep(cls, join: _Join, source: KeyedSource) -> Lineage | None:
        """The lineage of a finished full pass; None when it may not be advanced (a duplicate
        id makes every outcome depend on the load order)."""
        if any(loaded.dropped is not None for loaded in join.loaded):
            return None
        tree = join.tree
        keys = [
            source.key(tree, loaded.path, pursuit=loaded.tree == PURSUIT) for loaded in join.loaded
        ]
        undecoded = [source.key(tree, path, pursuit=p) for path, p in join.undecoded]
        return cls(join, keys, undecoded)

    def index_edges(self, index: int, summary: FileSummary, step: int) -> None:
        targets = self.targets
        if targets is None:
            if step > 0 and self.named is not None:
                self.named[index] = named_text(summary)
            return
        for _item, _kind, target in summary.pending:
            files = targets.get(target)
            if files is None:
                files = targets[target] = {}
            count = files.get(index, 0) + step
            if count:
                files[index] = count
            else:
                del files[index]
                if not files:
                    del targets[target]

    def changes(self, tree: TreeView, source: KeyedSource) -> list[tuple[int, str]] | None:
        """The loaded files whose content changed, with their new keys; None when the step
        cannot be taken (see the module's list). Changes nothing."""
        join = self.join
        for path, mode in join.consulted.items():
            entry = tree.get(path)
            if (None if entry is None else entry.mode) != mode:
                return None
        for (path, pursuit), key in zip(join.undecoded, self.undecoded, strict=True):
            if source.key(tree, path, pursuit=pursuit) != key:
                return None
        limit = min(MAX_CHANGED, len(join.loaded) // 2 + 1)
        changed: list[tuple[int, str]] = []
        keys = self.keys
        for loaded in join.loaded:
            key = source.key(tree, loaded.path, pursuit=loaded.tree == PURSUIT)
            if key != keys[loaded.index]:
                changed.append((loaded.index, key))
                if len(changed) > limit:
                    return None
        return changed

    def advance(
        self, tree: TreeView, source: KeyedSource, changed: list[tuple[int, str]]
    ) -> GraphVerdict | None:
        """The verdict of `tree`, whose files differ from this lineage's by `changed`; this
        lineage becomes `tree`'s. None when the step cannot be taken: the lineage is then
        spoiled and must be dropped."""
        if not changed:
            return self.verdict
        join = self.join
        owner = join.owner
        touched: set[str] = set()
        fresh: list[tuple[_Loaded, FileSummary]] = []
        for index, _key in changed:
            loaded = join.loaded[index]
            new = source.summary(tree, loaded.path, pursuit=loaded.tree == PURSUIT)
            old = loaded.summary
            if not new.decoded or _structure(new) != _structure(old):
                return None
            ids = set(new.ids)
            if len(ids) != len(new.ids):
                return None
            before = set(old.ids)
            added, removed = ids - before, before - ids
            if any(item_id in owner for item_id in added):
                return None
            for item_id in removed:
                del owner[item_id]
            owner.update(zip(added, repeat(index)))
            touched |= added
            touched |= removed
            fresh.append((loaded, new))
        again: set[int] = set()
        for loaded, new in fresh:
            self.index_edges(loaded.index, loaded.summary, -1)
            loaded.summary = new
            self.index_edges(loaded.index, new, 1)
            again.add(loaded.index)
            found = join.local_problems(loaded)
            if found:
                join.local[loaded.index] = found
            else:
                join.local.pop(loaded.index, None)
        again |= self.naming(touched)
        for index in again:  # edges read the summaries and the id map, not the tree
            found = join.edges(join.loaded[index])
            if found:
                join.edge_found[index] = found
            else:
                join.edge_found.pop(index, None)
        for loaded, new in fresh:
            if new.focus:
                self.focus_of[loaded.index] = new.focus
            else:
                self.focus_of.pop(loaded.index, None)
        if join.profile.focus:  # in load order, each file's in its order (as `record` adds)
            join.focus = [
                (target, join.loaded[index].path, line)
                for index in sorted(self.focus_of)
                for target, line in self.focus_of[index]
            ]
            join.focus_found = join.check_focus()
        for index, key in changed:
            self.keys[index] = key
        self.verdict = join.verdict()
        return self.verdict

    def naming(self, ids: set[str]) -> set[int]:
        """The load indexes of the files whose pending edges name one of `ids`."""
        if self.targets is not None:
            found: set[int] = set()
            for item_id in ids:
                found.update(self.targets.get(item_id, ()))
            return found
        named = self.named or []
        return {
            index
            for needle in (f"\n{item_id}\n".encode("utf-8", "surrogatepass") for item_id in ids)
            for index, text in enumerate(named)
            if needle in text
        }
