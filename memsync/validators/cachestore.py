"""The parse cache on disk: summaries in one SQLite file, for CLI runs.

Safe by construction: an entry is JSON (reading it cannot run code), framed by a header
that names the format and the parser it came from and a keyed BLAKE2b checksum over the
key and the payload (`summaryframe.py`). An entry that is truncated, corrupt, from another
format or another parser, or not shaped like a summary is ignored (and the file is parsed
again), never trusted over the bytes. Writes are SQLite transactions, so a crash leaves
the old or the new entries; the store is bounded (least recently used entries go first)
and may be deleted at any time. Every SQLite error disables the store for the rest of the
process: a cache never fails a validation.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from memsync.validators.filesummary import FileSummary
from memsync.validators.summaryframe import FORMAT, decode, encode, parser_digest

FILE_NAME = "parse-cache.sqlite3"
_BATCH = 500  # keys per SELECT (SQLite's default variable limit is far above)


class PersistentStore:
    """Summaries on disk in `<directory>/parse-cache.sqlite3`, bounded by `max_bytes`."""

    def __init__(self, path: Path, connection: sqlite3.Connection, max_bytes: int) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.header = FORMAT + parser_digest()
        self._db: sqlite3.Connection | None = connection
        self._lock = threading.Lock()

    @classmethod
    def open(cls, directory: Path, *, max_bytes: int) -> PersistentStore | None:
        """The store in `directory`, or None (memory only) when it cannot be trusted: the
        directory must be ours and writable by no one else; a file there that is not a
        private regular file of ours, or not a database, is dropped and made again. A
        database that is only busy is left alone."""
        path = directory / FILE_NAME
        try:
            directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            if not _private(directory.lstat(), stat.S_ISDIR):
                return None  # another user's, or writable by others: rows could be forged
            if not _private_or_absent(path):
                _drop(path)  # a link, or rows others could have written: not to be read
            try:
                connection = _connect(path)
            except sqlite3.DatabaseError as exc:
                if getattr(exc, "sqlite_errorname", "") not in _NOT_A_DATABASE:
                    return None  # locked by another process, say: never delete it
                _drop(path)  # not a database: ours to drop, rebuilt below
                connection = _connect(path)
        except (OSError, sqlite3.Error):
            return None
        return cls(path, connection, max_bytes)

    def _run(self, work: Any) -> Any:
        with self._lock:
            if self._db is None:
                return None
            try:
                return work(self._db)
            except sqlite3.Error:
                with contextlib.suppress(sqlite3.Error):
                    self._db.close()
                self._db = None  # broken or busy for too long: memory only from now on
                return None

    def get_many(self, keys: Sequence[str]) -> dict[str, FileSummary]:
        def read(db: sqlite3.Connection) -> list[tuple[str, bytes]]:
            rows: list[tuple[str, bytes]] = []
            for start in range(0, len(keys), _BATCH):
                part = keys[start : start + _BATCH]
                marks = ",".join("?" * len(part))
                query = f"SELECT key, value FROM entries WHERE key IN ({marks})"  # noqa: S608
                rows += db.execute(query, part).fetchall()
            return rows

        found: dict[str, FileSummary] = {}
        for key, value in self._run(read) or ():
            if isinstance(key, str) and isinstance(value, bytes):
                made = decode(key, value, self.header)
                if made is not None:
                    found[key] = made
        return found

    def put_many(self, entries: Mapping[str, FileSummary], *, touched: Sequence[str] = ()) -> None:
        now = time.time_ns()
        rows = [(key, encode(key, made, self.header), now) for key, made in entries.items()]

        def write(db: sqlite3.Connection) -> None:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.executemany("INSERT OR REPLACE INTO entries VALUES (?, ?, ?)", rows)
                for start in range(0, len(touched), _BATCH):
                    part = touched[start : start + _BATCH]
                    marks = ",".join("?" * len(part))
                    db.execute(
                        f"UPDATE entries SET used = ? WHERE key IN ({marks})",  # noqa: S608
                        (now, *part),
                    )
                self._bound(db)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")

        self._run(write)

    def _bound(self, db: sqlite3.Connection) -> None:
        """Drop the least recently used entries until the store is under 3/4 of its bound."""
        (total,) = db.execute("SELECT total(length(value) + length(key)) FROM entries").fetchone()
        if total <= self.max_bytes:
            return
        goal = total - self.max_bytes * 3 // 4
        dropped = 0
        doomed: list[str] = []
        for key, size in db.execute(
            "SELECT key, length(value) + length(key) FROM entries ORDER BY used"
        ):
            if dropped >= goal:
                break
            doomed.append(key)
            dropped += size
        db.executemany("DELETE FROM entries WHERE key = ?", [(k,) for k in doomed])

    def size(self) -> int:
        """Bytes of the entries held (keys and values)."""
        got = self._run(
            lambda db: db.execute(
                "SELECT total(length(value) + length(key)) FROM entries"
            ).fetchone()[0]
        )
        return int(got or 0)

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                with contextlib.suppress(sqlite3.Error):
                    self._db.close()
                self._db = None


_NOT_A_DATABASE = frozenset({"SQLITE_NOTADB", "SQLITE_CORRUPT"})


def _private(info: os.stat_result, kind: Callable[[int], bool]) -> bool:
    """Of that kind (never a symlink: `lstat`), ours, and writable by no one else."""
    return kind(info.st_mode) and info.st_uid == os.geteuid() and not info.st_mode & 0o022


def _private_or_absent(path: Path) -> bool:
    try:
        info = path.lstat()
    except FileNotFoundError:
        return True
    return _private(info, stat.S_ISREG)


def _drop(path: Path) -> None:
    """Remove the store and SQLite's files beside it (in our private directory)."""
    for name in (path.name, f"{path.name}-journal", f"{path.name}-wal", f"{path.name}-shm"):
        (path.parent / name).unlink(missing_ok=True)


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, timeout=0.5, check_same_thread=False, isolation_level=None)
    try:
        db.execute("PRAGMA trusted_schema = OFF")
        db.execute("PRAGMA auto_vacuum = FULL")  # deleted entries give their pages back
        db.execute(
            "CREATE TABLE IF NOT EXISTS entries "
            "(key TEXT PRIMARY KEY, value BLOB NOT NULL, used INTEGER NOT NULL)"
        )
        db.execute("SELECT count(*) FROM entries").fetchone()
    except sqlite3.Error:
        db.close()
        raise
    path.chmod(0o600)
    return db
