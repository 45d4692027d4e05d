"""The process box: whole process groups killed at the deadline; one deadline spans calls."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

from memsync.errors import GitTimeout
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.transports.git import Git
from memsync.transports.process import PIPE_GRACE, Deadline, run_process
from tests.conftest import Team
from tests.helpers import commit, wait_for
from tests.kit import settings_for


def _gone(pattern: str) -> bool:
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, check=False)
    return found.returncode == 1


def test_a_deadline_kills_the_whole_group(tmp_path: Path) -> None:
    script = "sleep 27.1828 & sleep 27.1828; wait"
    started = time.monotonic()
    done = run_process(["sh", "-c", script], cwd=tmp_path, env=dict(os.environ), seconds=0.3)
    assert done.expired and done.returncode != 0
    assert time.monotonic() - started < 5
    wait_for(lambda: _gone("sleep 27.1828"), what="the grandchild to be killed too")


def test_a_fast_process_is_not_marked_expired(tmp_path: Path) -> None:
    done = run_process(["sh", "-c", "echo hi; exit 3"], cwd=tmp_path, env={}, seconds=10)
    assert (done.returncode, done.stdout, done.expired) == (3, b"hi\n", False)


def test_one_deadline_bounds_many_git_calls(tmp_path: Path) -> None:
    """Each call is well under the per-call limit; together they overrun the deadline."""
    repo = tmp_path / "r"
    repo.mkdir()
    box = Git(repo, timeout=60, deadline=Deadline.after(1.0))
    box.run("init", "-q")
    started = time.monotonic()
    with pytest.raises(GitTimeout) as raised:
        for _ in range(100):
            box.run("fetch", "--upload-pack=sleep 0.3; exit 1 #", str(repo), check=False)
    assert time.monotonic() - started < 3
    assert "1s" in raised.value.message


def test_a_sync_cycle_stops_at_sync_timeout_as_a_whole(
    team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A git that takes 0.4 s per call: each call is under `sync.timeout` (1.5 s), the cycle
    (a dozen calls) is not; it must end near 1.5 s as `offline`, not run 12 x 0.4 s."""
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    commit(team.bob.path, {"MEMORY_b.md": "# B\n"})  # a merge: a score of git calls
    slow = tmp_path / "slow-bin"
    slow.mkdir()
    real = shutil.which("git")
    (slow / "git").write_text(f'#!/bin/sh\nsleep 0.4\nexec {real} "$@"\n')
    (slow / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}:{os.environ['PATH']}")
    bob = settings_for("bob", team.bob.path, timeout=timedelta(seconds=1.5))
    started = time.monotonic()
    result = sync_root(bob, team.bob.state_dir, SyncOptions())
    elapsed = time.monotonic() - started
    assert result.status == "offline", result.message
    assert "time limit" in result.message or "did not finish" in result.message
    assert elapsed < 3.0


def _dead(pid: int) -> bool:
    stat = Path(f"/proc/{pid}/stat")
    try:
        return stat.read_text().split(") ", 1)[-1][:1] == "Z"  # killed, waiting for init
    except FileNotFoundError:
        return True


def test_an_untrusted_program_leaves_nothing_running_when_it_exits(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = f"sleep 300 >/dev/null 2>&1 </dev/null & echo $! > {pidfile}; echo done"
    done = run_process(
        ["sh", "-c", script], cwd=tmp_path, env=dict(os.environ), seconds=30, keep=1000
    )
    assert done.returncode == 0 and done.stdout == b"done\n" and not done.expired
    wait_for(lambda: _dead(int(pidfile.read_text())), 10, "the left-behind child to be killed")


def test_git_style_runs_leave_their_group_alone(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = f"sleep 300 >/dev/null 2>&1 </dev/null & echo $! > {pidfile}"
    assert (
        run_process(["sh", "-c", script], cwd=tmp_path, env=dict(os.environ), seconds=30).returncode
        == 0
    )
    child = int(pidfile.read_text())
    try:
        assert not _dead(child)  # without `keep`, nothing beyond the deadline's kill
    finally:
        os.kill(child, 9)


MEASURE = """\
import sys, tracemalloc
from pathlib import Path
from memsync.transports.process import run_process
tracemalloc.start()
done = run_process(
    [sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'x' * (300 << 20) + b'END')"],
    cwd=Path("."), env={"PATH": "/usr/bin:/bin"}, seconds=60, keep=1000,
)
assert done.returncode == 0 and done.stdout.endswith(b"END") and len(done.stdout) == 1001
print(tracemalloc.get_traced_memory()[1] >> 20)
"""


def test_an_untrusted_programs_output_is_held_to_its_cap_while_it_runs(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", MEASURE], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    # MiB at the peak of what Python allocated while 300 MiB went through: held whole, the
    # output would take 300-600 MiB; read 64 KiB at a time and cut to `keep`, well under 1.
    # (Not the process's maximum RSS: the kernel's figure reached 329 MiB in a loaded run
    # while Python held under 1 MiB.)
    assert int(done.stdout) < 8, done.stdout


def _kill_marked(marker: str) -> None:
    """Kill whatever a test left running with `marker` in its argv (never a broad name)."""
    found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True, check=False)
    for pid in found.stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(pid), 9)


def _escaping(tmp_path: Path, marker: str) -> str:
    """Shell that leaves `sleep <marker>` in a new session (out of the process group),
    holding stdout, and goes on once it is there (so no group kill can beat it)."""
    flag = tmp_path / f"in-session-{marker}"
    return (
        f"setsid sh -c 'echo $$ > {flag}; exec sleep {marker}' & "
        f"while [ ! -s {flag} ]; do sleep 0.01; done; "
    )


@pytest.mark.parametrize("keep", [1000, None], ids=["untrusted", "git-style"])
def test_a_process_that_left_the_group_holding_stdout_cannot_hold_the_run_open(
    tmp_path: Path, keep: int | None
) -> None:
    marker = "613.1415" if keep else "613.2718"
    script = _escaping(tmp_path, marker) + "echo started"
    started = time.monotonic()
    try:
        done = run_process(
            ["sh", "-c", script], cwd=tmp_path, env=dict(os.environ), seconds=30, keep=keep
        )
        elapsed = time.monotonic() - started
        assert done.returncode == 0 and done.stdout == b"started\n" and not done.expired
        assert elapsed < PIPE_GRACE + 3, elapsed
        if keep is not None:  # an untrusted program's holder is found, killed and reported
            assert done.escaped
            wait_for(lambda: _gone(f"sleep {marker}"), 10, "the escaped holder to be killed")
        else:
            assert not done.escaped  # git's children are not hunted; the run just ends
    finally:
        _kill_marked(f"sleep {marker}")


def test_the_deadline_ends_a_run_whatever_holds_its_pipes(tmp_path: Path) -> None:
    marker = "613.3141"
    script = _escaping(tmp_path, marker) + "sleep 30"
    started = time.monotonic()
    try:
        done = run_process(
            ["sh", "-c", script], cwd=tmp_path, env=dict(os.environ), seconds=0.5, keep=1000
        )
        elapsed = time.monotonic() - started
        assert done.expired and done.escaped
        assert elapsed < 0.5 + PIPE_GRACE + 3, elapsed
    finally:
        _kill_marked(f"sleep {marker}")


def test_a_tidy_program_is_not_reported_as_escaped(tmp_path: Path) -> None:
    script = "sleep 0.2 & echo done; wait"
    done = run_process(["sh", "-c", script], cwd=tmp_path, env={}, seconds=30, keep=1000)
    assert (done.returncode, done.stdout, done.escaped) == (0, b"done\n", False)
