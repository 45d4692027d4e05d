"""The daemon's watcher asks the kernel only for events that can mean a change: reading a
root (as `git status` and every reader do, by the thousand) queues nothing and runs no
cycle; writing does."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.helpers import wait_for

IN_ACCESS, IN_CLOSE_NOWRITE, IN_OPEN = 0x1, 0x10, 0x20


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


def inotify_masks(pid: int) -> list[int]:
    """The event mask of every inotify watch the process holds, as the kernel shows it."""
    masks: list[int] = []
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(fd) != "anon_inode:inotify":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{fd.name}").read_text()
        except OSError:
            continue  # closed meanwhile
        for line in info.splitlines():
            if line.startswith("inotify "):
                fields = dict(part.split(":", 1) for part in line.split()[1:])
                masks.append(int(fields["mask"], 16))
    return masks


def git_recorder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A `git` on PATH that logs each call (one line) and runs the real one."""
    log = tmp_path / "git-calls.log"
    wrapper = tmp_path / "git-bin"
    wrapper.mkdir()
    real = subprocess.run(
        ["sh", "-c", "command -v git"], capture_output=True, text=True, check=True
    ).stdout.strip()
    (wrapper / "git").write_text(f'#!/bin/sh\necho "$@" >> {log}\nexec {real} "$@"\n')
    (wrapper / "git").chmod(0o755)
    return log, {"PATH": f"{wrapper}:{os.environ['PATH']}"}


def statuses(log: Path) -> int:
    """Cycles run so far: each starts with one `git status`."""
    text = log.read_text() if log.exists() else ""
    return sum(1 for line in text.splitlines() if " status " in f" {line} ")


def test_reads_queue_no_event_and_run_no_cycle_while_a_write_does(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    logs = team.bob.path / "insight_logs"
    logs.mkdir()
    for i in range(50):
        (logs / f"log-{i}.md").write_text(f"# Log {i}\n")
    log, env = git_recorder(tmp_path)
    config = write_config(
        tmp_path, {"bob": {"path": team.bob.path, "watch": "true", "interval": "10m"}}
    )
    daemon = start(config, env=env)
    wait_for(lambda: daemon.status().roots[0].status is not None, 20, "the start-up cycle")
    masks = inotify_masks(daemon.proc.pid)
    assert masks, "the daemon watches the root"
    for mask in masks:  # the kernel never queues an open, a read or a close after reading
        assert mask & (IN_ACCESS | IN_CLOSE_NOWRITE | IN_OPEN) == 0, hex(mask)
    settled = statuses(log)
    for _ in range(3):  # read every file, the way `git status` hashes them
        for path in [*logs.iterdir(), team.bob.path / "MEMORY.md", team.bob.path / ".git/HEAD"]:
            path.read_bytes()
    time.sleep(1.5)  # an observation window, several debounce periods: nothing may run
    assert statuses(log) == settled, log.read_text()
    (logs / "log-new.md").write_text("# New\n")  # a write: the cycle runs
    wait_for(lambda: statuses(log) > settled, 20, "a cycle after the write")
