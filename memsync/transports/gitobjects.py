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
from typing import Any

from memsync.transports.gitenv import OID
from memsync.transports.gitread import load_gitpython

# Past this many packs (a repository nobody has repacked for a long time) a missing object
# means searching too many indexes: git is asked instead.
MAX_PACKS = 64


class ObjectFiles:
    """The objects of one repository's object directory, read through gitdb's loose and pack
    readers, and let go by `close` (a `with` block): gitdb maps pack windows through one
    process-wide manager that keeps them, and their open files, until told to collect; a
    daemon must not hold a pack `git gc` deleted.

    Packs are searched newest first and opened one at a time: each fetch leaves one pack
    (the object check makes git index what it receives), and what a cycle reads is what
    its fetch just brought, so one pack index is usually all that is read.
    """

    def __init__(self, objects: Path) -> None:
        self._objects = objects
        self._packs: list[Path] | None = None  # newest first; [] when unusable
        self._opened: dict[Path, Any] = {}  # pack path -> gitdb PackEntity

    def __enter__(self) -> ObjectFiles:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        opened, self._opened, self._packs = self._opened, {}, []
        if opened:
            for entity in opened.values():
                _untie(entity)
            from gitdb.util import mman  # type: ignore[import-untyped]  # noqa: PLC0415

            mman.collect()  # unmaps the windows no one uses any more, closing their files

    def _pack_paths(self) -> list[Path]:
        if self._packs is None:
            try:
                found = [(p.stat().st_mtime_ns, p) for p in (self._objects / "pack").glob("*.pack")]
            except OSError:
                found = []
            usable = len(found) <= MAX_PACKS
            self._packs = [p for _mtime, p in sorted(found, reverse=True)] if usable else []
        return self._packs

    def _locate(self, oid: str) -> tuple[str, Any, int] | None:
        """Where an object is: ("loose", the loose reader, 0) or ("pack", entity, index)."""
        if not _sha1(oid):
            return None  # SHA-256 repositories: git decides
        binsha = binascii.unhexlify(oid)
        load_gitpython()  # gitdb comes with it; neither starts a process
        if (self._objects / oid[:2] / oid[2:]).is_file():
            from gitdb.db.loose import LooseObjectDB  # type: ignore[import-untyped]  # noqa: PLC0415

            return "loose", LooseObjectDB(str(self._objects)), 0
        for path in self._pack_paths():
            entity = self._opened.get(path)
            if entity is None:
                from gitdb.pack import PackEntity  # type: ignore[import-untyped]  # noqa: PLC0415

                entity = self._opened[path] = PackEntity(str(path))
            index = entity.index().sha_to_index(binsha)
            if index is not None:
                return "pack", entity, index
        return None

    def header(self, oid: str) -> tuple[str, int] | None:
        """(type, size) of an object, without reading a blob's bytes."""
        try:
            found = self._locate(oid)
            if found is None:
                return None
            where, reader, index = found
            if where == "loose":
                info = reader.info(binascii.unhexlify(oid))
            else:
                info = reader.info_at_index(index)
            return info.type.decode("ascii"), int(info.size)
        except Exception:  # anything gitdb cannot read: git decides
            return None

    def read(self, oid: str, limit: int) -> tuple[str, bytes] | None:
        """(type, content) of an object of at most `limit` bytes, checked against its id."""
        found = self.header(oid)
        if found is None or found[1] > limit:
            return None
        try:
            located = self._locate(oid)
            if located is None:
                return None
            where, reader, index = located
            if where == "loose":
                data = reader.stream(binascii.unhexlify(oid)).read()
            else:
                data = reader.stream_at_index(index).read()
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


def _untie(entity: Any) -> None:
    """Drop what a pack reader holds: a pack index keeps bound methods of itself (a cycle
    only the garbage collector would break), and with them its mapped window."""
    try:
        for part in (_held(entity).get("_index"), _held(entity).get("_pack")):
            if part is not None:
                _clear(part)
        _clear(entity)
    except Exception:  # noqa: S110 - another gitdb layout: its windows wait for the collector
        pass


def _held(obj: object) -> dict[str, Any]:
    """The attributes `obj` holds now (in its dict or its slots), none computed lazily."""
    try:  # never `getattr`: gitdb's lazy `__getattr__` would build what it asks for
        found = dict(object.__getattribute__(obj, "__dict__"))
    except AttributeError:  # slots only
        found = {}
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
