"""Lineage records: the cross-file state of a validated tree on disk, for fresh processes.

A daemon validates a root's next tree from the previous tree's `Lineage` (`lineage.py`),
kept in memory. A CLI process (`memsync validate`, `memsync sync-now` without a daemon)
starts with none, and would load and join every graph file again. This store keeps that
same lineage on disk, one record per validated tree, so that a fresh process reads the
record of a tree it follows and joins only the files that changed.

A record is a cache, never an authority:

* it is named by the tree's Git object id (or a digest of its files' content keys for a
  tree without one) and by a digest of everything that makes the verdict (the format,
  the Python version, the source of every module of the per-file and cross-file passes,
  the graph profile); a record of another version is never read;
* whichever record is read, the step checks every graph file's content key and every
  consulted entry's mode against the tree (`Lineage.changes`), so a record only ever
  spares the work for files whose bytes it was made from; the files that changed are
  parsed and joined again;
* the eager part (paths, keys, ids, edge targets, problems) carries a BLAKE2b checksum,
  each stored summary its own (checked when the step reads it, with its ids compared to
  the eager part's); a record that is
  truncated, corrupt, oversized, foreign, not a private regular file of ours, or not
  shaped like a lineage is ignored and the full pass runs;
* records are written atomically (`atomicfile`), 0600 in a 0700 directory, bounded in size
  (`MAX_RECORD_BYTES`), and pruned to the `KEEP` most recent (`MAX_TOTAL_BYTES` in all).

The summaries in a record are decoded lazily (`_Stored`), so reading a record costs its
paths, keys and ids, not every file's summary.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import Iterable
from itertools import repeat
from pathlib import Path
from typing import Any

from memsync import atomicfile
from memsync.memodigest import blake2b
from memsync.validators import recordfile, summaryframe
from memsync.validators.crossfile import _Join, _Loaded
from memsync.validators.filesummary import FileSummary
from memsync.validators.lineage import KeyedSource, Lineage, Spoiled, named_text
from memsync.validators.problems import Problem
from memsync.validators.profile import MEMORY, PURSUIT, Profile
from memsync.validators.tree import TreeView

FORMAT = b"MSLR1"
DIRECTORY = "lineages"  # under the parse cache's directory
MAX_RECORD_BYTES = 64 * 1024 * 1024
MAX_TOTAL_BYTES = 256 * 1024 * 1024  # all records kept, the newest always
KEEP = 32  # records kept in all (the roots a CLI run syncs, each its latest trees)
CANDIDATES = 4  # records looked at (their index only) when none is the tree's own
_NAME = re.compile(r"([0-9a-f]{16})-([0-9a-z]{1,80})\.rec")
# format, version, the lengths of the index, the body, the files' ids and their edge
# targets, and the checksum of those four
_HEAD = re.compile(rb"MSLR1 ([0-9a-f]{32})" + rb" ([0-9]{1,12})" * 4 + rb" ([0-9a-f]{32})\n")
_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_ERRORS = (ValueError, TypeError, KeyError, IndexError, OverflowError, RecursionError)


def version_digest() -> bytes:
    """Names the code that makes a verdict: a change to any module of the per-file or
    cross-file pass, to this format or to the Python version makes every record foreign."""
    digest = blake2b(FORMAT, digest_size=16)
    digest.update(repr(sys.version_info[:2]).encode())
    joins = ("crossfile", "lineage", "graphmodel", "profile", "edges", "assembly", "tree")
    modules = (*summaryframe.PARSER, *joins, "recordfile", "summaryframe", "lineagestore")
    summaryframe.source_digest(digest, modules)
    return digest.digest()


def _profile_key(profile: Profile) -> str:
    return json.dumps(
        [
            profile.name,
            profile.namespace,
            [list(root) for root in profile.roots],
            profile.base,
            sorted(profile.kinds),
            profile.focus,
            profile.addressed_prose,
        ]
    )


class _Stored(_Loaded):
    """A loaded file of a record: its summary decoded (and checked) when first read."""

    __slots__ = ("_frame", "_held", "_ids", "_key", "_meta", "_named", "_summary_header")

    def __init__(
        self,
        index: int,
        path: str,
        tree: str,
        scope: str | None,
        key: str,
        frame: memoryview,
        meta: bytes,
        named: bytes,
        ids: list[str],
        header: bytes,
    ) -> None:
        self.index = index
        self.path = path
        self.tree = tree
        self.scope = scope
        self.dropped = None
        self._key = key
        self._frame: memoryview | None = frame  # the summary's bytes in the record
        self._meta = meta  # the record's bytes of its ids and edge targets (`_frame` held)
        self._named = named
        self._ids = ids
        self._held: FileSummary | None = None
        self._summary_header = header

    @property
    def summary(self) -> FileSummary:
        held = self._held
        if held is None:
            frame = self._frame
            header = self._summary_header
            held = None if frame is None else summaryframe.decode(self._key, bytes(frame), header)
            if held is None or not held.decoded or list(held.ids) != self._ids:
                raise Spoiled(f"the stored summary of {self.path} is damaged")
            self._held = held
        return held

    @summary.setter
    def summary(self, value: FileSummary) -> None:
        self._held = value
        self._frame = None  # the stored bytes are another file's now


class LineageStore:
    """Lineage records in `<directory>`, one file per validated tree."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.version = version_digest()
        self.summary_header = summaryframe.FORMAT + summaryframe.parser_digest()
        self.loads = 0  # records read and used for a step (for tests and benches)
        self.saves = 0

    @classmethod
    def open(cls, directory: Path) -> LineageStore | None:
        """The store in `directory` (made 0700), or None when it is not ours alone."""
        return cls(directory) if recordfile.private_directory(directory) else None

    def _slot(self, profile: Profile) -> str:
        digest = blake2b(self.version, digest_size=8)
        digest.update(_profile_key(profile).encode())
        return digest.hexdigest()

    # -- reading ---------------------------------------------------------------------------

    def load(
        self, tree: TreeView, profile: Profile, source: KeyedSource
    ) -> tuple[Lineage, list[tuple[int, str]]] | None:
        """The stored lineage `tree` follows most closely, with its changed files; None when
        no record of this version and profile may be advanced to `tree`."""
        slot = self._slot(profile)
        # The tree's own record, then its base's (the tree a git adapter derived it from:
        # the root's previous tree, whatever other roots recorded since), then the newest.
        own, base = (
            f"{slot}-{oid}.rec" if isinstance(oid, str) and _OID.fullmatch(oid) else None
            for oid in (getattr(tree, "tree_oid", None), getattr(tree, "base_oid", None))
        )
        names = self._records(slot)
        for name in (own, base):  # no ranking needed: the tree's own, or its base's
            if name is not None and name in names:
                found = self._advanceable(name, tree, profile, source)
                if found is not None:
                    return found
        best: tuple[int, str] | None = None
        for name in [n for n in names if n not in (own, base)][:CANDIDATES]:
            files = self._index(name)
            changed = None if files is None else _count_changed(tree, source, files)
            if changed is not None and (best is None or changed < best[0]):
                best = (changed, name)
        return None if best is None else self._advanceable(best[1], tree, profile, source)

    def _advanceable(
        self, name: str, tree: TreeView, profile: Profile, source: KeyedSource
    ) -> tuple[Lineage, list[tuple[int, str]]] | None:
        lineage = self._read(name, profile)
        if lineage is None:
            return None
        changed_files = lineage.changes(tree, source)
        if changed_files is None:
            return None
        self.loads += 1
        return lineage, changed_files

    def _records(self, slot: str) -> list[str]:
        """This slot's record names, the most recent first."""
        return [n for n in recordfile.newest(self.directory, _NAME) if n.startswith(slot)]

    def _index(self, name: str) -> list[Any] | None:
        """A record's graph files (path, pursuit, key), read without the rest."""
        opened = recordfile.open_private(self.directory / name, MAX_RECORD_BYTES)
        if opened is None:
            return None
        fd, _size = opened
        try:
            with os.fdopen(fd, "rb") as handle:
                first = handle.readline(200)
                match = _HEAD.fullmatch(first)
                if match is None or bytes.fromhex(match.group(1).decode()) != self.version:
                    return None
                index = json.loads(handle.read(int(match.group(2))))
            if not (isinstance(index, list) and len(index) == 2 and isinstance(index[1], list)):
                return None
            return index[1]
        except (OSError, *_ERRORS):
            return None

    def _read(self, name: str, profile: Profile) -> Lineage | None:
        found = recordfile.read_headed(self.directory / name, MAX_RECORD_BYTES, _HEAD, self.version)
        if found is None:
            return None
        match, data = found
        index_len, body_len, meta_len, named_len = (int(match.group(n)) for n in (2, 3, 4, 5))
        eager_len = index_len + body_len + meta_len + named_len
        eager = memoryview(data)[:eager_len]
        check = blake2b(eager, key=self.version, digest_size=16).hexdigest()
        if len(eager) != eager_len or check != match.group(6).decode():
            return None
        try:
            index = json.loads(bytes(eager[:index_len]))
            body = json.loads(bytes(eager[index_len : index_len + body_len]))
            return self._lineage(index, body, data, index_len + body_len, profile)
        except _ERRORS:
            return None

    def _lineage(
        self, index: Any, body: Any, data: bytes, at: int, profile: Profile
    ) -> Lineage | None:
        files = index[1]
        if not isinstance(body, dict) or body.get("profile") != _profile_key(profile):
            return None
        scopes, metas, names, sizes = body["scopes"], body["metas"], body["names"], body["sizes"]
        count = len(files)
        columns = (scopes, metas, names, sizes)
        if not all(isinstance(x, list) and len(x) == count for x in columns):
            return None
        lengths = [_int(n, 0, MAX_RECORD_BYTES) for n in (*metas, *names, *sizes)]
        if at + sum(lengths) != len(data):
            return None  # truncated, or trailing bytes
        named_at = at + sum(lengths[:count])
        frame_at = named_at + sum(lengths[count : 2 * count])
        view = memoryview(data)
        join = _Join(None, profile, None)  # type: ignore[arg-type]  # held no tree
        owner = join.owner
        keys: list[str] = []
        named: list[bytes] = []
        for number, (row, scope, meta_size, named_size, size) in enumerate(
            zip(files, scopes, metas, names, sizes, strict=True)
        ):
            path, pursuit, key = row
            meta = data[at : at + meta_size]
            at += meta_size
            listed = json.loads(meta)
            text = data[named_at : named_at + named_size]
            named_at += named_size
            if not (
                isinstance(path, str)
                and type(pursuit) is bool
                and isinstance(key, str)
                and (scope is None or isinstance(scope, str))
                and isinstance(listed, list)
            ):
                return None
            kind = PURSUIT if pursuit else MEMORY
            frame = view[frame_at : frame_at + size]
            frame_at += size
            loaded = _Stored(
                number, path, kind, scope, key, frame, meta, text, listed, self.summary_header
            )
            named.append(text)
            join.loaded.append(loaded)
            join.by_path[path] = loaded
            keys.append(key)
            before = len(owner)
            owner.update(zip(listed, repeat(number)))
            if len(owner) - before != len(listed):
                return None  # a kept lineage never holds an id twice
        if not set(map(type, owner)) <= {str}:
            return None  # every id a string (checked at C speed: 100k of them)
        rest = _join_state(join, body, count)
        if rest is None:
            return None
        undecoded, focus_of = rest
        return Lineage(join, keys, undecoded, named=named, focus_of=focus_of)

    # -- writing ---------------------------------------------------------------------------

    def save(self, tree: TreeView, kept: Lineage, *, changed: bool = True) -> None:
        """Write the record of `tree`, whose lineage `kept` is now (best effort: a store
        that cannot be written is a cache that misses). An unchanged tree whose record
        exists is not written again."""
        with contextlib.suppress(OSError, ValueError):  # never fails a validation
            self._save(tree, kept, changed=changed)

    def _save(self, tree: TreeView, kept: Lineage, *, changed: bool) -> None:
        slot = self._slot(kept.join.profile)
        oid = getattr(tree, "tree_oid", None)
        if isinstance(oid, str) and _OID.fullmatch(oid):
            label = oid
        else:
            digest = blake2b(digest_size=20)
            for key in kept.keys:
                digest.update(key.encode("utf-8", "surrogatepass") + b"\0")
            label = "w" + digest.hexdigest()
        path = self.directory / f"{slot}-{label}.rec"
        if not changed and path.exists():
            return
        data = self.encode(kept)
        if data is None:
            return
        atomicfile.write_bytes(path, data, durable=False)  # a cache: the old one will do
        self.saves += 1
        recordfile.prune(self.directory, _NAME, KEEP, MAX_TOTAL_BYTES)

    def encode(self, kept: Lineage) -> bytes | None:
        """The record's bytes; None when it would exceed `MAX_RECORD_BYTES`."""
        join = kept.join
        files, scopes, metas, names = [], [], [], []
        frames: list[bytes | memoryview] = []
        total = 0
        for loaded in join.loaded:
            key = kept.keys[loaded.index]
            files.append([loaded.path, loaded.tree == PURSUIT, key])
            scopes.append(loaded.scope)
            frame: bytes | memoryview
            if isinstance(loaded, _Stored) and loaded._frame is not None:  # as it was read
                meta, text, frame = loaded._meta, loaded._named, loaded._frame
            else:
                made = loaded.summary
                text = kept.named[loaded.index] if kept.named is not None else named_text(made)
                meta = json.dumps(made.ids, separators=(",", ":")).encode()
                frame = summaryframe.encode(key, made, self.summary_header)
            metas.append(meta)
            names.append(text)
            frames.append(frame)
            total += len(meta) + len(text) + len(frame)
            if total > MAX_RECORD_BYTES:
                return None
        # ASCII JSON: a path git gave with undecodable bytes (surrogates) round-trips
        index = json.dumps([FORMAT.decode(), files], separators=(",", ":")).encode()
        body = json.dumps(
            {
                "profile": _profile_key(join.profile),
                "scopes": scopes,
                "metas": [len(meta) for meta in metas],
                "names": [len(text) for text in names],
                "sizes": [len(frame) for frame in frames],
                "problems": _rows(join.problems),
                "local": [[i, _rows(p)] for i, p in join.local.items()],
                "edges": [[i, _rows(p)] for i, p in join.edge_found.items()],
                "focus_found": _rows(join.focus_found),
                "consulted": list(join.consulted.items()),
                "undecoded": [
                    [path, pursuit, key]
                    for (path, pursuit), key in zip(join.undecoded, kept.undecoded, strict=True)
                ],
                "evidence": list(join.evidence),
                "focus": [[i, [list(f) for f in rows]] for i, rows in kept.focus_of.items()],
            },
            separators=(",", ":"),
        ).encode()
        meta, named = b"".join(metas), b"".join(names)
        if len(index) + len(body) + total > MAX_RECORD_BYTES:
            return None
        digest = blake2b(index, key=self.version, digest_size=16)
        for part in (body, meta, named):
            digest.update(part)
        head = b"%s %s %d %d %d %d %s\n" % (
            FORMAT,
            self.version.hex().encode(),
            len(index),
            len(body),
            len(meta),
            len(named),
            digest.hexdigest().encode(),
        )
        return b"".join([head, index, body, meta, named, *frames])


def _join_state(
    join: _Join, body: Any, count: int
) -> tuple[list[str], dict[int, tuple[tuple[str, int], ...]]] | None:
    """The rest of a record's join (problems, consulted entries, undecodable files,
    evidence, Focus) into `join`; the undecodable files' keys and each file's Focus."""
    join.problems = _problems(body["problems"])
    join.local = {_int(i, 0, count): _problems(p) for i, p in body["local"]}
    join.edge_found = {_int(i, 0, count): _problems(p) for i, p in body["edges"]}
    join.focus_found = _problems(body["focus_found"])
    for path, mode in body["consulted"]:
        if not isinstance(path, str) or not (mode is None or type(mode) is int):
            return None
        join.consulted[path] = mode
    undecoded: list[str] = []
    for path, pursuit, key in body["undecoded"]:
        if not (isinstance(path, str) and type(pursuit) is bool and isinstance(key, str)):
            return None
        join.undecoded.append((path, pursuit))
        undecoded.append(key)
    for path in body["evidence"]:
        if not isinstance(path, str):
            return None
        join.evidence[path] = None
    focus_of: dict[int, tuple[tuple[str, int], ...]] = {}
    for number, rows in body["focus"]:
        entries = tuple((str(t), _int(line, 0, 2**32)) for t, line in rows)
        if not all(isinstance(t, str) for t, _ in rows) or not entries:
            return None
        focus_of[_int(number, 0, count)] = entries
    if join.profile.focus:
        join.focus = [
            (target, join.loaded[number].path, line)
            for number in sorted(focus_of)
            for target, line in focus_of[number]
        ]
    return undecoded, focus_of


def _count_changed(tree: TreeView, source: KeyedSource, files: Iterable[Any]) -> int | None:
    """How many of a record's graph files differ in `tree` (None: not a record's index)."""
    changed = 0
    try:
        for path, pursuit, key in files:
            entry = tree.get(path)
            if (
                entry is None
                or not entry.is_regular
                or source.key(tree, path, pursuit=pursuit) != key
            ):
                changed += 1
    except (*_ERRORS, OSError):
        return None
    return changed


def _int(value: Any, low: int, high: int) -> int:
    if type(value) is not int or not low <= value < high:
        raise ValueError("not an integer in range")
    return value


def _rows(found: Iterable[Problem]) -> list[list[Any]]:
    return [[p.code, p.path, p.line, p.message] for p in found]


def _problems(rows: Any) -> list[Problem]:
    out = []
    for code, path, line, message in rows:
        if not (
            isinstance(code, str)
            and (path is None or isinstance(path, str))
            and (line is None or type(line) is int)
            and isinstance(message, str)
        ):
            raise ValueError("not a problem")
        out.append(Problem(code, path, line, message))
    return out
