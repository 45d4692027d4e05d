"""Tree shape records: a validated tree's whole-tree name verdict on disk, by tree id.

The gate keeps each validated tree's `TreeShape` (every path's name, mode and size
problems, and its folded paths for clashes) in memory by the tree's Git object id, and
derives the next tree's from it and git's diff (`gate.tree_shape`). A fresh CLI process
has none, and would check every name of the first tree it lists again (O(entries): some
hundreds of milliseconds at 10k files). This store keeps that same shape on disk, one
file per tree, so that the process reads the shape of the tree it starts from.

A record is a cache, never an authority. It is found by the tree id, with a digest of the
code that decides (the gate's modules, the format, the Python version) and of the policy,
and checksummed; and it holds every path with its mode and size, which must be exactly the
listing's at hand (all that a shape's verdict depends on: a record copied under another
tree's id is not used); anything truncated, corrupt, foreign, oversized, not a private
regular file of ours or not shaped like a shape is ignored and the shape is computed from
the entries. Written atomically, 0600 in a 0700 directory, pruned to the
`KEEP` most recent (`MAX_TOTAL_BYTES` in all).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import sys
from collections.abc import Mapping
from itertools import compress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync import atomicfile
from memsync.validators import collisions, paths, policy, problems, recordfile, tree
from memsync.validators.collisions import FoldedTree
from memsync.validators.problems import Problem
from memsync.validators.tree import Entry

if TYPE_CHECKING:
    from memsync.validators.gate import TreeShape
    from memsync.validators.policy import SyncPolicy

FORMAT = b"MSTS1"
DIRECTORY = "shapes"  # under the parse cache's directory
MAX_RECORD_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024  # all records kept, the newest always
KEEP = 32  # as many as lineage records (one per validated tree id)
_NAME = re.compile(r"[0-9a-f]{16}-(?:[0-9a-f]{40}|[0-9a-f]{64})\.shape")
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_HEAD = re.compile(rb"MSTS1 ([0-9a-f]{32}) ([0-9]{1,12}) ([0-9a-f]{32})\n")
_ERRORS = (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError)


def version_digest() -> bytes:
    """Names the code that decides a shape (a change makes every record foreign)."""
    digest = hashlib.blake2b(FORMAT, digest_size=16)
    digest.update(repr(sys.version_info[:2]).encode())
    gate = sys.modules.get("memsync.validators.gate")
    for module in (collisions, paths, policy, problems, tree, sys.modules[__name__], gate):
        source = getattr(module, "__file__", None)
        digest.update(Path(source).read_bytes() if source else b"-")
    return digest.digest()


class ShapeStore:
    """Tree shapes in `<directory>`, one file per tree id and policy."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.version = version_digest()
        self.loads = 0
        self.saves = 0

    @classmethod
    def open(cls, directory: Path) -> ShapeStore | None:
        """The store in `directory` (made 0700), or None when it is not ours alone."""
        return cls(directory) if recordfile.private_directory(directory) else None

    def _path(self, oid: str, rules: SyncPolicy) -> Path | None:
        if not isinstance(oid, str) or not _OID.fullmatch(oid):
            return None
        digest = hashlib.blake2b(self.version, digest_size=8)
        digest.update(repr(rules).encode())
        return self.directory / f"{digest.hexdigest()}-{oid}.shape"

    def load(self, oid: str, rules: SyncPolicy, entries: Mapping[str, Entry]) -> TreeShape | None:
        """The recorded shape of tree `oid` under `rules`, whose listing is `entries`."""
        from memsync.validators.gate import TreeShape  # noqa: PLC0415 - gate imports this

        path = self._path(oid, rules)
        data = None if path is None else recordfile.read_private(path, MAX_RECORD_BYTES)
        if data is None:
            return None
        newline = data.find(b"\n") + 1
        match = _HEAD.fullmatch(data[:newline])
        if match is None or bytes.fromhex(match.group(1).decode()) != self.version:
            return None
        body = data[newline:]
        check = hashlib.blake2b(body, key=self.version, digest_size=16).hexdigest()
        if len(body) != int(match.group(2)) or check != match.group(3).decode():
            return None
        try:
            shape = _decode(json.loads(body), repr(rules), entries)
        except _ERRORS:
            return None
        if shape is None:
            return None
        self.loads += 1
        return TreeShape(shape[0], shape[1])

    def save(
        self, oid: str, rules: SyncPolicy, shape: TreeShape, entries: Mapping[str, Entry]
    ) -> None:
        """Record `shape` as tree `oid`'s, whose listing is `entries` (best effort: an
        unwritable store only misses)."""
        with contextlib.suppress(OSError, ValueError):  # never fails a validation
            self._save(oid, rules, shape, entries)

    def _save(
        self, oid: str, rules: SyncPolicy, shape: TreeShape, entries: Mapping[str, Entry]
    ) -> None:
        path = self._path(oid, rules)
        if path is None:
            return
        folded = shape.folded
        one = folded._one
        # Columns, so that reading them back is C-level work (10k paths: a few ms).
        body = json.dumps(
            {
                "policy": repr(rules),
                "paths": list(entries),
                "modes": [entry.mode for entry in entries.values()],
                "sizes": [entry.size for entry in entries.values()],
                "flagged": [
                    [p, [[x.code, x.path, x.line, x.message] for x in found]]
                    for p, found in shape.flagged.items()
                ],
                "keys": list(one),
                "spellings": [spelling for (spelling, _), _ in one.values()],
                "leaves": [leaf for (_, leaf), _ in one.values()],
                "counts": [count for _, count in one.values()],
                "many": [
                    [k, [[s, leaf, n] for (s, leaf), n in shapes.items()]]
                    for k, shapes in folded._many.items()
                ],
            },
            separators=(",", ":"),
        ).encode()
        if len(body) > MAX_RECORD_BYTES:
            return
        check = hashlib.blake2b(body, key=self.version, digest_size=16).hexdigest()
        head = b"%s %s %d %s\n" % (FORMAT, self.version.hex().encode(), len(body), check.encode())
        atomicfile.write_bytes(path, head + body, durable=False)  # a cache
        self.saves += 1
        recordfile.prune(self.directory, _NAME, KEEP, MAX_TOTAL_BYTES)


def _decode(
    body: Any, rules: str, entries: Mapping[str, Entry]
) -> tuple[FoldedTree, dict[str, tuple[Problem, ...]]] | None:
    if not isinstance(body, dict) or body.get("policy") != rules:
        return None
    paths, modes, sizes = body["paths"], body["modes"], body["sizes"]
    recorded = dict(zip(paths, zip(modes, sizes, strict=True), strict=True))
    if recorded != {path: (entry.mode, entry.size) for path, entry in entries.items()}:
        return None  # not made from these paths, modes and sizes: what a shape judges
    keys, spellings, leaves, counts = (body[n] for n in ("keys", "spellings", "leaves", "counts"))
    one = dict(
        zip(keys, zip(zip(spellings, leaves, strict=True), counts, strict=True), strict=True)
    )
    many: dict[str, dict[tuple[str, bool], int]] = {}
    for key, rows in body["many"]:
        shapes = many[key] = {}
        for spelling, leaf, count in rows:
            shapes[(spelling, leaf)] = count
            spellings.append(spelling)  # the columns now cover every shape, for the checks
            leaves.append(leaf)
            counts.append(count)
        if len(shapes) < 2 or key in one:
            return None
    if len(one) != len(keys) or not set(map(type, (*keys, *many, *spellings))) <= {str}:
        return None  # keys once each; keys and spellings strings
    if not set(map(type, leaves)) <= {bool} or not set(map(type, counts)) <= {int}:
        return None  # flags booleans, counts integers
    if min(counts, default=1) < 1:
        return None
    held = list(compress(spellings, leaves))
    if len(held) != len(entries) or not set(entries).issuperset(held):
        return None  # the folded paths are not the listing's (each leaf is one path)
    folded = FoldedTree()
    folded._one = one
    folded._many = many
    flagged: dict[str, tuple[Problem, ...]] = {}
    for path, rows in body["flagged"]:
        if path not in entries or not rows:
            return None
        flagged[path] = tuple(_problem(row) for row in rows)
    return folded, flagged


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
