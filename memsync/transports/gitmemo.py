"""What the git box remembers between calls, by object id: answers that cannot go stale.

A Git object id names its content, so what git said about one (a commit's tree, a tree's
listing, the diff between two trees, a blob's size and bytes) is true for as long as the
process lives, in any repository that holds the object. Only answers keyed by full object
ids are kept (never by a ref or `HEAD`), in memory only, bounded, least recently used
forgotten first. Nothing is read back from disk: a new process asks git again.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from memsync.transports.gitparse import DiffRecord
from memsync.transports.gitread import KEPT, Recent
from memsync.validators.tree import Entry, Listing
from memsync.values import value

_K = TypeVar("_K")
_V = TypeVar("_V")


class Weighed(Generic[_K, _V]):
    """A thread-safe map that forgets its least recently used keys past a total weight
    (entries, bytes); the newest value is always kept."""

    def __init__(self, limit: int, weight: Callable[[_V], int]) -> None:
        self._limit = limit
        self._weight = weight
        self._held = 0
        self._lock = threading.Lock()
        self._items: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: _K, value: _V) -> None:
        with self._lock:
            old = self._items.pop(key, None)
            if old is not None:
                self._held -= self._weight(old)
            self._items[key] = value
            self._held += self._weight(value)
            while self._held > self._limit and len(self._items) > 1:
                _key, dropped = self._items.popitem(last=False)
                self._held -= self._weight(dropped)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._held = 0


@value
class KeptListing:
    """A tree's listing as git gave it (or as derived from git's diff), and how many leaves
    each directory holds (for the checks a derived listing must pass). Never changed."""

    entries: Listing
    dirs: dict[str, int]


def count_dirs(paths: list[str] | dict[str, Entry]) -> dict[str, int]:
    """Leaves under each directory, at every depth (of a tree whose leaves all lie at its
    top, none: told by one test of all the paths)."""
    dirs: dict[str, int] = {}
    if "/" not in "\0".join(paths):
        return dirs
    for path in paths:
        cut = path.rfind("/")
        while cut > 0:
            prefix = path[:cut]
            dirs[prefix] = dirs.get(prefix, 0) + 1
            cut = path.rfind("/", 0, cut)
    return dirs


# commit (or tree) id -> tree id
TREES: Recent[str, str] = Recent(1 << 14)
# tree id -> its listing; bounded by entries in all
LISTINGS: Weighed[str, KeptListing] = Weighed(2_000_000, lambda kept: len(kept.entries) + 1)
# (old, new) -> the records of `diff-tree -r -t` between them; bounded by records in all
DIFFS: Weighed[tuple[str, str], tuple[DiffRecord, ...]] = Weighed(200_000, lambda d: len(d) + 1)
# blob id -> size
SIZES: Recent[str, int] = Recent(1 << 16)
# blob id -> bytes, blobs up to BLOB_KEPT bytes; bounded by bytes in all
BLOB_KEPT = 1 << 18
BLOBS: Weighed[str, bytes] = Weighed(16 << 20, lambda data: len(data) + 64)
# work tree -> (the revision last listed there, its tree): the base the next listing derives from
LAST: Recent[Path, tuple[str, str]] = Recent(KEPT)


def forget() -> None:
    """Drop everything remembered (tests; a daemon never needs to)."""
    for memo in (LISTINGS, DIFFS, BLOBS):
        memo.clear()
    for recent in (TREES, SIZES, LAST):
        recent.clear()
