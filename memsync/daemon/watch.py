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
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
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

    def start(self) -> None:
        self._watch(self.root, recursive=False)
        git_dir = self.root / ".git"
        if git_dir.is_dir():
            self._watch(git_dir, recursive=False)
            self._watch(git_dir / "refs" / "heads", recursive=True)
        for name in SYNCED_DIRS:
            self._watch(self.root / name, recursive=True)

    def _watch(self, path: Path, *, recursive: bool) -> None:
        key = str(path)
        if key in self._watches or not path.is_dir():
            return
        try:
            self._watches[key] = self.observer.schedule(
                self._handler, key, recursive=recursive, event_filter=list(CHANGES)
            )
        except OSError as exc:  # inotify limits, a directory that just vanished
            log.warning("cannot watch %s: %s", path, exc)

    def touched(self, path: str) -> None:
        """On the loop: a relevant path changed; (re)arm the debounce timer."""
        rel = Path(path).relative_to(self.root).as_posix()
        if rel in SYNCED_DIRS:
            self._watch(self.root / rel, recursive=True)  # created after we started
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
    observer = Observer()
    observer.daemon = True
    return observer
