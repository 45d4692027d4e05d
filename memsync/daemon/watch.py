"""Watching roots with watchdog: a new local commit or an edit to a synchronized path
triggers the root's cycle (debounced); nothing else wakes the daemon.

Watched: the root's top level (not recursive), each synchronized subdirectory that exists
(`insight_logs/`, `shared_views/`, `update_queue/`, `update_records/`, recursive), the
`.git` directory itself (not recursive: `HEAD`, `packed-refs`) and `.git/refs/heads/`.
Object writes, the index and fetched refs are never watched, so a fetch or our own cycle
does not wake us. Only events that can mean a change are asked of the kernel (`CHANGES`:
creates, writes, attribute changes, moves, deletes, a close after writing): never opens,
reads or a close after reading, which `git status` and every reader cause by the thousand
(a 10,000-file root overflowed the inotify queue on every poll). Watchdog's threads only
hand events to the loop.

The watcher also vouches for a quiet root (`token`): a daemon cycle may reuse the root's
last `git status` while the token is the one read before that status
(`roots.statusmemo`). The token changes with every relevant event; it is None, and the
cycle runs its status, whenever the watches cannot have seen every write that status would
see: a watch that failed or whose thread ended, a stopped observer, an inotify queue
overflow (events were lost: watchdog only logs it, so its log record is counted), a
`.git` that is not a directory, or a top-level directory of the work tree that is not
watched (a tracked file in it could change unheard).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import threading
from collections.abc import Callable, Hashable
from pathlib import Path

from watchdog.events import (
    DirCreatedEvent,
    DirDeletedEvent,
    DirModifiedEvent,
    DirMovedEvent,
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileModifiedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer
from watchdog.observers.api import BaseObserver, ObservedWatch

from memsync.views.layout import RUNTIME_DIR

log = logging.getLogger(__name__)

SYNCED_DIRS = ("insight_logs", "shared_views", "update_queue", "update_records")
DEBOUNCE = 0.3  # edits: an editor may write several files in a burst
REF_DEBOUNCE = 0.05  # a commit moves a ref atomically: act on it almost at once
WRITES = frozenset({"created", "deleted", "modified", "moved", "closed"})
# The events watched, as an allowlist: watchdog turns it into the inotify mask, so the
# kernel never queues an open, a read or a close-without-write (`closed` is close-write).
CHANGES: tuple[type[FileSystemEvent], ...] = (
    FileCreatedEvent,
    DirCreatedEvent,
    FileModifiedEvent,
    DirModifiedEvent,
    FileMovedEvent,
    DirMovedEvent,
    FileDeletedEvent,
    DirDeletedEvent,
    FileClosedEvent,
)


# Every watcher gets its own number: a token is never the same across watchers.
_SERIALS = itertools.count(1)


class _Overflows(logging.Filter):
    """Counts watchdog's "Inotify queue overflowed" records (it has no other signal)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if str(record.msg).startswith("Inotify queue overflowed"):
            with self._lock:
                self.count += 1
        return True  # logged as before


OVERFLOWS = _Overflows()
WATCHDOG_LOGGERS = ("watchdog.observers.inotify_c", "watchdog.observers.inotify")


def unwatched_dirs(root: Path) -> bool:
    """Whether the work tree's top level holds a directory no watch covers (a tracked file
    in it could change unheard). The views' runtime directory is memsync's own and never
    watched: the cycle reuses no status while it holds a tracked file (`roots.cycle`)."""
    try:
        with os.scandir(root) as entries:
            for entry in entries:
                if entry.name in (".git", RUNTIME_DIR, *SYNCED_DIRS):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    return True
    except OSError:
        return True
    return False


def relevant(root: Path, path: str) -> bool:
    """Whether a file event at `path` can matter to the root's sync (pure)."""
    try:
        rel = Path(path).relative_to(root).as_posix()
    except ValueError:
        return False
    if rel in (".", ""):
        return False
    if rel.startswith(".git/") or rel == ".git":
        inner = rel.removeprefix(".git").lstrip("/")
        if inner.endswith(".lock"):
            return False
        return inner in ("HEAD", "packed-refs") or inner.startswith("refs/heads/")
    first = rel.split("/", 1)[0]
    return first != RUNTIME_DIR and not first.startswith(".#")


class _Handler(FileSystemEventHandler):
    def __init__(self, watcher: RootWatcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in WRITES:
            return  # never asked for (`CHANGES`); kept should a platform report them anyway
        for raw in (event.src_path, getattr(event, "dest_path", "")):
            path = raw.decode("utf-8", "surrogateescape") if isinstance(raw, bytes) else raw
            if path and relevant(self.watcher.root, path):
                self.watcher.loop.call_soon_threadsafe(self.watcher.touched, path)
                return


class RootWatcher:
    """One root's watches on a shared observer; `fire()` runs once per quiet burst."""

    def __init__(
        self,
        root: Path,
        observer: BaseObserver,
        fire: Callable[[], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.root = root
        self.observer = observer
        self.fire = fire
        self.loop = loop
        self._handler = _Handler(self)
        self._watches: dict[str, ObservedWatch] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._ref_due = False
        self._serial = next(_SERIALS)
        self._events = 0  # relevant events seen (counted on the loop)
        self._complete = False  # every watch `start` asked for is in place
        self._overflows = OVERFLOWS.count

    def start(self) -> None:
        self._overflows = OVERFLOWS.count
        self._complete = self._watch(self.root, recursive=False)
        git_dir = self.root / ".git"
        if git_dir.is_dir():
            self._complete &= self._watch(git_dir, recursive=False)
            self._complete &= self._watch(git_dir / "refs" / "heads", recursive=True)
        else:
            self._complete = False  # refs not watched: never vouch
        for name in SYNCED_DIRS:
            if (self.root / name).is_dir():
                self._complete &= self._watch(self.root / name, recursive=True)

    def token(self) -> Hashable | None:
        """On the loop: a value that changes with every relevant event, or None when the
        watches cannot vouch that they heard every write (see the module docstring)."""
        if not self._complete or OVERFLOWS.count != self._overflows:
            return None
        if not self.observer.is_alive():
            return None
        alive = self._alive()
        if any(watch not in alive for watch in self._watches.values()):
            return None
        if unwatched_dirs(self.root):
            return None
        return (self._serial, self._events)

    def _watch(self, path: Path, *, recursive: bool) -> bool:
        """Watch `path`; False when it could not be watched."""
        key = str(path)
        old = self._watches.get(key)
        if old is not None:
            if old in self._alive():
                return True
            del self._watches[key]  # its directory went away (and may be back): watch anew
            with contextlib.suppress(KeyError, OSError):
                self.observer.unschedule(old)
        if not path.is_dir():
            return False
        try:
            self._watches[key] = self.observer.schedule(
                self._handler, key, recursive=recursive, event_filter=list(CHANGES)
            )
        except OSError as exc:  # inotify limits, a directory that just vanished
            log.warning("cannot watch %s: %s", path, exc)
            return False
        return True

    def _alive(self) -> set[ObservedWatch]:
        return {e.watch for e in self.observer.emitters if e.is_alive()}

    def touched(self, path: str) -> None:
        """On the loop: a relevant path changed; (re)arm the debounce timer."""
        rel = Path(path).relative_to(self.root).as_posix()
        if rel in SYNCED_DIRS and (self.root / rel).is_dir():
            # Created after we started: watched from now on (else never vouch again).
            self._complete &= self._watch(self.root / rel, recursive=True)
        self._events += 1  # after the watch above: a later status sees what it misses
        ref = rel.startswith(".git")
        delay = REF_DEBOUNCE if ref else DEBOUNCE
        if self._timer is not None:
            if ref and self._timer.when() <= self.loop.time() + delay:
                return  # a commit: already due at least as soon
            if not ref and self._ref_due:
                return  # edits do not postpone a commit's cycle (it reports them too)
            self._timer.cancel()
        self._ref_due = ref
        self._timer = self.loop.call_later(delay, self._fired)

    def _fired(self) -> None:
        self._timer = None
        self._ref_due = False
        self.fire()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        for watch in self._watches.values():
            with contextlib.suppress(KeyError, OSError):
                self.observer.unschedule(watch)
        self._watches.clear()


def new_observer() -> BaseObserver:
    for name in WATCHDOG_LOGGERS:
        logger = logging.getLogger(name)
        if OVERFLOWS not in logger.filters:
            logger.addFilter(OVERFLOWS)
        if not logger.isEnabledFor(logging.WARNING):
            logger.setLevel(logging.WARNING)  # else an overflow would go uncounted
    observer = Observer()
    observer.daemon = True
    return observer
