"""Tree shape records: a validated tree's whole-tree name verdict on disk, by tree id.

The gate keeps each validated tree's `TreeShape` (every path's name, mode and size
problems, and its folded paths for clashes) in memory by the tree's Git object id, and
derives the next tree's from it and git's diff (`gate.tree_shape`). A fresh CLI process
has none, and would check every name of the first tree it lists again (O(entries): some
hundreds of milliseconds at 10k files). This store keeps that same shape on disk, one
file per tree, so that the process reads the shape of the tree it starts from.

A record is a cache, never an authority. It is found by the tree id, with a digest of the
code that decides (the gate's modules, the format, the Python version) and of the policy,
and checksummed (CRC-32, `recordfile.Store`: it finds damage); and it holds every path with
its mode and size, which must be exactly the
listing's at hand (all that a shape's verdict depends on: a record copied under another
tree's id is not used); anything truncated, corrupt, foreign, oversized, not a private
regular file of ours or not shaped like a shape is ignored and the shape is computed from
the entries. Written atomically, 0600 in a 0700 directory, pruned to the
`KEEP` most recent (`MAX_TOTAL_BYTES` in all). A record may be read ahead (`read_ahead`:
everything checked that needs no listing, say while git lists the tree); the `load` that
follows runs the checks against the listing at hand, as any load does.

A full record is a JSON line of what is small (the tree, the policy, the flagged paths,
the crowded folded prefixes) and its columns in binary after it: modes, sizes and counts
as 8-byte integers, the leaf flags as bytes, the paths and the folded prefixes with their
spellings each as one UTF-8 text (NUL between two), so that a fresh process decodes a
10k-path shape with a few C-level splits rather than a JSON parse of every path (issue 18).

Saving costs the change, not the tree. The record of a tree that the gate derived from a
recorded tree (`gate.tree_shape`: the base's shape plus git's diff) is written as a delta:
the id of a full record (the base's own, or the one the base's delta names) and every path
that differs from it, with its mode and size (or its deletion). Reading one reads that full
record, applies the delta to its listing (which must then be exactly the listing at hand,
as for a full record) and derives the shape from the full one's, as the gate derives it
in memory (`TreeShape.derive`, property-tested equal to the full computation). Deltas
never chain: a delta of a delta is the full record's delta composed with the new diff,
written in full once it names more than `DELTA_MAX` paths. Each delta written touches its
full record, so that pruning (by age) keeps it while a delta needs it; a delta whose full
record is gone, damaged or foreign is ignored like any other bad record.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import threading
from array import array
from collections.abc import Callable, Mapping, Sequence
from itertools import compress
from operator import itemgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync.memodigest import blake2b
from memsync.validators import collisions, paths, policy, problems, recordfile, tree
from memsync.validators.collisions import FoldedTree, Table
from memsync.validators.gcpause import gc_paused
from memsync.validators.problems import Problem
from memsync.validators.tree import Entry

if TYPE_CHECKING:
    from memsync.validators.gate import TreeShape
    from memsync.validators.policy import SyncPolicy

FORMAT = b"MSTS2"
DIRECTORY = "shapes"  # under the parse cache's directory
MAX_RECORD_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024  # all records kept, the newest always
KEEP = 32  # as many as lineage records (one per validated tree id)
READ_WAIT = 5.0  # seconds a `load` waits at most for the record being read ahead
DELTA_MAX = 1024  # paths a delta names before the tree's record is written in full
_IN_PLACE = 16  # a delta of up to this many modifications is checked in the columns' order
_NAME = re.compile(r"[0-9a-f]{16}-(?:[0-9a-f]{40}|[0-9a-f]{64})\.shape")
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_ERRORS = (
    ValueError,
    TypeError,
    KeyError,
    IndexError,
    AttributeError,
    OverflowError,
    RecursionError,
)
_TEXTS = ("paths", "keys", "spellings")  # a full record's text columns, in its tail's order


def version_digest() -> bytes:
    """Names the code that decides a shape (a change makes every record foreign)."""
    digest = blake2b(FORMAT, digest_size=16)
    digest.update(repr(sys.version_info[:2]).encode())
    gate = sys.modules.get("memsync.validators.gate")
    modules = (collisions, paths, policy, problems, tree, recordfile, sys.modules[__name__], gate)
    for module in modules:
        source = getattr(module, "__file__", None)
        digest.update(Path(source).read_bytes() if source else b"-")
    return digest.digest()


class ShapeStore(recordfile.Store):
    """Tree shapes in `<directory>`, one file per tree id and policy."""

    FORMAT = FORMAT
    NAMES = _NAME
    KEEP = KEEP
    MAX_RECORD_BYTES = MAX_RECORD_BYTES
    MAX_TOTAL_BYTES = MAX_TOTAL_BYTES

    def __init__(self, directory: Path) -> None:
        super().__init__(directory)
        # The records read or written here, by file name: the full record each one is (its
        # own id, no delta) or names, and its delta from it (path -> (mode, size) or None).
        self._chains: dict[str, tuple[str, dict[str, _Row]]] = {}
        self._ahead: dict[str, _Prepared | None] = {}  # records read ahead (`read_ahead`)
        # The record being read ahead on another thread (`expect`), set once it is read.
        self._reading: dict[str, threading.Event] = {}

    def version_digest(self) -> bytes:
        return version_digest()

    def _path(self, oid: str, rules: SyncPolicy) -> Path | None:
        if not isinstance(oid, str) or not _OID.fullmatch(oid):
            return None
        digest = blake2b(self.version, digest_size=8)
        digest.update(repr(rules).encode())
        return self.directory / f"{digest.hexdigest()}-{oid}.shape"

    def load(self, oid: str, rules: SyncPolicy, entries: Mapping[str, Entry]) -> TreeShape | None:
        """The recorded shape of tree `oid` under `rules`, whose listing is `entries`."""
        from memsync.validators.gate import TreeShape  # noqa: PLC0415 - gate imports this

        path = self._path(oid, rules)
        if path is None:
            return None
        reading = self._reading.pop(path.name, None)
        if reading is not None:  # being read ahead: waited for (not read twice)
            reading.wait(READ_WAIT)
        if path.name in self._ahead:  # read (and checked in itself) by `read_ahead`
            prepared = self._ahead.pop(path.name)
        else:
            prepared = self._prepare(path, oid, rules)
        if prepared is None:
            return None
        try:
            found = _fit(prepared, rules, entries)
        except _ERRORS:
            return None
        if found is None:
            return None
        folded, flagged, chain = found
        self._chains[path.name] = chain
        self.loads += 1
        return TreeShape(folded, flagged)

    def read_ahead(self, oid: str, rules: SyncPolicy) -> None:
        """Read tree `oid`'s record now, with every check that does not need the tree's
        listing (its header, checksum, delta rows, its full record's columns, decoded),
        for the `load` of that tree: it then runs only the checks against the listing at
        hand (which may still be being listed meanwhile). Never raises; a record it cannot
        read is not used by that `load`, as any other."""
        path = self._path(oid, rules)
        if path is not None:  # one at a time: a record read ahead and never asked is let go
            self._ahead = {path.name: self._prepare(path, oid, rules)}

    def expect(self, oid: str, rules: SyncPolicy) -> Callable[[], None]:
        """`read_ahead(oid, rules)`, to be run on another thread: until it has run (at most
        `READ_WAIT` seconds), a `load` of that record waits for it rather than reading the
        record again itself."""
        path = self._path(oid, rules)
        done = threading.Event()
        if path is not None:
            self._reading = {path.name: done}

        def read() -> None:
            try:
                self.read_ahead(oid, rules)
            finally:
                done.set()

        return read

    def _prepare(self, path: Path, oid: str, rules: SyncPolicy) -> _Prepared | None:
        """The record at `path` (tree `oid`'s under `rules`) read and checked in itself: a
        full record's body and columns, or a delta's full record and rows (see `_fit`)."""
        with contextlib.suppress(OSError, *_ERRORS), gc_paused():  # (acyclic: nothing to find)
            found = self._body(path, oid, rules)
            if found is None:
                return None
            body, tail = found
            if "base" not in body:
                columns = _columns(body, tail)
                return None if columns is None else (body, columns, oid, None)
            full_oid, rows = body["base"], body["delta"]
            full_path = self._path(full_oid, rules) if isinstance(full_oid, str) else None
            got = None if full_path is None else self._body(full_path, full_oid, rules)
            if got is None or "base" in got[0] or not isinstance(rows, list) or tail:
                return None
            full, full_tail = got
            delta: dict[str, _Row] = {}
            for row in rows:
                if not isinstance(row, list) or not row or not isinstance(row[0], str):
                    return None
                if row[0] in delta:
                    return None  # a path once
                delta[row[0]] = _row(row[1:])
            columns = _columns(full, full_tail)
            return None if columns is None else (full, columns, full_oid, delta)
        return None

    def _body(self, path: Path, oid: str, rules: SyncPolicy) -> tuple[dict[str, Any], bytes] | None:
        """The checked JSON line of the record at `path`, which must say it is tree `oid`'s
        under `rules` (a record copied under another name is not read), and the bytes
        after that line (a full record's columns)."""
        raw = self.read(path)
        if raw is None:
            return None
        line = raw.find(b"\n")
        try:
            body = json.loads(raw[:line] if line >= 0 else raw)
        except _ERRORS:
            return None
        if not isinstance(body, dict) or body.get("policy") != repr(rules):
            return None
        return (body, raw[line + 1 :] if line >= 0 else b"") if body.get("tree") == oid else None

    def save(
        self,
        oid: str,
        rules: SyncPolicy,
        shape: TreeShape,
        entries: Mapping[str, Entry],
        base: tuple[str, Sequence[tuple[str, Entry | None]]] | None = None,
    ) -> None:
        """Record `shape` as tree `oid`'s, whose listing is `entries` (best effort: an
        unwritable store only misses); as a delta when it is tree `base[0]`'s (a tree
        recorded here) changed by `base[1]`."""
        with contextlib.suppress(OSError, ValueError):  # never fails a validation
            self._save(oid, rules, shape, entries, base)

    def _save(
        self,
        oid: str,
        rules: SyncPolicy,
        shape: TreeShape,
        entries: Mapping[str, Entry],
        base: tuple[str, Sequence[tuple[str, Entry | None]]] | None,
    ) -> None:
        path = self._path(oid, rules)
        if path is None:
            return
        if base is not None and self._save_delta(path, oid, rules, base):
            return
        folded = shape.folded
        one = dict(sorted(folded._one.items()))  # (a table read in place: `collisions.Table`)
        values = entries.values()
        sizes = list(map(itemgetter(1), values))
        if None in sizes:  # a submodule's: -1 in the column
            sizes = [-1 if size is None else size for size in sizes]
        held = list(map(itemgetter(0), one.values()))  # (spelling, leaf) of each prefix
        texts = [  # (`_TEXTS`' order)
            "\0".join(entries).encode("utf-8", "surrogateescape"),
            "\0".join(one).encode("utf-8", "surrogateescape"),
            "\0".join(map(itemgetter(0), held)).encode("utf-8", "surrogateescape"),
        ]
        body = {
            "policy": repr(rules),
            "tree": oid,
            "count": len(entries),
            "ones": len(one),
            "texts": list(map(len, texts)),
            "flagged": [
                [p, [[x.code, x.path, x.line, x.message] for x in found]]
                for p, found in shape.flagged.items()
            ],
            "many": [
                [k, [[s, leaf, n] for (s, leaf), n in shapes.items()]]
                for k, shapes in folded._many.items()
            ],
        }
        if sys.byteorder != "little":
            return  # (the columns are little-endian)
        numbers = array("q", map(itemgetter(0), values)) + array("q", sizes)
        numbers += array("q", map(itemgetter(1), one.values()))
        leaves = bytes(map(itemgetter(1), held))
        if self._write(path, body, numbers.tobytes() + leaves + b"".join(texts)):
            self._chains[path.name] = (oid, {})

    def _save_delta(
        self,
        path: Path,
        oid: str,
        rules: SyncPolicy,
        base: tuple[str, Sequence[tuple[str, Entry | None]]],
    ) -> bool:
        """Write tree `oid`'s record as a delta; False when it is to be written in full (the
        base was not recorded here, or the delta would be too long)."""
        base_path = self._path(base[0], rules)
        chain = None if base_path is None else self._chains.get(base_path.name)
        full_path = None if chain is None else self._path(chain[0], rules)
        if chain is None or full_path is None:
            return False
        delta = dict(chain[1])
        for changed, entry in base[1]:
            delta[changed] = None if entry is None else (entry.mode, entry.size)
        if len(delta) > DELTA_MAX:
            return False
        try:
            os.utime(full_path, follow_symlinks=False)  # kept by pruning while it is needed
        except OSError:
            return False
        rows = [[p] if now is None else [p, *now] for p, now in delta.items()]
        body = {"policy": repr(rules), "tree": oid, "base": chain[0], "delta": rows}
        if not self._write(path, body):
            return False
        self._chains[path.name] = (chain[0], delta)
        self.deltas += 1
        return True

    def _write(self, path: Path, body: dict[str, Any], tail: bytes = b"") -> bool:
        return self.write(path, json.dumps(body, separators=(",", ":")).encode() + b"\n" + tail)


_Row = tuple[int, int | None] | None  # a path's (mode, size) in a delta, None when deleted
# A record's shape (folded paths, flagged paths) and its chain (its full record's id, delta).
_Found = tuple[FoldedTree, dict[str, tuple[Problem, ...]], tuple[str, dict[str, _Row]]]
# A full record's columns checked in themselves: folded paths, their leaves, flagged paths.
_Columns = tuple[FoldedTree, list[str], dict[str, tuple[Problem, ...]]]
# A record read ahead: its full record's body and columns, that record's id, and the delta
# from it (None for a full record itself).
_Prepared = tuple[dict[str, Any], _Columns, str, dict[str, _Row] | None]


def _row(values: list[Any]) -> _Row:
    if not values:
        return None
    mode, size = values
    if type(mode) is not int or not (size is None or type(size) is int):
        raise ValueError("not a mode and size")
    return mode, size


def _same(
    body: dict[str, Any], entries: Mapping[str, Entry], delta: Mapping[str, _Row]
) -> Mapping[str, object] | None:
    """The listing of a full record changed by `delta`, when it is `entries` (its paths,
    modes and sizes), else None."""
    if _same_order(body, entries, delta):
        return entries
    recorded = _listing(body)
    for path, now in delta.items():
        if now is None:
            recorded.pop(path, None)
        else:
            recorded[path] = now
    return recorded if recorded == _pairs(entries) else None


def _same_order(
    body: dict[str, Any], entries: Mapping[str, Entry], delta: Mapping[str, _Row]
) -> bool:
    """Whether a full record's columns changed by `delta` (modifications of a few of its
    paths only) are `entries`' paths, modes and sizes in `entries`' order: compared as
    lists, without a dict of either (a fresh listing and the record of a tree listed the
    same way agree in order). False says only "not so": compare them as dicts."""
    if len(delta) > _IN_PLACE:
        return False
    # The columns as bytes, nothing decoded (a 10k-path tree's, every sync): each path the
    # delta modifies found in the paths' text, its mode and size changed in the columns.
    count, paths, _modes, _sizes = body["raw"]
    if not _same_paths(count, paths, entries):
        return False
    modes, sizes = _numbers(body)
    if delta:
        modes, sizes = list(modes), list(sizes)
        for path, now in delta.items():
            if now is None or path not in entries:
                return False
            at = _index(paths, path.encode("utf-8", "surrogateescape"))
            if at < 0:
                return False
            modes[at], sizes[at] = now
    values = entries.values()
    return bool(  # (C-level columns of the listing: a 10k-path tree is compared here)
        modes == list(map(itemgetter(0), values)) and sizes == list(map(itemgetter(1), values))
    )


def _index(text: bytes, name: bytes) -> int:
    """Where path `name` first is among the paths of `text` (NUL between two), or -1."""
    if text == name or text.startswith(name + b"\0"):
        return 0
    found = text.find(b"\0" + name + b"\0")
    if found >= 0:
        return text.count(b"\0", 0, found + 1)
    return text.count(b"\0") if text.endswith(b"\0" + name) else -1


def _same_paths(count: int, paths: bytes, entries: Mapping[str, Entry]) -> bool:
    """Whether a full record's `count` paths (one text, NUL between two) are `entries`'
    paths in `entries`' order (compared as one text: no path decoded)."""
    if len(entries) != count:
        return False
    text = "\0".join(entries)
    if text.count("\0") != max(count - 1, 0):
        return False  # a path with a NUL in it: no record's
    return text.encode("utf-8", "surrogateescape") == paths


def _numbers(body: dict[str, Any]) -> tuple[list[int], list[int | None]]:
    """A full record's modes and sizes (decoded once)."""
    if "modes" not in body:
        count, _paths, modes, sizes = body["raw"]
        numbers = array("q")
        numbers.frombytes(modes + sizes)
        given = numbers[count:].tolist()
        body["modes"] = numbers[:count].tolist()
        body["sizes"] = [None if n == -1 else n for n in given] if -1 in given else given
    return body["modes"], body["sizes"]


def _decoded(body: dict[str, Any]) -> dict[str, Any]:
    """`body` with its full record's `paths`, `modes` and `sizes` as lists (decoded from
    its columns once, when a check compares them one by one)."""
    if "paths" not in body:
        count, paths, _modes, _sizes = body["raw"]
        body["paths"] = paths.decode("utf-8", "surrogateescape").split("\0") if count else []
        _numbers(body)
    return body


def _pairs(entries: Mapping[str, Entry]) -> dict[str, tuple[int, int | None]]:
    """What a shape judges of a listing: each path's mode and size."""
    return {path: (entry.mode, entry.size) for path, entry in entries.items()}


def _listing(body: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """A full record's paths with their modes and sizes (each path once)."""
    _decoded(body)
    paths, modes, sizes = body["paths"], body["modes"], body["sizes"]
    recorded = dict(zip(paths, zip(modes, sizes, strict=True), strict=True))
    if len(recorded) != len(paths):
        raise ValueError("a path twice")
    return recorded


def _fit(prepared: _Prepared, rules: SyncPolicy, entries: Mapping[str, Entry]) -> _Found | None:
    """A prepared record's shape when its listing is `entries` (its paths, modes and
    sizes; a delta's: its full record's listing changed by the delta, the shape derived
    from the full one's as the gate derives it in memory), else None."""
    from memsync.validators.gate import TreeShape  # noqa: PLC0415 - gate imports this

    body, (folded, held, flagged), full_oid, delta = prepared
    if delta is None:
        listed = _same(body, entries, {})
        if listed is None or not _holds(held, flagged, listed):
            return None  # not made from these paths, modes and sizes: what it judges
        return folded, flagged, (full_oid, {})
    if _same_order(body, entries, delta):  # modified in place: the full one's paths
        if not _holds(held, flagged, entries):
            return None
    else:
        recorded = _listing(body)
        if not _holds(held, flagged, recorded):  # the full record's shape, of its listing
            return None
        for path, now in delta.items():  # now the listing the delta was made from
            if now is None:
                recorded.pop(path, None)
            else:
                recorded[path] = now
        if recorded != _pairs(entries):
            return None  # not made from these paths, modes and sizes
    shape = TreeShape(folded, flagged).derive([(p, entries.get(p)) for p in delta], rules)
    return shape.folded, dict(shape.flagged), (full_oid, delta)


def _columns(body: dict[str, Any], tail: bytes) -> _Columns | None:
    """A full record's shape, checked in itself: its folded paths, the paths they hold as
    leaves (`_holds` checks them against the listing) and the flagged paths' problems.
    Its listing's columns are kept in `body` as they are (`raw`: the path count, the
    paths as one text, the modes and sizes as integers), for the checks against the
    listing at hand (`_same_order` compares them as they are; `_listing` decodes them)."""
    count, ones, lengths = body.get("count"), body.get("ones"), body.get("texts")
    if type(count) is not int or type(ones) is not int or type(lengths) is not list:
        return None  # not shaped like a shape
    if len(lengths) != len(_TEXTS) or not all(type(n) is int and n >= 0 for n in lengths):
        return None
    if not isinstance(body.get("many"), list) or not isinstance(body.get("flagged"), list):
        return None
    at = 8 * (2 * count + ones) + ones
    if count < 0 or ones < 0 or len(tail) != at + sum(lengths) or sys.byteorder != "little":
        return None
    numbers = array("q")
    numbers.frombytes(tail[: 8 * (2 * count + ones)])
    counts = numbers[2 * count :]
    flags = tail[at - ones : at]
    if flags.translate(None, b"\0\1") or min(numbers[count : 2 * count], default=0) < -1:
        return None  # a leaf flag neither 0 nor 1, a size below none (-1)
    paths = tail[at : at + lengths[0]]
    if paths.count(b"\0") != max(count - 1, 0) or (count == 1 and not paths):
        return None  # not `count` paths (an empty text: no path is empty)
    at += lengths[0]
    texts: list[list[str]] = []
    for length in lengths[1:]:
        text = tail[at : at + length].decode("utf-8", "surrogateescape")
        texts.append(text.split("\0") if length else [])
        at += length
    keys, spellings = texts
    if len(keys) != ones or len(spellings) != ones or (keys == [""] and ones == 1):
        return None  # (an empty text: no prefix is empty)
    body["raw"] = (count, paths, tail[: 8 * count], tail[8 * count : 16 * count])
    if min(counts, default=1) < 1:
        return None  # each prefix held by a path or more
    table = Table(keys, spellings, flags, counts)  # (ValueError: keys unsorted, or one twice)
    held = list(compress(spellings, flags))  # (the table's columns are not changed below)
    many: dict[str, dict[tuple[str, bool], int]] = {}
    for key, rows in body["many"]:  # (decoded from JSON: each value's type checked)
        shapes = many[key] = {}
        for spelling, leaf, number in rows:
            if type(spelling) is not str or type(leaf) is not bool or type(number) is not int:
                return None
            if number < 1:
                return None
            shapes[(spelling, leaf)] = number
            if leaf:
                held.append(spelling)  # every path held, for the checks
        if type(key) is not str or len(shapes) < 2 or table.get(key) is not None:
            return None
    folded = FoldedTree.over(table, many)
    flagged: dict[str, tuple[Problem, ...]] = {}
    for path, rows in body["flagged"]:
        if not isinstance(path, str) or not rows:
            return None
        flagged[path] = tuple(_problem(row) for row in rows)
    return folded, held, flagged


def _holds(held: list[str], flagged: Mapping[str, object], listed: Mapping[str, object]) -> bool:
    """Whether a record's leaves are exactly the listing's paths (each leaf is one path)
    and every path it flags is one of them. (In the listing's order, as a record made
    from that listing holds them, they are compared as lists: no path hashed.)"""
    if len(held) != len(listed) or not all(map(listed.__contains__, flagged)):
        return False
    return held == list(listed) or (
        len(set(held)) == len(held) and all(map(listed.__contains__, held))
    )


def _problem(row: Any) -> Problem:
    code, path, line, message = row
    if not (
        isinstance(code, str)
        and (path is None or isinstance(path, str))
        and (line is None or type(line) is int)
        and isinstance(message, str)
    ):
        raise ValueError("not a problem")
    return Problem(code, path, line, message)
