"""The watcher's token, with a real watchdog observer on a real directory: it changes with
every relevant write and is None whenever the watches cannot vouch for the work tree."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from memsync.daemon.watch import RootWatcher, new_observer


async def settle(predicate: object, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.02)


@pytest.fixture
async def watcher(tmp_path: Path) -> AsyncIterator[RootWatcher]:
    (tmp_path / ".git" / "refs" / "heads").mkdir(parents=True)
    (tmp_path / "insight_logs").mkdir()
    (tmp_path / "insight_logs" / "a.md").write_text("# A\n")
    observer = new_observer()
    observer.start()
    fired: list[int] = []
    root = RootWatcher(tmp_path, observer, lambda: fired.append(1), asyncio.get_running_loop())
    root.start()
    try:
        yield root
    finally:
        root.stop()
        observer.stop()
        observer.join(timeout=10)


async def test_the_token_changes_with_a_write_and_not_with_a_read(watcher: RootWatcher) -> None:
    quiet = watcher.token()
    assert quiet is not None
    (watcher.root / "insight_logs" / "a.md").read_bytes()
    (watcher.root / ".git" / "index").write_bytes(b"not watched: the marks cover it")
    await asyncio.sleep(0.3)  # a window for an event that must not come
    assert watcher.token() == quiet
    (watcher.root / "insight_logs" / "a.md").write_text("# A, edited\n")
    await settle(lambda: watcher.token() != quiet)
    assert watcher.token() is not None


async def test_a_new_synced_directory_is_watched_before_the_token_moves(
    watcher: RootWatcher,
) -> None:
    quiet = watcher.token()
    (watcher.root / "update_records").mkdir()
    await settle(lambda: watcher.token() != quiet)
    moved = watcher.token()
    assert moved is not None
    (watcher.root / "update_records" / "x.json").write_text("{}\n")
    await settle(lambda: watcher.token() != moved)


async def test_an_overflow_an_unwatched_directory_or_a_stopped_observer_never_vouch(
    watcher: RootWatcher,
) -> None:
    assert watcher.token() is not None
    (watcher.root / "notes").mkdir()  # a tracked file in it would change unheard
    await settle(lambda: watcher.token() is None)
    (watcher.root / "notes").rmdir()
    await settle(lambda: watcher.token() is not None)
    # watchdog's only signal that the kernel dropped events is its log record
    logging.getLogger("watchdog.observers.inotify_c").warning(
        "Inotify queue overflowed; filesystem events were lost"
    )
    await asyncio.sleep(0.1)
    assert watcher.token() is None  # for good: only a new start vouches again
    watcher.observer.stop()
    watcher.observer.join(timeout=10)
    assert watcher.token() is None


async def test_a_deleted_synced_directory_stops_vouching_until_it_is_watched_again(
    watcher: RootWatcher,
) -> None:
    assert watcher.token() is not None
    logs = watcher.root / "insight_logs"
    (logs / "a.md").unlink()
    logs.rmdir()
    await settle(lambda: watcher.token() is None)  # its watch went with it
    logs.mkdir()  # heard at the top level: watched anew
    await settle(lambda: watcher.token() is not None)
    again = watcher.token()
    (logs / "b.md").write_text("# B\n")
    await settle(lambda: watcher.token() != again)


async def test_directories_created_or_moved_inside_a_synced_directory_are_watched(
    watcher: RootWatcher,
) -> None:
    logs = watcher.root / "insight_logs"
    (logs / "deep" / "er").mkdir(parents=True)
    await settle(lambda: watcher.token() is not None)
    quiet = watcher.token()
    (logs / "deep" / "er" / "x.md").write_text("# X\n")
    await settle(lambda: watcher.token() != quiet)
    (logs / "deep").rename(logs / "moved")
    await settle(lambda: watcher.token() != quiet)
    await asyncio.sleep(0.1)
    moved = watcher.token()
    (logs / "moved" / "er" / "y.md").write_text("# Y\n")  # under its new name
    await settle(lambda: watcher.token() != moved)


async def test_many_roots_share_one_reader_thread(tmp_path: Path) -> None:
    observer = new_observer()
    observer.start()
    before = threading.active_count()
    watchers = []
    try:
        for i in range(30):
            root = tmp_path / f"r{i}"
            (root / ".git" / "refs" / "heads").mkdir(parents=True)
            (root / "insight_logs").mkdir()
            watcher = RootWatcher(root, observer, lambda: None, asyncio.get_running_loop())
            watcher.start()
            watchers.append(watcher)
        assert all(w.token() is not None for w in watchers)
        assert threading.active_count() == before  # no thread per root or per watch
        last = watchers[-1]
        quiet = last.token()
        (last.root / "insight_logs" / "a.md").write_text("# A\n")
        await settle(lambda: last.token() != quiet)
    finally:
        for watcher in watchers:
            watcher.stop()
        observer.stop()
        observer.join(timeout=10)
    assert not observer.is_alive()


async def test_a_closed_loop_never_ends_the_reader_every_root_shares(tmp_path: Path) -> None:
    observer = new_observer()
    observer.start()
    gone, live = tmp_path / "gone", tmp_path / "live"
    for root in (gone, live):
        (root / ".git" / "refs" / "heads").mkdir(parents=True)
        (root / "insight_logs").mkdir()
    closed = asyncio.new_event_loop()
    closed.close()
    dead = RootWatcher(gone, observer, lambda: None, closed)
    alive = RootWatcher(live, observer, lambda: None, asyncio.get_running_loop())
    try:
        dead.start()
        alive.start()
        (gone / "insight_logs" / "a.md").write_text("# A\n")  # heard on a closed loop
        quiet = alive.token()
        (live / "insight_logs" / "b.md").write_text("# B\n")
        await settle(lambda: alive.token() != quiet)
        assert observer.is_alive()
    finally:
        dead.stop()
        alive.stop()
        observer.stop()
        observer.join(timeout=10)
