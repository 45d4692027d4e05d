"""The process box: whole process groups killed at the deadline; one deadline spans calls."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest

from memsync.errors import GitTimeout
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.transports.git import Git
from memsync.transports.process import Deadline, run_process
from tests.conftest import Team
from tests.helpers import commit, settings_for, wait_for


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
