"""Pauses of the collector that overlap are one pause, on one thread or several: a fresh
sync reads its records on threads of their own beside an admission that pauses the
collector, and neither may turn it back on under the other (issue 18)."""

from __future__ import annotations

import gc
import threading

from memsync.validators.gcpause import gc_paused


def test_a_pause_ending_on_one_thread_leaves_another_threads_pause_on() -> None:
    assert gc.isenabled()
    began, ended, leave = threading.Event(), threading.Event(), threading.Event()

    def reader() -> None:  # a record read on a thread of its own
        with gc_paused():
            began.set()
            leave.wait(10)
        ended.set()

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        assert began.wait(10)
        with gc_paused():  # the admission, begun while the reader's pause is on
            leave.set()
            assert ended.wait(10)
            assert not gc.isenabled()  # the reader's pause ended: the admission's holds
        assert gc.isenabled()  # the last pause ended: the collector is back on
    finally:
        leave.set()
        thread.join(10)


def test_a_pause_begun_with_the_collector_off_leaves_it_off() -> None:
    gc.disable()
    try:
        with gc_paused(), gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_a_pause_begun_after_the_collector_was_turned_on_within_another_pauses() -> None:
    """Code that owns the switch may turn the collector on within a pause (a command once
    it has loaded): a pause begun then still pauses it, and it is on once the last ends."""
    gc.disable()
    try:
        with gc_paused():
            gc.enable()  # (say `cli.syncrun` once the gate has loaded)
            with gc_paused():
                assert not gc.isenabled()
        assert gc.isenabled()
    finally:
        gc.enable()
