"""Object files read in-process: a blob's size or bytes, a commit's tree, no git process.

A sync asks git for the sizes of the blobs its incoming commits bring, the tree of the
upstream commit, and the bytes of the files it validates: a handful of objects, for which
starting `git cat-file` twice costs more than reading them. gitdb (GitPython's pure-Python
object reader, which starts no process) reads them from the repository's loose objects and
packs, deltas included. Only what is certain is answered: SHA-1 ids, a repository with a
bounded number of packs, and bytes that hash to the id asked for (git itself does not
check that on a read); anything else, and any error, answers None, and the box asks
`git cat-file` as before.
"""

from __future__ import annotations

import binascii
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.transports.gitenv import OID
from memsync.transports.gitread import load_gitpython

if TYPE_CHECKING:
    from gitdb import GitDB  # type: ignore[import-untyped]

# Past this many packs (a repository nobody has repacked for a long time) each lookup
# searches too many indexes: git is asked instead.
MAX_PACKS = 64


class ObjectFiles:
    """The objects of one repository's object directory, opened on first use and let go
    by `close` (a `with` block): gitdb maps pack windows through one process-wide manager
    that keeps them, and their open files, until it is told to collect; a daemon must not
    hold a pack `git gc` deleted."""

    def __init__(self, objects: Path) -> None:
        self._objects = objects
        self._db: GitDB | None = None
        self._usable: bool | None = None

    def _open(self) -> GitDB | None:
        if self._usable is None:
            try:
                packs = sum(1 for _ in (self._objects / "pack").glob("*.pack"))
                self._usable = self._objects.is_dir() and packs <= MAX_PACKS
                if self._usable:
                    load_gitpython()
                    from gitdb import GitDB  # noqa: PLC0415 - loaded with GitPython

                    self._db = GitDB(str(self._objects))
            except Exception:  # an unreadable directory, gitdb refusing it: git decides
                self._usable = False
        return self._db if self._usable else None

    def __enter__(self) -> ObjectFiles:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        opened, self._db, self._usable = self._db, None, False
        if opened is not None:
            _untie(opened)
            del opened
            from gitdb.util import mman  # type: ignore[import-untyped]  # noqa: PLC0415

            mman.collect()  # unmaps the windows no one uses any more, closing their files

    def header(self, oid: str) -> tuple[str, int] | None:
        """(type, size) of an object, without reading a blob's bytes."""
        db = self._open()
        if db is None or not _sha1(oid):
            return None
        try:
            info = db.info(binascii.unhexlify(oid))
            return info.type.decode("ascii"), int(info.size)
        except Exception:  # missing here, or anything gitdb cannot read: git decides
            return None

    def read(self, oid: str, limit: int) -> tuple[str, bytes] | None:
        """(type, content) of an object of at most `limit` bytes, checked against its id."""
        found = self.header(oid)
        db = self._db
        if found is None or db is None or found[1] > limit:
            return None
        try:
            data = db.stream(binascii.unhexlify(oid)).read()
        except Exception:  # a broken delta chain, an unreadable pack: git decides
            return None
        kind, size = found
        framed = f"{kind} {size}\0".encode("ascii") + data
        if len(data) != size or hashlib.sha1(framed).hexdigest() != oid:  # noqa: S324 - git ids
            return None
        return kind, data

    def commit_tree(self, oid: str) -> str | None:
        """The tree id a commit names."""
        found = self.read(oid, 1 << 20)
        if found is None or found[0] != "commit" or not found[1].startswith(b"tree "):
            return None
        tree = found[1][5 : found[1].find(b"\n")].decode("ascii", "replace")
        return tree if _sha1(tree) else None


def _untie(db: GitDB) -> None:
    """Drop what the pack readers hold: a pack index keeps bound methods of itself (a
    cycle only the garbage collector would break), and with them its mapped window."""
    try:
        for sub in _held(db).get("_dbs") or ():
            for item in _held(sub).get("_entities") or ():
                entity = item[1]
                for part in (_held(entity).get("_index"), _held(entity).get("_pack")):
                    if part is not None:
                        _clear(part)
                _clear(entity)
                item.clear()
    except Exception:  # noqa: S110 - another gitdb layout: its windows wait for the collector
        pass


def _held(obj: object) -> dict[str, Any]:
    """The attributes `obj` holds now (in its dict or its slots), none computed lazily."""
    found = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for name in getattr(cls, "__slots__", ()):
            try:
                found[name] = object.__getattribute__(obj, name)
            except AttributeError:
                continue
    return found


def _clear(obj: object) -> None:
    for name in _held(obj):
        try:
            object.__delattr__(obj, name)
        except AttributeError:
            continue


def _sha1(oid: str) -> bool:
    return len(oid) == 40 and OID.fullmatch(oid) is not None
