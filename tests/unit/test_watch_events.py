"""The watcher's pure parts: the inotify mask asked of the kernel, and the bounded hand-off
of events from watchdog's watch groups."""

from __future__ import annotations

from types import SimpleNamespace

from watchdog.observers.inotify import InotifyEmitter
from watchdog.observers.inotify_c import InotifyConstants, InotifyEvent
from watchdog.observers.inotify_move_event_grouper import PathedInotifyEvent

from memsync.daemon.watch import CHANGES, MASK, MOVES_KEPT, _Handoff

READS = InotifyConstants.IN_OPEN | InotifyConstants.IN_ACCESS | InotifyConstants.IN_CLOSE_NOWRITE


def test_the_mask_is_the_one_watchdog_builds_for_the_changes_and_holds_no_read() -> None:
    duck = SimpleNamespace(
        _event_filter=frozenset(CHANGES), watch=SimpleNamespace(is_recursive=True)
    )
    assert InotifyEmitter.get_event_mask_from_filter(duck) == MASK  # type: ignore[arg-type]
    assert MASK & READS == 0
    for bit in (
        "IN_CREATE",
        "IN_MODIFY",
        "IN_CLOSE_WRITE",
        "IN_MOVE",
        "IN_DELETE",
        "IN_DELETE_SELF",
    ):
        needed = getattr(InotifyConstants, bit)
        assert MASK & needed == needed, bit


def event(mask: int, cookie: int, name: str) -> PathedInotifyEvent:
    return PathedInotifyEvent(InotifyEvent(1, mask, cookie, name.encode()), b"/r/" + name.encode())


def test_the_handoff_passes_every_path_on_and_remembers_moves_boundedly() -> None:
    heard: list[bytes] = []
    handoff = _Handoff(heard.append)
    for cookie in range(MOVES_KEPT + 50):
        handoff.put_event(event(InotifyConstants.IN_MOVED_FROM, cookie, f"d{cookie}"))
    assert len(heard) == MOVES_KEPT + 50
    assert len(handoff._moves) == MOVES_KEPT
    assert handoff.get_queued_moved_from_event(0) is None  # the oldest went first
    last = MOVES_KEPT + 49
    assert handoff.get_queued_moved_from_event(last) is not None
    handoff.put_event(event(InotifyConstants.IN_MOVED_TO, last, "to"))
    assert handoff.get_queued_moved_from_event(last) is None  # paired: forgotten
    assert heard[-1] == b"/r/to"
    assert handoff.read_event() is None  # nothing is ever queued
    handoff.put_event(event(InotifyConstants.IN_CREATE, 0, "x"))
    assert heard[-1] == b"/r/x"
