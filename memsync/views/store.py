"""The import store: one view's active import directory and its atomic replacement.

Layout (named by `views/layout.py`; `.runtime/.gitignore` is `*`, so nothing here is ever
synchronized):

    .runtime/shared_views/imports/<heading>/          the active import (RightMemory's place)
    .runtime/shared_views/candidates/<heading>+<hex>  fresh extraction targets; after an
                                                      exchange, briefly the old import
    .runtime/shared_views/candidates/<heading>+old-<rev>  the old import during a two-step
    <state_dir>/views/<view>/promotion.json           the promotion record (while one runs)

`imports/` only holds active imports; scratch lives in `candidates/` (same file system) as
`<heading>+…`: '+' is outside the heading grammar, so no sweep matches another heading's.

Promotion writes a record first (the candidate's inode, the old directory's name, the
trust state to store), then swaps: `renameat2(RENAME_EXCHANGE)` on Linux, so a reader
always finds a complete import; a plain rename for the first import; or, where exchange
is unavailable, two renames (active -> old, candidate -> active). Only after the swap is
`trust.json` written, then the old tree and the record are removed. `recover()` finds
where the new directory is by its inode (package bytes are never touched, no marker file)
and finishes or undoes the move, so the import is always the old or the new revision and
`trust.json` matches it. An active directory is never modified in place: a reader that
opens it, reads, and finds it still active afterwards has read exactly one revision.

The caller serializes operations on one view (the view's lock); this module does not lock.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import platform
import secrets
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from functools import cache, partial
from pathlib import Path
from typing import Any, cast

from memsync import timefmt
from memsync.atomicfile import (
    fsync_dir,
    private_dir,
    read_json,
    write_bytes,
    write_json,
)
from memsync.roots.faults import fault
from memsync.views.layout import candidates_dir, import_dir, runtime_dir
from memsync.views.previous import sync_tree
from memsync.views.trust import TrustState, ViewStateError, check_name, trust_path

AT_FDCWD = -100
RENAME_EXCHANGE = 2
SYS_RENAMEAT2 = {"x86_64": 316, "amd64": 316, "aarch64": 276, "arm64": 276}
_UNSUPPORTED = {errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EOPNOTSUPP}
_HEX = frozenset("0123456789abcdef")
GITIGNORE = b"*\n"
_Record = tuple[int, Path, Path, tuple[int, int], TrustState]  # revision, candidate, old, id, trust


class ImportStoreError(ViewStateError):
    """A promotion was refused (not this store's candidate, a bad revision) or failed on the
    file system (raised from the OSError; the move was already finished or undone)."""


@dataclass(frozen=True)
class Recovered:
    """What `recover()` did and the scratch names it removed. `action`: `none`, `finished`
    (the new revision is active), `undone` (the old one is), `discarded` (unreadable record)."""

    action: str
    revision: int | None = None
    removed: tuple[str, ...] = ()


@cache
def _renameat2(use_libc: bool = True) -> Callable[..., int] | None:
    """libc's renameat2, else a `syscall(SYS_renameat2, …)` shim; None where neither exists."""
    if sys.platform != "linux":
        return None
    try:
        libc: Any = ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None
    if use_libc and hasattr(libc, "renameat2"):
        return cast("Callable[..., int]", libc.renameat2)
    number = SYS_RENAMEAT2.get(platform.machine().lower())
    if number is None or not hasattr(libc, "syscall"):
        return None
    return partial(libc.syscall, ctypes.c_long(number))


def exchange(a: Path, b: Path, *, use_libc: bool = True) -> bool:
    """Swap two existing paths atomically; False when the system cannot (nothing moved)."""
    call = _renameat2(use_libc)
    if call is None:
        return False
    at = ctypes.c_int(AT_FDCWD)
    if call(at, os.fsencode(a), at, os.fsencode(b), ctypes.c_uint(RENAME_EXCHANGE)) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))


def _remove(path: Path) -> bool:
    """Remove a file, symlink or tree without following links; True if something was there."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return False
    if not stat.S_ISDIR(mode):
        path.unlink(missing_ok=True)
        return True

    def retry(func: Callable[..., Any], name: str, exc: Any) -> None:
        if func not in (os.unlink, os.rmdir):
            raise exc[1]
        Path(name).parent.chmod(0o700)  # a read-only directory inside the tree
        func(name)

    shutil.rmtree(path, onerror=retry)
    return True


@contextlib.contextmanager
def _translated(what: str) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise ImportStoreError(f"{what}: {exc}") from exc


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        st = path.lstat()
    except (FileNotFoundError, NotADirectoryError):  # a parent that is not a directory
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


class ImportStore:
    """The active import of one view under `<root>/.runtime/shared_views/`.

    `state_dir` is memsync's state directory; the promotion record and `trust.json` live
    under `<state_dir>/views/<view>/` (`view` defaults to the heading). `use_exchange`
    None means "use RENAME_EXCHANGE when this system has it"; False forces the two-step.
    """

    def __init__(
        self,
        root_path: Path,
        heading: str,
        state_dir: Path,
        *,
        view: str | None = None,
        use_exchange: bool | None = None,
        recover_now: bool = False,
    ) -> None:
        self.heading = check_name("heading", heading)
        self.runtime_dir = runtime_dir(root_path)
        self.active_path = import_dir(root_path, heading)
        self.candidates_dir = candidates_dir(root_path)
        self.trust_path = trust_path(state_dir, view if view is not None else heading)
        self.record_path = self.trust_path.with_name("promotion.json")
        self.use_exchange = _renameat2() is not None if use_exchange is None else use_exchange
        if recover_now:
            self.recover()

    # -- layout -----------------------------------------------------------------------

    def _ensure_layout(self) -> None:
        private_dir(self.runtime_dir)
        ignore = self.runtime_dir / ".gitignore"
        try:
            lines = ignore.read_bytes().splitlines()
        except FileNotFoundError:
            lines = []
        if b"*" not in lines or any(line.startswith(b"!") for line in lines):
            write_bytes(ignore, GITIGNORE)
        private_dir(self.active_path.parent)
        private_dir(self.candidates_dir)

    def exists(self) -> bool:
        """True when the active import is a real directory (not a file or a symlink)."""
        return _identity(self.active_path) is not None

    def _is_candidate_name(self, name: str) -> bool:
        prefix, sep, token = name.rpartition("+")
        return sep == "+" and prefix == self.heading and len(token) == 16 and set(token) <= _HEX

    def _is_old_name(self, name: str) -> bool:
        prefix, sep, token = name.rpartition("+")
        return sep == "+" and prefix == self.heading and token.startswith("old-")

    def candidate_dir(self) -> Path:
        """A new, empty, private directory on the import's file system to extract into."""
        with _translated(f"could not create a candidate for {self.heading}"):
            self._ensure_layout()
            while True:
                path = self.candidates_dir / f"{self.heading}+{secrets.token_hex(8)}"
                with contextlib.suppress(FileExistsError):
                    path.mkdir(mode=0o700)
                    return path

    def _scratch(self) -> list[Path]:
        try:
            paths = sorted(self.candidates_dir.iterdir())
        except FileNotFoundError:
            return []
        return [p for p in paths if self._is_candidate_name(p.name) or self._is_old_name(p.name)]

    def remove_candidates(self) -> tuple[str, ...]:
        """Remove this heading's scratch directories; an old import is kept (restored)
        when it is the only copy left. Returns the names removed."""
        with _translated(f"could not remove candidates of {self.heading}"):
            return self._sweep()

    def _sweep(self) -> tuple[str, ...]:
        removed: list[str] = []
        scratch = self._scratch()
        if not self.exists():
            olds = [p for p in scratch if self._is_old_name(p.name)]
            if olds:  # only reachable without a record (tampering): keep the newest old
                newest = max(olds, key=lambda p: p.lstat().st_mtime_ns)
                _remove(self.active_path)
                newest.rename(self.active_path)
                scratch.remove(newest)
        for path in scratch:
            if _remove(path):
                removed.append(path.name)
        return tuple(removed)

    # -- promotion --------------------------------------------------------------------

    def promote(
        self,
        candidate: Path,
        revision: int,
        *,
        trust: TrustState | None = None,
        synced: bool = False,
    ) -> None:
        """Make `candidate` (from `candidate_dir()`, extracted and validated) the active
        import, then record `trust` (or the current state with this revision) in trust.json.
        `synced`: the caller already made the candidate's tree durable (`check_package`
        does); otherwise it is fsynced here, before the promotion record.
        """
        fault("view-after-extract")
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 0:
            raise ImportStoreError(f"invalid revision {revision!r}")
        if trust is not None and trust.revision != revision:
            raise ImportStoreError(f"trust names revision {trust.revision}, not {revision}")
        identity = _identity(candidate)
        ours = candidate.parent == self.candidates_dir and self._is_candidate_name(candidate.name)
        if not ours or identity is None:
            raise ImportStoreError(f"{candidate} is not a candidate directory of this store")
        try:
            self._ensure_layout()
            self._settle_record()
            if not synced:
                sync_tree(candidate)
            self._move(candidate, identity, revision, trust)
        except OSError as exc:
            with contextlib.suppress(OSError):
                self._settle_record()  # finish or undo now rather than at the next recover()
            raise ImportStoreError(f"could not promote revision {revision}: {exc}") from exc

    def _move(
        self, candidate: Path, identity: tuple[int, int], revision: int, trust: TrustState | None
    ) -> None:
        current = TrustState.load(self.trust_path)
        if trust is None:
            stamp = timefmt.rfc3339(timefmt.now())
            trust = replace(current, revision=revision, sha256=None, fetched_at=stamp)
        gone = "none" if current.revision is None else str(current.revision)
        old = self.candidates_dir / f"{self.heading}+old-{gone}"
        _remove(old)
        record = {
            "heading": self.heading,
            "revision": revision,
            "candidate": candidate.name,
            "old": old.name,
            "dev": identity[0],
            "ino": identity[1],
            "trust": trust.to_json(),
            "created_at": timefmt.rfc3339(timefmt.now()),
        }
        write_json(self.record_path, record)
        fault("view-after-record")
        if not os.path.lexists(self.active_path):
            candidate.rename(self.active_path)
        elif not (self.use_exchange and exchange(candidate, self.active_path)):
            self.use_exchange = False
            self.active_path.rename(old)
            fault("view-between-renames")
            candidate.rename(self.active_path)
        fsync_dir(self.active_path.parent)
        fsync_dir(self.candidates_dir)
        fault("view-after-swap")
        trust.save(self.trust_path)
        fault("view-after-trust-write")
        _remove(candidate)  # the old import after an exchange
        _remove(old)
        self.record_path.unlink(missing_ok=True)

    # -- recovery ---------------------------------------------------------------------

    def recover(self) -> Recovered:
        """Finish or undo an interrupted promotion, then sweep scratch directories.

        Call before every pull (with the view's lock held): afterwards the active import is
        the old or the new revision, trust.json matches it, and no scratch is left.
        """
        with _translated(f"could not recover the import of {self.heading}"):
            self._ensure_layout()
            settled = self._settle_record() or Recovered("none")
            removed = self._sweep()
        return replace(settled, removed=settled.removed + removed)

    def _settle_record(self) -> Recovered | None:
        if not os.path.lexists(self.record_path):
            return None
        record = self._parse_record(read_json(self.record_path))
        if record is None:
            self.record_path.unlink(missing_ok=True)
            return Recovered("discarded")
        revision, candidate, old, identity, trust = record
        new_active = _identity(self.active_path) == identity
        if not new_active and _identity(candidate) == identity and not self.exists():
            _remove(self.active_path)  # roll forward: first import, or between the renames
            candidate.rename(self.active_path)
            fsync_dir(self.active_path.parent)
            new_active = True
        removed = tuple(p.name for p in (candidate, old) if os.path.lexists(p))
        if new_active:
            current = TrustState.load(self.trust_path)
            if (current.revision, current.sha256) != (trust.revision, trust.sha256):
                trust.save(self.trust_path)
            _remove(candidate)
            _remove(old)
        else:
            _remove(candidate)  # the new import never became active
            if not self.exists() and _identity(old) is not None:
                _remove(self.active_path)
                old.rename(self.active_path)
                fsync_dir(self.active_path.parent)
                removed = tuple(n for n in removed if n != old.name)
        self.record_path.unlink(missing_ok=True)
        return Recovered("finished" if new_active else "undone", revision, removed)

    def _parse_record(self, raw: object) -> _Record | None:
        if not isinstance(raw, dict) or raw.get("heading") != self.heading:
            return None
        revision, dev, ino = raw.get("revision"), raw.get("dev"), raw.get("ino")
        cand, old = str(raw.get("candidate")), str(raw.get("old"))
        if not (isinstance(revision, int) and isinstance(dev, int) and isinstance(ino, int)):
            return None
        if not (self._is_candidate_name(cand) and self._is_old_name(old)):
            return None
        trust = replace(TrustState.from_json(raw.get("trust")), revision=revision)
        return revision, self.candidates_dir / cand, self.candidates_dir / old, (dev, ino), trust
