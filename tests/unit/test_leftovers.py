"""The leftover-process guard itself: a test's detached process is found, killed and named."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests import leftovers


@pytest.mark.skipif(not leftovers.become_subreaper(), reason="needs PR_SET_CHILD_SUBREAPER")
def test_a_detached_grandchild_is_found_killed_and_named() -> None:
    before = set(leftovers.children())
    # The shell exits at once; its setsid'd sleep is an orphan in a session of its own.
    subprocess.run(
        ["sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 &"],
        check=True,
        capture_output=True,
    )
    left = leftovers.settle(before, grace=0.2)
    assert [c.command for c in left] == ["sleep 300"]
    assert all(not os.path.exists(f"/proc/{c.pid}") for c in left)


@pytest.mark.skipif(not leftovers.become_subreaper(), reason="needs PR_SET_CHILD_SUBREAPER")
def test_a_finished_orphan_is_reaped_and_not_blamed() -> None:
    before = set(leftovers.children())
    subprocess.run(["sh", "-c", "(true &) ; exit 0"], check=True)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    assert leftovers.settle(before, grace=0.2) == []
    assert not [c for pid, c in leftovers.children().items() if pid not in before]


@pytest.mark.skipif(not leftovers.become_subreaper(), reason="needs PR_SET_CHILD_SUBREAPER")
def test_the_threads_child_lists_name_every_child_a_scan_of_proc_finds() -> None:
    """The guard reads its threads' `children` lists rather than every process: they must
    name what a scan of /proc names, whichever thread started a child or adopted an orphan."""
    import threading  # noqa: PLC0415

    before = set(leftovers.children())
    started: list[subprocess.Popen[bytes]] = [subprocess.Popen(["sleep", "30"])]
    thread = threading.Thread(target=lambda: started.append(subprocess.Popen(["sleep", "30"])))
    thread.start()
    thread.join()
    subprocess.run(["sh", "-c", "setsid sleep 30 </dev/null >/dev/null 2>&1 &"], check=True)
    done = subprocess.Popen(["true"])  # a zombie until reaped
    try:
        scanned = {
            int(e.name)
            for e in os.scandir("/proc")
            if e.name.isdigit() and leftovers._child(int(e.name))
        }
        assert len(scanned) >= 4
        assert set(leftovers.children()) == scanned
    finally:
        for proc in started:
            proc.kill()
            proc.wait()
        done.wait()
        leftovers.settle(before, grace=0)  # the setsid'd orphan
