"""Watching roots with watchdog: a new local commit or an edit to a synchronized path
triggers the root's cycle (debounced); nothing else wakes the daemon.

Watched: the root's top level (not recursive), each synchronized subdirectory that exists
(`insight_logs/`, `shared_views/`, `update_queue/`, `update_records/`, recursive), the
`.git` directory itself (not recursive: `HEAD`, `packed-refs`) and `.git/refs/heads/`.
Object writes, the index and fetched refs are never watched, so a fetch or our own cycle
does not wake us. Only events that can mean a change are asked of the kernel (`CHANGES`:
creates, writes, attribute changes, moves, deletes, a close after writing): never opens,
reads or a close after reading, which `git status` and every reader cause by the thousand
(a 10,000-file root overflowed the inotify queue on every poll).

Threads: one for every root together (`Watches`: one inotify instance and its reader
thread, whatever the number of roots or watches; the reader only hands paths to the loop).
Watchdog's `Observer` runs a thread per watched path (an emitter per `schedule`): three or
more per root, 614 threads for 200 roots (issue 18). Watchdog's inotify watch groups are
kept (recursive watches follow created and moved directories, an overflow rebuilds them),
with their events handed on as they are read instead of queued for an emitter thread.

The watcher also vouches for a quiet root (`token`): a daemon cycle may reuse the root's
last `git status` while the token is the one read before that status
(`roots.statusmemo`). The token changes with every relevant event; it is None, and the
cycle runs its status, whenever the watches cannot have seen every write that status would
see: a watch that failed or whose directory went away, a stopped reader thread, an inotify
queue overflow (events were lost: watchdog only logs it, so its log record is counted), a
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
from collections import OrderedDict
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
)
from watchdog.observers.inotify import InotifyWatchGroup
from watchdog.observers.inotify_c import InotifyConstants, InotifyFD, Mask
from watchdog.observers.inotify_move_event_grouper import (
    GroupedInotifyEvent,
    InotifyMoveEventGrouper,
    PathedInotifyEvent,
)

from memsync.validators.paths import RUNTIME_DIR

log = logging.getLogger(__name__)

SYNCED_DIRS = ("insight_logs", "shared_views", "update_queue", "update_records")
DEBOUNCE = 0.3  # edits: an editor may write several files in a burst
REF_DEBOUNCE = 0.05  # a commit moves a ref atomically: act on it almost at once
# The events watched, as an allowlist: `MASK` is the inotify mask they need, so the kernel
# never queues an open, a read or a close-without-write (`closed` is close-write).
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
_BITS: dict[type[FileSystemEvent], int] = {
    FileCreatedEvent: InotifyConstants.IN_MOVE | InotifyConstants.IN_CREATE,
    DirCreatedEvent: InotifyConstants.IN_MOVE | InotifyConstants.IN_CREATE,
    FileModifiedEvent: InotifyConstants.IN_ATTRIB | InotifyConstants.IN_MODIFY,
    DirModifiedEvent: (
        InotifyConstants.IN_MOVE
        | InotifyConstants.IN_ATTRIB
        | InotifyConstants.IN_MODIFY
        | InotifyConstants.IN_CREATE
        | InotifyConstants.IN_CLOSE_WRITE
    ),
    FileMovedEvent: InotifyConstants.IN_MOVE,
    DirMovedEvent: InotifyConstants.IN_MOVE,
    FileDeletedEvent: InotifyConstants.IN_DELETE,
    DirDeletedEvent: InotifyConstants.IN_DELETE,
    FileClosedEvent: InotifyConstants.IN_CLOSE_WRITE,
}


def event_mask(events: tuple[type[FileSystemEvent], ...]) -> Mask:
    """The inotify mask for `events` (pure; as watchdog's emitter builds it, plus a watched
    directory's own deletion and creations, which recursive watches need)."""
    mask = InotifyConstants.IN_DELETE_SELF | InotifyConstants.IN_CREATE
    for cls in events:
        mask |= _BITS[cls]
    return Mask(mask)


MASK = event_mask(CHANGES)
MOVES_KEPT = 256  # unpaired moved-from events remembered per watch group (bounded)


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


class _Handoff(InotifyMoveEventGrouper):
    """In place of watchdog's delayed queue: every event's path goes to `heard` as it is
    read (on the reader thread); a moved-from event is remembered, boundedly, so the watch
    group can follow a directory moved within it."""

    def __init__(self, heard: Callable[[bytes], None]) -> None:  # no queue: nothing waits
        self._heard = heard
        self._moves: OrderedDict[int, PathedInotifyEvent] = OrderedDict()

    def put_event(self, event: PathedInotifyEvent) -> None:
        if event.ev.is_moved_from:
            self._moves[event.ev.cookie] = event
            while len(self._moves) > MOVES_KEPT:
                self._moves.popitem(last=False)
        elif event.ev.is_moved_to:
            self._moves.pop(event.ev.cookie, None)
        self._heard(event.path)

    def get_queued_moved_from_event(self, cookie: int) -> PathedInotifyEvent | None:
        return self._moves.get(cookie)

    def read_event(self) -> GroupedInotifyEvent | None:
        return None  # never queued

    def discard_pending_events(self) -> None:
        self._moves.clear()

    def close(self) -> None:
        self._moves.clear()


class _Group(InotifyWatchGroup):
    """Watchdog's watch group for one path (recursive or not) on the shared inotify
    instance, its events handed off as read."""

    def __init__(
        self, fd: InotifyFD, path: Path, *, recursive: bool, heard: Callable[[bytes], None]
    ) -> None:
        self._handoff = _Handoff(heard)
        super().__init__(fd, os.fsencode(path), event_mask=MASK, is_recursive=recursive)

    def __post_init__(self) -> None:
        self._move_event_grouper = self._handoff  # before the watches exist
        super().__post_init__()

    def alive(self) -> bool:
        """Whether the path itself is still watched (its directory was not deleted)."""
        with self._lock:
            return self.is_active and self.path in self._active_callbacks_by_path


class Watches:
    """Every root's watches on one inotify instance read by one thread (`start`/`stop`)."""

    def __init__(self) -> None:
        self._fd: InotifyFD | None = None
        self._lock = threading.Lock()

    def _instance(self) -> InotifyFD:
        with self._lock:
            if self._fd is None:
                self._fd = InotifyFD()
                self._fd.name = "memsync-inotify"
            return self._fd

    def start(self) -> None:
        self._instance().start()

    def stop(self) -> None:
        """Closes the instance (every watch with it) and ends the reader thread."""
        fd = self._fd
        if fd is None:
            return
        if fd.is_alive():
            fd.stop()  # the reader closes the descriptors as it ends
        elif not fd.is_alive() and fd.ident is None:
            fd.close()
            fd._close_resources()  # never started: no reader to close them

    def join(self, timeout: float | None = None) -> None:
        fd = self._fd
        if fd is not None and fd.is_alive():
            fd.join(timeout)

    def is_alive(self) -> bool:
        return self._fd is not None and self._fd.is_alive()

    def watch(self, path: Path, *, recursive: bool, heard: Callable[[bytes], None]) -> _Group:
        """Watch `path`; OSError when it cannot be (inotify limits, a vanished directory)."""
        return _Group(self._instance(), path, recursive=recursive, heard=heard)


class RootWatcher:
    """One root's watches on the shared `Watches`; `fire()` runs once per quiet burst."""

    def __init__(
        self,
        root: Path,
        observer: Watches,
        fire: Callable[[], None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.root = root
        self.observer = observer
        self.fire = fire
        self.loop = loop
        self._watches: dict[str, _Group] = {}
        self._timer: asyncio.TimerHandle | None = None
        self._ref_due = False
        self._serial = next(_SERIALS)
        self._events = 0  # relevant events seen (counted on the loop)
        self._complete = False  # every watch `start` asked for is in place
        self._overflows = OVERFLOWS.count

    def _heard(self, raw: bytes) -> None:
        """On the reader thread: a path changed; the loop hears of it if it matters."""
        path = raw.decode("utf-8", "surrogateescape")
        if relevant(self.root, path):
            # The loop closes after the reader at shutdown; an event in between is moot
            # (and raising here would end the one reader every root shares).
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.touched, path)

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
        if not all(group.alive() for group in self._watches.values()):
            return None
        if unwatched_dirs(self.root):
            return None
        return (self._serial, self._events)

    def _watch(self, path: Path, *, recursive: bool) -> bool:
        """Watch `path`; False when it could not be watched."""
        key = str(path)
        old = self._watches.get(key)
        if old is not None:
            if old.alive():
                return True
            del self._watches[key]  # its directory went away (and may be back): watch anew
            with contextlib.suppress(KeyError, OSError):
                old.deactivate()
        if not path.is_dir():
            return False
        try:
            self._watches[key] = self.observer.watch(path, recursive=recursive, heard=self._heard)
        except OSError as exc:  # inotify limits, a directory that just vanished
            log.warning("cannot watch %s: %s", path, exc)
            return False
        return True

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
        for group in self._watches.values():
            with contextlib.suppress(KeyError, OSError):
                group.deactivate()
        self._watches.clear()


def new_observer() -> Watches:
    for name in WATCHDOG_LOGGERS:
        logger = logging.getLogger(name)
        if OVERFLOWS not in logger.filters:
            logger.addFilter(OVERFLOWS)
        if not logger.isEnabledFor(logging.WARNING):
            logger.setLevel(logging.WARNING)  # else an overflow would go uncounted
    return Watches()
