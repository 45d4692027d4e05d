"""A shape record being read ahead on another thread is read once: the `load` that asks
for it meanwhile waits for that reading (`ShapeStore.expect`) instead of reading and
checking the record again itself (a 10k-file tree's record is some milliseconds of work),
and gets what a `load` alone gets."""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

from memsync.validators.gate import validate_tree
from memsync.validators.shapestore import ShapeStore
from memsync.validators.tree import MODE_FILE, Entry
from tests.unit.test_gate_incremental import POLICY, NoGraph, Told
from tests.unit.test_shape_records import recording, same_shape, tree_id


def _waiting(thread: threading.Thread, deadline: float) -> bool:
    """Whether `thread` is blocked in a wait (polled until `deadline`)."""
    while time.monotonic() < deadline:
        frame = sys._current_frames().get(thread.ident or -1)
        while frame is not None:
            if frame.f_code.co_name == "wait" and "threading" in frame.f_code.co_filename:
                return True
            frame = frame.f_back
        if not thread.is_alive():
            return False
        thread.join(0.001)  # (polled: the thread may finish meanwhile)
    return False


def test_a_load_waits_for_the_record_being_read_ahead() -> None:
    files = {f"MEMORY_{n}.md": Entry(MODE_FILE, 4, f"{n:040x}", b"# M\n") for n in range(50)}
    with tempfile.TemporaryDirectory() as tmp, recording(Path(tmp)):
        oid = tree_id()
        validate_tree(Told(files, oid), POLICY, NoGraph())  # the record a process left
        fresh = ShapeStore.open(Path(tmp))
        assert fresh is not None
        prepared: list[str] = []
        go = threading.Event()
        real = fresh._prepare

        def preparing(*args: object) -> object:
            prepared.append(threading.current_thread().name)
            if threading.current_thread().name == "reader":
                go.wait(10)  # the reader is slow: the load comes first
            return real(*args)  # type: ignore[arg-type]

        fresh._prepare = preparing  # type: ignore[method-assign]
        read = fresh.expect(oid, POLICY)
        got: list[object] = []
        loader = threading.Thread(target=lambda: got.append(fresh.load(oid, POLICY, files)))
        loader.start()
        reader = threading.Thread(target=read, name="reader")
        try:
            assert _waiting(loader, time.monotonic() + 10), "the load did not wait"
            reader.start()
        finally:
            go.set()
            loader.join()
            if reader.ident is not None:
                reader.join()
        assert prepared == ["reader"]  # read once, by the reader
        shape = got[0]
        assert shape is not None and fresh.loads == 1
        same_shape(shape, files)  # type: ignore[arg-type]
