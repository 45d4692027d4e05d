"""Tree listing records: a git tree's listing on disk, by tree id, used only when it hashes
to that id.

A fresh CLI process that admits one incoming commit derives the candidate's listing from
the listing of the tree its root is at and git's diff (`transports.gittree`); without a
record it lists that start tree in full (`git ls-tree -r`, O(entries): some tens of
milliseconds at 10k files) although one file changed. This store keeps each listing the
process made (listed in full, or derived) so that the next process reads it instead.

A record is never an authority. Before a listing read from one is used, its paths, modes
and object ids are hashed into git tree objects, directory by directory, in git's order,
exactly as git names a tree (`tree_id`): the listing is used only when that names the
tree asked for and every leaf has a mode git lists a leaf with (the id binds each
entry's mode, but a subtree named as a leaf, mode 040000 and its id, hashes as the
leaves below it do; git lists every leaf with its canonical mode), so it is that tree's
listing (a record of another tree, of a tree with a duplicate entry, or damaged in any
way that keeps its checksum, is not; nor one in a repository of the other object
format). What the tree id does not cover is each blob's size, which git's listing gives
(`ls-tree -l`): a record holds the sizes the listing it was made from had (blob ids name
their bytes, so a size cannot change), read only from a private file of ours
(`recordfile`), checksummed (CRC-32: it finds damage, which is all a checksum anyone can
recompute can find; the tree id is what no one can forge), with a digest of the code
that writes it.
Anything truncated, corrupt, foreign, oversized or not a private regular file of ours is
ignored: a miss lists the tree in full as before.

Saving costs the change, not the tree: a derived listing's record is a delta (its full
record's id and every path that differs from it), as tree shape records are
(`shapestore.py`); deltas never chain, and one naming more than `DELTA_MAX` paths is
written in full. Written atomically, 0600 in a 0700 directory, pruned to the `KEEP` most
recent (`MAX_TOTAL_BYTES` in all); each delta written touches its full record.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from array import array
from collections.abc import Mapping, Sequence
from itertools import chain, compress, groupby, repeat
from operator import itemgetter, not_
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.memodigest import blake2b, sha256
from memsync.validators import recordfile
from memsync.validators.gcpause import gc_paused
from memsync.validators.tree import (
    MODE_EXECUTABLE,
    MODE_FILE,
    MODE_GITLINK,
    MODE_SYMLINK,
    Entry,
    Listing,
)

FORMAT = b"MSTL2"
DIRECTORY = "listings"  # under the parse cache's directory
MAX_RECORD_BYTES = 128 * 1024 * 1024
MAX_TOTAL_BYTES = 512 * 1024 * 1024  # all records kept, the newest always
KEEP = 32
DELTA_MAX = 1024  # paths a delta names before the tree's record is written in full
_IN_PLACE = 16  # a delta of up to this many paths finds each by a scan of the names
MODE_TREE = 0o040000
# The modes git lists a leaf with (`ls-tree -r`: every entry's canonical mode; a tree is
# not a leaf). A record's entries hash to its tree's id with any mode, a subtree named as
# a leaf included (mode 040000 and the subtree's id: the leaves below it left out); no
# listing git gives has one, so no record with one is a listing.
_LEAF_MODES = frozenset((MODE_FILE, MODE_EXECUTABLE, MODE_SYMLINK, MODE_GITLINK))
_NAME = re.compile(r"[0-9a-f]{16}-(?:[0-9a-f]{40}|[0-9a-f]{64})\.listing")
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_IDS = {20: re.compile(rb".{20}", re.DOTALL), 32: re.compile(rb".{32}", re.DOTALL)}
_ERRORS = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    OverflowError,
    RecursionError,
    UnicodeError,
)

if TYPE_CHECKING:  # CPython's own SHA-1 is hashlib's digest (typeshed names no `_sha1`)
    from hashlib import sha1
else:
    try:  # no OpenSSL loaded by a cold process (see `memodigest`)
        from _sha1 import sha1
    except ImportError:  # another interpreter: the same digest
        from hashlib import sha1

# A path's row in a delta: (mode, size, object id), or None when it is deleted.
_Row = tuple[int, int | None, str] | None


def version_digest() -> bytes:
    """Names the code that writes and checks a record (a change makes every record foreign)."""
    digest = blake2b(FORMAT, digest_size=16)
    digest.update(repr(sys.version_info[:2]).encode())
    for module in (sys.modules[__name__], recordfile):
        source = getattr(module, "__file__", None)
        digest.update(Path(source).read_bytes() if source else b"-")
    return digest.digest()


def tree_id(entries: Mapping[str, Entry], oid_length: int) -> str | None:
    """The id git gives the tree whose leaves are `entries` (paths as `gitparse` decodes
    them, each leaf's mode and object id), with object ids of `oid_length` hex digits
    (40: SHA-1, 64: SHA-256); None when an entry cannot be part of a git tree (no object
    id, an empty name, a path below a leaf).

    Column by column (a 10k-entry tree is hashed on every fresh sync that reads a record):
    the object ids in one `bytes.fromhex`, the names in one encode, each directory's
    object joined whole; only the entries below a directory are grouped one by one."""
    width = oid_length // 2
    if not entries:
        return _hashed([], [], [], width)
    values = entries.values()
    oids = list(map(itemgetter(2), values))
    if set(map(type, oids)) != {str} or set(map(len, oids)) != {oid_length}:
        return None
    try:
        joined = bytes.fromhex("".join(oids))
    except ValueError:
        return None
    binary = [joined[at : at + width] for at in range(0, len(joined), width)]
    names = "\0".join(entries).encode("utf-8", "surrogateescape").split(b"\0")
    return _hashed(names, list(map(itemgetter(0), values)), binary, width)


def _hashed(  # noqa: PLR0915
    names: list[bytes],
    modes: list[int],
    binary: list[bytes],
    width: int,
    text: bytes | None = None,
) -> str | None:
    """`tree_id` of the leaves named `names` (encoded paths; `text`, when given, is them
    with a NUL between two) with `modes` and object ids `binary` (each `width` bytes), in
    one order."""
    new = sha1 if width == 20 else sha256
    if not names:
        return new(b"tree 0\0").hexdigest()
    if len(names) != len(binary) or len(modes) != len(names) or not all(names):
        return None  # a NUL in a path, or an empty one
    if set(map(len, binary)) != {width}:
        return None
    heads = {mode: b"%o " % mode for mode in set(modes)}
    if len(heads) == 1:  # (every entry a plain file, say)
        rows = [heads[modes[0]]] * len(modes)
    else:
        rows = list(map(heads.__getitem__, modes))
    # directory -> (sort keys, heads, names, object ids) of its rows
    dirs: dict[bytes, tuple[list[bytes], list[bytes], list[bytes], list[bytes]]]
    if b"/" not in (b"\0".join(names) if text is None else text):  # (one test of them all)
        dirs = {b"": (names, rows, names, binary)}
    else:  # grouped by directory at C level: Python runs once a directory, not an entry
        split = list(map(bytes.rpartition, names, repeat(b"/")))
        parents = list(map(itemgetter(0), split))
        leafs = list(map(itemgetter(2), split))
        if b"" in leafs or any(map(bytes.startswith, names, repeat(b"/"))):
            return None  # (git never lists "/a": it is not "a"; nor "a/")
        dirs = {b"": ([], [], [], [])}
        order = sorted(range(len(names)), key=parents.__getitem__)  # (stable: listing order)
        for parent, group in groupby(order, key=parents.__getitem__):
            at = list(group)
            mine = list(map(leafs.__getitem__, at))
            found = dirs.get(parent)
            if found is None:
                found = dirs[parent] = ([], [], [], [])
                up = parent
                while up:  # every directory above is one too
                    up = up.rpartition(b"/")[0]
                    if up in dirs:
                        break
                    dirs[up] = ([], [], [], [])
            found[0].extend(mine)
            found[1].extend(map(rows.__getitem__, at))
            found[2].extend(mine)
            found[3].extend(map(binary.__getitem__, at))
    leaves = set(names) if len(dirs) > 1 else set()
    for path in sorted(dirs, key=lambda p: p.count(b"/") if p else -1, reverse=True):
        keys, row_heads, row_names, row_oids = dirs[path]
        if keys != sorted(keys):  # git's order: a directory sorts as its name and "/"
            order = sorted(range(len(keys)), key=keys.__getitem__)
            row_heads = list(map(row_heads.__getitem__, order))
            row_names = list(map(row_names.__getitem__, order))
            row_oids = list(map(row_oids.__getitem__, order))
        first = row_heads[0] if row_heads else b""
        if row_heads.count(first) == len(row_heads):  # one mode: its head joins the rows
            pairs = map(b"\0".join, zip(row_names, row_oids, strict=True))
            body = first + first.join(pairs)
        else:
            body = b"".join(chain.from_iterable(zip(row_heads, row_names, repeat(b"\0"), row_oids)))
        digest = new(b"tree %d\0%s" % (len(body), body)).digest()
        if not path:
            return digest.hex()
        parent, _, leaf = path.rpartition(b"/")
        if path in leaves or not leaf:
            return None  # a file and a directory of one name: not one git tree
        above = dirs[parent]
        above[0].append(leaf + b"/")
        above[1].append(b"40000 ")
        above[2].append(leaf)
        above[3].append(digest)
    return None  # pragma: no cover - the root is always among `dirs`


class ListingStore(recordfile.Store):
    """Tree listings in `<directory>`, one file per tree id."""

    FORMAT = FORMAT
    NAMES = _NAME
    KEEP = KEEP
    MAX_RECORD_BYTES = MAX_RECORD_BYTES
    MAX_TOTAL_BYTES = MAX_TOTAL_BYTES

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        # The records read or written here, by tree id: the full record each one is (its
        # own id, no delta) or names, and its delta from it.
        self._chains: dict[str, tuple[str, dict[str, _Row]]] = {}

    def version_digest(self) -> bytes:
        return version_digest()

    def _path(self, oid: str) -> Path | None:
        if not isinstance(oid, str) or not _OID.fullmatch(oid):
            return None
        return self.directory / f"{self.version.hex()[:16]}-{oid}.listing"

    def load(self, oid: str) -> Listing | None:
        """Tree `oid`'s listing, when a record of it is here and hashes to `oid`."""
        with contextlib.suppress(OSError, *_ERRORS), gc_paused():  # (acyclic: nothing to find)
            found = self._read(oid)
            if found is None:
                return None
            (names, modes, sizes, binary, width, texts), chain = found
            text = None if texts is None else texts[0]
            if len(oid) != 2 * width or _hashed(names, modes, binary, width, text) != oid:
                return None  # not that tree's listing: never used
            listing = _listing(names, modes, sizes, binary, texts)
            self._chains[oid] = chain
            self.loads += 1
            return listing
        return None

    def _read(self, oid: str) -> tuple[_Columns, tuple[str, dict[str, _Row]]] | None:
        """Tree `oid`'s recorded columns (a delta's: its full record's, changed by it)."""
        found = self._body(oid)
        if found is None:
            return None
        body, tail = found
        if "base" not in body:
            return _columns(body, tail), (oid, {})
        full_oid, rows = body["base"], body["delta"]
        full = self._body(full_oid) if isinstance(full_oid, str) else None
        if full is None or "base" in full[0] or not isinstance(rows, list) or tail:
            return None
        delta: dict[str, _Row] = {}
        for row in rows:
            if not isinstance(row, list) or not row or not isinstance(row[0], str):
                return None
            if row[0] in delta:
                return None  # a path once
            delta[row[0]] = _row(row[1:])
        return _changed(_columns(*full), delta), (full_oid, delta)

    def _body(self, oid: str) -> tuple[dict[str, Any], bytes] | None:
        """The checked body of tree `oid`'s record (which must say it is that tree's): its
        JSON line and the bytes after it."""
        path = self._path(oid)
        raw = None if path is None else self.read(path)
        if raw is None:
            return None
        line = raw.find(b"\n")
        body = json.loads(raw[:line])
        if line < 0 or not isinstance(body, dict) or body.get("tree") != oid:
            return None
        return body, raw[line + 1 :]

    def save(
        self,
        oid: str,
        entries: Listing,
        base: tuple[str, Sequence[tuple[str, Entry | None]]] | None = None,
    ) -> None:
        """Record `entries` as tree `oid`'s listing (best effort: an unwritable store only
        misses); as a delta when it is tree `base[0]`'s (read or written here) changed by
        `base[1]`. A listing with a duplicate entry is not recorded (no record of it could
        hash to its tree's id)."""
        if entries.duplicates or oid in self._chains:
            return
        with contextlib.suppress(OSError, *_ERRORS):  # never fails a listing
            path = self._path(oid)
            if path is None:
                return
            if base is not None and self._save_delta(path, oid, base):
                return
            values = entries.values()
            oids = list(map(itemgetter(2), values))
            names = "\0".join(entries).encode("utf-8", "surrogateescape")
            sizes = list(map(itemgetter(1), values))
            if None in sizes:  # a submodule's: -1 in the column
                sizes = [-1 if size is None else size for size in sizes]
            columns = array("q", map(itemgetter(0), values)) + array("q", sizes)
            body = {"tree": oid, "count": len(entries), "names": len(names), "width": len(oid) // 2}
            if set(map(len, oids)) - {len(oid)} or sys.byteorder != "little":
                return  # (`bytes.fromhex` refuses a missing id)
            tail = columns.tobytes() + names + bytes.fromhex("".join(oids))
            if self._write(path, body, tail):
                self._chains[oid] = (oid, {})

    def _save_delta(
        self, path: Path, oid: str, base: tuple[str, Sequence[tuple[str, Entry | None]]]
    ) -> bool:
        """Write tree `oid`'s record as a delta; False when it is to be written in full."""
        chain = self._chains.get(base[0])
        full_path = None if chain is None else self._path(chain[0])
        if chain is None or full_path is None:
            return False
        delta = dict(chain[1])
        for changed, entry in base[1]:
            if entry is None:
                delta[changed] = None
            elif entry.oid is None:
                return False
            else:
                delta[changed] = (entry.mode, entry.size, entry.oid)
        if len(delta) > DELTA_MAX:
            return False
        try:
            os.utime(full_path, follow_symlinks=False)  # kept by pruning while it is needed
        except OSError:
            return False
        if chain[0] == oid:  # back at the tree the chain starts from (a revert): its full
            self._chains[oid] = (oid, {})  # record is there; a delta over it would name
            return True  # itself as its base and lose both
        rows = [[p] if now is None else [p, *now] for p, now in delta.items()]
        if not self._write(path, {"tree": oid, "base": chain[0], "delta": rows}):
            return False
        self._chains[oid] = (chain[0], delta)
        self.deltas += 1
        return True

    def _write(self, path: Path, body: dict[str, Any], tail: bytes = b"") -> bool:
        return self.write(path, json.dumps(body, separators=(",", ":")).encode() + b"\n" + tail)


# A record's columns: the encoded paths, modes, sizes, binary object ids, and their width;
# and the paths and the ids as the record holds them, each one text (None once a delta
# changed them).
_Columns = tuple[
    list[bytes], list[int], list[int | None], list[bytes], int, tuple[bytes, bytes] | None
]


def _columns(body: dict[str, Any], tail: bytes) -> _Columns:
    """A full record's columns: after its JSON line, the modes and sizes (8-byte integers,
    little-endian; a size of -1 is none), the paths (NUL between two), the object ids
    (binary); ValueError (a miss) when they are not a listing's."""
    count, cut, width = body["count"], body["names"], body["width"]
    if type(count) is not int or type(cut) is not int or width not in (20, 32):
        raise ValueError("not a listing")
    if len(tail) != 16 * count + cut + width * count or sys.byteorder != "little":
        raise ValueError("not a listing")
    numbers = array("q")
    numbers.frombytes(tail[: 16 * count])
    modes, given = numbers[:count].tolist(), numbers[count:].tolist()
    low = min(given, default=0)
    if low < -1 or not _LEAF_MODES.issuperset(modes):
        raise ValueError("not a listing (a negative size, or a mode git lists no leaf with)")
    if (low == -1 or MODE_GITLINK in modes) and any(
        (size == -1) != (mode == MODE_GITLINK) for mode, size in zip(modes, given, strict=True)
    ):
        raise ValueError("not a listing (a size a submodule lacks, or a blob without one)")
    sizes: list[int | None] = list(given)
    if low == -1:
        sizes = [None if n == -1 else n for n in given]
    text, ids = tail[16 * count : 16 * count + cut], tail[16 * count + cut :]
    names = text.split(b"\0") if count else []
    binary = _IDS[width].findall(ids)  # (C-level: no slice per id here)
    return names, modes, sizes, binary, width, (text, ids)


def _changed(columns: _Columns, delta: Mapping[str, _Row]) -> _Columns:
    """A full record's columns changed by a delta (modified in place, deleted, added at
    the end, as a derived listing changes its base's). A delta that only modifies keeps
    the record's paths as one text, and its ids as one too (changed in place)."""
    names, modes, sizes, binary, width, texts = columns
    ids = None if texts is None else bytearray(texts[1])
    gone: set[int] = set()
    where: dict[bytes, int] | None = None
    for path, now in delta.items():
        name = path.encode("utf-8", "surrogateescape")
        if where is None and len(delta) > _IN_PLACE:
            where = dict(zip(names, range(len(names)), strict=True))
        at = where.get(name, -1) if where is not None else _index(names, name)
        if now is None:
            if at >= 0:
                gone.add(at)  # (else added by an earlier delta this one composes)
            continue
        oid = bytes.fromhex(now[2])
        if len(oid) != width:
            raise ValueError("not an object id")
        if at < 0:
            names.append(name)
            modes.append(now[0])
            sizes.append(now[1])
            binary.append(oid)
            ids = None
        else:
            modes[at], sizes[at], binary[at] = now[0], now[1], oid
            if ids is not None:
                ids[at * width : (at + 1) * width] = oid
    if gone:
        kept = list(map(not_, map(gone.__contains__, range(len(names)))))  # (C-level)
        names, modes = list(compress(names, kept)), list(compress(modes, kept))
        sizes, binary = list(compress(sizes, kept)), list(compress(binary, kept))
        ids = None
    kept_texts = None if texts is None or ids is None else (texts[0], bytes(ids))
    return names, modes, sizes, binary, width, kept_texts


def _index(names: list[bytes], name: bytes) -> int:
    try:
        return names.index(name)
    except ValueError:
        return -1


def _listing(
    names: list[bytes],
    modes: list[int],
    sizes: list[int | None],
    binary: list[bytes],
    texts: tuple[bytes, bytes] | None = None,
) -> Listing:
    """The listing of a record's columns (`texts`: the paths and the ids each as one text,
    when the record's are still them); ValueError when a path is there twice."""
    text, ids = texts if texts is not None else (b"\0".join(names), b"".join(binary))
    paths = text.decode("utf-8", "surrogateescape").split("\0") if names else []
    width = len(binary[0]) if binary else 0
    oids = ids.hex(" ", width).split(" ") if width else []  # (C-level)
    rows = map(tuple.__new__, repeat(Entry), zip(modes, sizes, oids, repeat(None)))
    listing = Listing()
    listing.update(zip(paths, rows, strict=True))
    if len(listing) != len(names):
        raise ValueError("a path twice")
    return listing


def _row(values: list[Any]) -> _Row:
    if not values:
        return None
    mode, size, oid = values
    if type(mode) is not int or not (size is None or type(size) is int) or type(oid) is not str:
        raise ValueError("not a mode, size and object id")
    if mode not in _LEAF_MODES:
        raise ValueError("not a mode git lists a leaf with")
    if (size is None) != (mode == MODE_GITLINK) or (size is not None and size < 0):
        raise ValueError("not a listing's size (a submodule has none, a blob one of 0 or more)")
    return mode, size, oid


# The records a CLI process reads and writes (`cache.open_records` opens them), or None.
RECORDS: ListingStore | None = None
