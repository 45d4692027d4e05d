"""Tree views: what a validator sees of a tree (path -> entry, and bytes on request).

A tree view is built by an adapter (a Git commit, a work tree, an extracted package, an
in-memory dict in tests). Validators only read from it; bytes are fetched in batches
through a `BlobSource` that the adapter supplies, so validation never runs git itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

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


class TreeView:
    """A read-only tree: `entries` maps a slash-separated path to its Entry."""

    def __init__(self, entries: Mapping[str, Entry], source: BlobSource | None = None) -> None:
        self.entries: Mapping[str, Entry] = dict(entries)
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


@dataclass(frozen=True)
class Change:
    """One path changed by one commit. `entry` is the new side; None for a deletion."""

    commit: str
    path: str
    entry: Entry | None
