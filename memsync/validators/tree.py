"""Tree views: what a validator sees of a tree (path -> entry, and bytes on request).

A tree view is built by an adapter (a Git commit, a work tree, an extracted package, an
in-memory dict in tests). Validators only read from it; bytes are fetched in batches
through a `BlobSource` that the adapter supplies, so validation never runs git itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple, Protocol

from memsync.values import value

MODE_FILE = 0o100644
MODE_EXECUTABLE = 0o100755
MODE_SYMLINK = 0o120000
MODE_GITLINK = 0o160000
MODE_SPECIAL = 0  # a FIFO, socket or device node seen in a work tree


class Entry(NamedTuple):
    """One leaf of a tree: its Git-style mode, size in bytes, and where its bytes live.

    A NamedTuple rather than a frozen dataclass: trees hold tens of thousands of entries and
    tuples are built several times faster.
    """

    mode: int
    size: int | None = None
    oid: str | None = None
    data: bytes | None = None

    @property
    def is_regular(self) -> bool:
        return self.mode in (MODE_FILE, MODE_EXECUTABLE)


class BlobSource(Protocol):
    """Reads blob bytes by object id, many at a time."""

    def read_many(self, oids: Sequence[str]) -> Mapping[str, bytes]: ...


class NoBlobs:
    """A source for trees whose entries carry their bytes inline."""

    def read_many(self, oids: Sequence[str]) -> Mapping[str, bytes]:
        if oids:
            raise KeyError(f"no blob source for {len(oids)} object(s)")
        return {}


class Listing(dict[str, Entry]):
    """path -> Entry as a tree listing gave it, and the paths it listed more than once.

    A Git tree can hold two entries with one name (git's object check calls that
    `duplicateEntries`); a plain dict would keep one of them silently.
    """

    def __init__(
        self, entries: Iterable[tuple[str, Entry]] = (), duplicates: Iterable[str] = ()
    ) -> None:
        super().__init__(entries)
        self.duplicates: tuple[str, ...] = tuple(sorted(set(duplicates)))


class TreeView:
    """A read-only tree: `entries` maps a slash-separated path to its Entry.

    `duplicates` names the paths the tree holds more than once; by default those of a
    `Listing`, else none. `sha256_ids`: the entries' object ids are the SHA-256 of their
    bytes (a view package's, from its manifest), not Git object ids; the parse cache keys
    the two kinds apart (a Git SHA-256 blob id is the hash of a header and the bytes).
    """

    def __init__(
        self,
        entries: Mapping[str, Entry],
        source: BlobSource | None = None,
        *,
        duplicates: Iterable[str] | None = None,
        sha256_ids: bool = False,
    ) -> None:
        self.sha256_ids = sha256_ids
        self.entries: Mapping[str, Entry] = dict(entries)
        if duplicates is None:
            duplicates = entries.duplicates if isinstance(entries, Listing) else ()
        self.duplicates: tuple[str, ...] = tuple(sorted(set(duplicates)))
        self._source: BlobSource = source or NoBlobs()
        self._cache: dict[str, bytes] = {}

    @classmethod
    def from_bytes(cls, files: Mapping[str, bytes], mode: int = MODE_FILE) -> TreeView:
        """An in-memory tree of regular files (tests, extracted packages)."""
        return cls({p: Entry(mode=mode, size=len(b), data=b) for p, b in files.items()})

    def __contains__(self, path: object) -> bool:
        return path in self.entries

    def get(self, path: str) -> Entry | None:
        return self.entries.get(path)

    def preload(self, paths: Iterable[str]) -> None:
        """Fetch the bytes of many regular files in one batch."""
        wanted: list[str] = []
        for path in paths:
            entry = self.entries.get(path)
            if entry is None or entry.data is not None or not entry.is_regular:
                continue
            if entry.oid is not None and entry.oid not in self._cache:
                wanted.append(entry.oid)
        if wanted:
            self._cache.update(self._source.read_many(sorted(set(wanted))))

    def content(self, path: str) -> bytes:
        """The bytes of a regular file; KeyError when the path is absent or not a file."""
        entry = self.entries[path]
        if entry.data is not None:
            return entry.data
        if not entry.is_regular or entry.oid is None:
            raise KeyError(path)
        if entry.oid not in self._cache:
            self._cache.update(self._source.read_many([entry.oid]))
        return self._cache[entry.oid]


@value
class Change:
    """One path changed by one commit. `entry` is the new side; None for a deletion.

    A merge's changes are listed once per parent. `diff` counts the diffs listed for the
    commit (0 for the first); `parents` are the commit's parents when the listing named
    them (None when it did not); `created` says whether the path was absent on that
    parent's side (None when unknown). With every parent's diff listed, diff `i` is against
    `parents[i]`; git leaves out empty diffs, so with fewer diffs than parents it is not
    known which parent a diff is against.
    """

    commit: str
    path: str
    entry: Entry | None
    diff: int = 0
    parents: tuple[str, ...] | None = None
    created: bool | None = None


def describe(entry: Entry) -> str:
    """What a non-regular entry is, for messages."""
    if entry.mode == MODE_SYMLINK:
        return "a symbolic link"
    if entry.mode == MODE_GITLINK:
        return "a submodule"
    return f"a special file, mode {entry.mode:06o}"
