"""The parse cache: per-file summaries by content, so a validation parses only what changed.

A summary (`summary.py`) is a function of a file's bytes, its path and whether it is read
as Pursuit, so it is cached under exactly that: the file's content id (its Git blob id when
the tree came from Git, the SHA-256 its package manifest or extractor computed, else the
SHA-256 of its bytes), the path and the Pursuit flag. With the content id known and the
summary cached, the file's bytes are not read at all.

`ParseCache` is a bounded in-memory LRU that is safe to share between threads; the daemon
keeps the module's `default_cache()` for its lifetime. `open_persistent(directory)` adds a
store on disk under it for CLI runs (`cachestore.py`: SQLite, no pickle, bounded, safe to
delete at any time, entries checked and ignored when corrupt or foreign), and the lineage
records of the trees validated (`lineagestore.py`), so that a fresh process joins only the
files that changed since the tree it follows, and the gate's tree shapes by tree id
(`shapestore.py`, for the process's `gate.SHAPES`), and the git box's tree listings by tree
id (`listingstore.py`); `open_records(directory)` adds only those.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Hashable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.atomicfile import private_dir
from memsync.validators.filesummary import FileSummary
from memsync.validators.tree import TreeView

if TYPE_CHECKING:
    from memsync.validators.cachestore import PersistentStore
    from memsync.validators.lineage import Lineage
    from memsync.validators.lineagestore import LineageStore
    from memsync.validators.listingstore import ListingStore
    from memsync.validators.problems import Problem
    from memsync.validators.profile import Profile
    from memsync.validators.shapestore import ShapeStore

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
STATE_CACHE_DIR = "cache"  # under the state dir: `<state_dir>/cache/parse-cache.sqlite3`
MAX_LINEAGES = 4  # cross-file states kept for incremental joins (a few roots, profiles)
MAX_VERDICTS = 16  # auxiliary-file verdicts kept by their inputs' content ids
_CONTENT_ID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


def content_id(tree: TreeView, path: str) -> str | None:
    """The entry's content id when the tree knows one, marked with its kind: `g` and a Git
    object id, or `s` and the SHA-256 of the bytes (in hex).

    A tree whose object ids are not content ids (a work tree names its files by path) gives
    None, and the caller hashes the bytes instead (`s` too).
    """
    entry = tree.get(path)
    if entry is None or entry.oid is None or entry.oid == path:
        return None
    if not _CONTENT_ID.fullmatch(entry.oid):
        return None
    return f"{'s' if tree.sha256_ids else 'g'}{entry.oid}"


def cache_key(content: str, path: str, *, pursuit: bool) -> str:
    """`content` as `content_id` gives it (kind and id)."""
    return f"{'p' if pursuit else 'm'}{content}:{path}"


class _Memory:
    """The LRU itself: summaries by key, bounded by their estimated size, thread-safe."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.entries: OrderedDict[str, tuple[FileSummary, int]] = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()
        self.lineages: list[Lineage] = []  # the most recently used last
        self.verdicts: OrderedDict[Hashable, tuple[Problem, ...]] = OrderedDict()

    def get(self, key: str) -> FileSummary | None:
        with self.lock:
            found = self.entries.get(key)
            if found is None:
                return None
            self.entries.move_to_end(key)
            return found[0]

    def put(self, key: str, summary: FileSummary) -> None:
        weight = summary.weight() + len(key) + 100
        with self.lock:
            old = self.entries.pop(key, None)
            if old is not None:
                self.bytes -= old[1]
            self.entries[key] = (summary, weight)
            self.bytes += weight
            while self.bytes > self.max_bytes and self.entries:
                _, (_, dropped) = self.entries.popitem(last=False)
                self.bytes -= dropped

    def clear(self) -> None:
        with self.lock:
            self.entries.clear()
            self.bytes = 0
            self.lineages.clear()
            self.verdicts.clear()


class ParseCache:
    """Summaries in a bounded in-memory LRU, optionally over a disk store.

    `hits` and `misses` count summaries served and parsed through this object.
    """

    def __init__(
        self,
        max_bytes: int = DEFAULT_MAX_BYTES,
        *,
        store: PersistentStore | None = None,
        memory: _Memory | None = None,
        records: LineageStore | None = None,
    ) -> None:
        self.memory = memory or _Memory(max_bytes)
        self.store = store
        self.records = records  # lineage records on disk, for a fresh process
        self.shapes: ShapeStore | None = None  # the gate's shape records, while open
        self.listings: ListingStore | None = None  # the git box's listing records, while open
        self.hits = 0
        self.misses = 0
        self.joins = 0  # full cross-file passes
        self.steps = 0  # incremental ones (a kept lineage advanced)
        self.restores = 0  # incremental ones from a lineage record read from disk

    def take_lineages(self, profile: Profile) -> list[Lineage]:
        """The kept lineages of `profile`, most recent first, taken out of the cache so that
        one validation owns them; `give_lineages` puts back the ones still good."""
        memory = self.memory
        with memory.lock:
            taken = [kept for kept in memory.lineages if kept.profile == profile]
            memory.lineages = [kept for kept in memory.lineages if kept.profile != profile]
        return taken[::-1]

    def give_lineages(self, lineages: list[Lineage]) -> None:
        """Keep `lineages` (most recent first, as taken), at most MAX_LINEAGES in all."""
        memory = self.memory
        with memory.lock:
            memory.lineages = [*memory.lineages, *lineages[::-1]][-MAX_LINEAGES:]

    def recall(self, key: Hashable) -> tuple[Problem, ...] | None:
        """A verdict remembered under a key naming all its inputs by content (see
        `rightmemory.RootValidator`), or None."""
        memory = self.memory
        with memory.lock:
            found = memory.verdicts.get(key)
            if found is not None:
                memory.verdicts.move_to_end(key)
            return found

    def remember(self, key: Hashable, problems: tuple[Problem, ...]) -> None:
        memory = self.memory
        with memory.lock:
            memory.verdicts[key] = problems
            memory.verdicts.move_to_end(key)
            while len(memory.verdicts) > MAX_VERDICTS:
                memory.verdicts.popitem(last=False)

    def __len__(self) -> int:
        return len(self.memory.entries)

    @property
    def weight(self) -> int:
        """The estimated bytes held in memory."""
        return self.memory.bytes

    def get(self, key: str) -> FileSummary | None:
        return self.memory.get(key)

    def put(self, key: str, summary: FileSummary) -> None:
        self.memory.put(key, summary)

    def clear(self) -> None:
        self.memory.clear()

    def backed_by(
        self, store: PersistentStore | None, records: LineageStore | None = None
    ) -> ParseCache:
        """A cache sharing this one's memory, over `store` (and lineage `records`)."""
        return ParseCache(store=store, memory=self.memory, records=records)

    def session(self) -> CachedSummaries:
        """A summary source for one validation; call `close()` when it is done."""
        return CachedSummaries(self)

    def close(self) -> None:
        """Close the disk store, if any (the memory stays), and stop recording shapes."""
        if self.store is not None:
            self.store.close()
        if self.shapes is not None:
            from memsync.validators.gate import SHAPES  # noqa: PLC0415

            if SHAPES.records is self.shapes:
                SHAPES.records = None
            self.shapes = None
        if self.listings is not None:
            from memsync.validators import listingstore  # noqa: PLC0415

            if listingstore.RECORDS is self.listings:
                listingstore.RECORDS = None
            self.listings = None


class CachedSummaries:
    """The `SummarySource` of one validation: memory, then the disk store, then a parse.

    Lookups in the disk store are batched by `prefetch`, and new summaries are written to it
    in one transaction when the validation ends (`close`).
    """

    def __init__(self, cache: ParseCache) -> None:
        self.cache = cache
        self.fresh: dict[str, FileSummary] = {}
        self.used: list[str] = []
        self.hashed: dict[str, str] = {}  # path -> SHA-256 of bytes read in this session

    def key(self, tree: TreeView, path: str, *, pursuit: bool) -> str:
        """The cache key of a file of `tree` (one tree per session): by its content id, or
        else by the SHA-256 of its bytes, computed once per session."""
        known = content_id(tree, path)
        if known is None:
            known = self.hashed.get(path)
            if known is None:
                import hashlib  # noqa: PLC0415 - OpenSSL's load: a tree without content ids

                digest = hashlib.sha256(tree.content(path)).hexdigest()
                known = self.hashed[path] = f"s{digest}"
        return cache_key(known, path, pursuit=pursuit)

    def summary(self, tree: TreeView, path: str, *, pursuit: bool) -> FileSummary:
        key = self.key(tree, path, pursuit=pursuit)
        found = self.cache.get(key)
        if found is None and self.cache.store is not None:
            found = self.cache.store.get_many([key]).get(key)
            if found is not None:
                self.cache.put(key, found)
        if found is not None:
            self.cache.hits += 1
            self.used.append(key)
            return found
        self.cache.misses += 1
        from memsync.validators.summary import summarize_bytes  # noqa: PLC0415 - the parser

        made = summarize_bytes(tree.content(path), path, pursuit=pursuit)
        self.cache.put(key, made)
        self.fresh[key] = made
        return made

    def prefetch(self, tree: TreeView, paths: Iterable[str], *, pursuit: bool) -> None:
        """Load the summaries of `paths` known by content id from the disk store, and read
        the bytes of every other regular file among them in one batch."""
        unknown: list[str] = []
        keyed: dict[str, str] = {}
        for path in paths:
            entry = tree.get(path)
            if entry is None or not entry.is_regular:
                continue
            known = content_id(tree, path)
            if known is None:
                unknown.append(path)
                continue
            key = cache_key(known, path, pursuit=pursuit)
            if self.cache.get(key) is None:
                keyed[key] = path
        if keyed and self.cache.store is not None:
            for key, summary in self.cache.store.get_many(list(keyed)).items():
                self.cache.put(key, summary)
                del keyed[key]
        tree.preload([*unknown, *keyed.values()])

    def close(self) -> None:
        if self.cache.store is not None and self.fresh:
            self.cache.store.put_many(self.fresh, touched=self.used)
        self.fresh = {}
        self.used = []
        self.hashed = {}


class Uncached:
    """The `SummarySource` that parses every file (no cache)."""

    def summary(self, tree: TreeView, path: str, *, pursuit: bool) -> FileSummary:
        from memsync.validators.summary import summarize_bytes  # noqa: PLC0415 - the parser

        return summarize_bytes(tree.content(path), path, pursuit=pursuit)

    def prefetch(self, tree: TreeView, paths: Iterable[str], *, pursuit: bool) -> None:
        tree.preload(paths)

    def close(self) -> None:
        return None


_DEFAULT = ParseCache()


def default_cache() -> ParseCache:
    """The process's in-memory cache (the daemon's, for its lifetime)."""
    return _DEFAULT


def open_persistent(
    directory: Path, *, max_bytes: int = DEFAULT_MAX_BYTES, records: bool = False
) -> ParseCache:
    """The process's in-memory cache backed by a store on disk under `directory` (created
    0700 when missing), for CLI runs; with `records`, also the lineage and shape records
    (`open_records`). A store that cannot be opened leaves it in memory only. Each call
    opens its own store: `close()` it when done (or let it be collected)."""
    from memsync.validators.cachestore import PersistentStore  # noqa: PLC0415 - SQLite's load

    store = PersistentStore.open(directory, max_bytes=max_bytes)
    if not records:
        return default_cache().backed_by(store)
    return _with_records(directory, store)


def open_records(directory: Path) -> ParseCache:
    """The process's in-memory cache with the records under `directory` only (no summary
    store: a sync reads the record of the tree it follows, and parses what changed): the
    lineage records, the gate's tree shapes (`gate.SHAPES` reads and writes them until
    this cache is closed) and the git box's tree listings (`listingstore.RECORDS`, as
    long). For a CLI process: `close()` it when done."""
    return _with_records(directory, None)


def _with_records(directory: Path, store: PersistentStore | None) -> ParseCache:
    from memsync.validators import listingstore  # noqa: PLC0415
    from memsync.validators.gate import SHAPES  # noqa: PLC0415
    from memsync.validators.lineagestore import DIRECTORY, LineageStore  # noqa: PLC0415
    from memsync.validators.shapestore import DIRECTORY as SHAPES_DIRECTORY  # noqa: PLC0415
    from memsync.validators.shapestore import ShapeStore  # noqa: PLC0415

    try:
        private_dir(directory)  # the cache's directory is ours alone, as the store makes it
    except OSError:
        return default_cache().backed_by(store)
    cache = default_cache().backed_by(store, LineageStore.open(directory / DIRECTORY))
    cache.shapes = SHAPES.records = ShapeStore.open(directory / SHAPES_DIRECTORY)
    listings = listingstore.ListingStore.open(directory / listingstore.DIRECTORY)
    cache.listings = listingstore.RECORDS = listings
    return cache
