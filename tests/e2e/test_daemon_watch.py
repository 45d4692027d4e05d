"""The daemon's watcher asks the kernel only for events that can mean a change: reading a
root (as `git status` and every reader do, by the thousand) queues nothing and runs no
cycle; writing does."""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.e2e.test_cli import memsync
from tests.helpers import commit, git, wait_for

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
    daemon.wait_status(lambda s: s.roots[0].status is not None, 20, "the start-up cycle")
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


def calls(log: Path) -> list[str]:
    """The git subcommand of each call logged so far (global options such as `-c` skipped)."""
    found: list[str] = []
    for line in log.read_text().splitlines() if log.exists() else []:
        words = iter(line.split())
        for word in words:
            if word == "-c":
                next(words, None)  # its value (`core.sshCommand=ssh -o ...` spans words)
            elif re.fullmatch(r"[a-z][a-z-]*", word):
                found.append(word)
                break
    return found


def quiet_cycles(log: Path, cycles: int, timeout: float = 30.0) -> list[str]:
    """Wait for `cycles` cycles in a row that ran the fetch alone; their git calls. Any other
    call starts the count again (still settling: the start-up cycle, the one index stat
    refresh, a config read); a root whose polls keep running `git status` never gets there."""
    deadline = time.monotonic() + timeout
    start = len(calls(log))
    while time.monotonic() < deadline:
        window = calls(log)[start:]
        if set(window) - {"fetch"}:
            start = len(calls(log))
        elif window.count("fetch") >= cycles:
            return window
        time.sleep(0.05)
    raise AssertionError(f"no {cycles} quiet cycles in a row: {calls(log)[-30:]}")


def test_a_quiet_watched_root_polls_with_the_fetch_alone_and_hears_every_change(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    root = team.bob.path
    commit(root, {"insight_logs/log.md": "# Log\n"})
    log, env = git_recorder(tmp_path)
    config = write_config(tmp_path, {"bob": {"path": root, "watch": "true", "interval": "1s"}})
    daemon = start(config, env=env)
    # At rest a poll runs the fetch and nothing else: the watcher vouches for the work tree.
    assert set(quiet_cycles(log, 3)) == {"fetch"}
    # A person's sync-now always runs a full status.
    before = calls(log).count("status")
    done = memsync("--config", str(config), "sync-now", "bob", "--json")
    assert done.returncode == 0, done.stderr
    assert calls(log).count("status") > before
    quiet_cycles(log, 2)
    # An edit to a tracked file (the index does not change): the next cycle sees it.
    (root / "insight_logs" / "log.md").write_text("# Log, edited\n")
    daemon.wait_status(lambda s: s.roots[0].status == "dirty", 20, "the edit to be seen")
    # A person's commit: pushed.
    git(root, "commit", "-q", "-am", "edited by a person")
    made = git(root, "rev-parse", "HEAD")
    wait_for(lambda: git(team.upstream, "rev-parse", "main") == made, 20, "the push")


def test_an_unwatched_root_runs_its_status_every_cycle(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    log, env = git_recorder(tmp_path)
    config = write_config(
        tmp_path, {"bob": {"path": team.bob.path, "watch": "false", "interval": "1s"}}
    )
    start(config, env=env)
    wait_for(lambda: calls(log).count("fetch") >= 2, 30, "the first cycles")
    mark = len(calls(log))
    wait_for(lambda: calls(log)[mark:].count("fetch") >= 3, 30, "three more cycles")
    window = calls(log)[mark:]
    assert window.count("status") >= window.count("fetch") - 1, window


def test_an_edit_to_a_tracked_file_in_the_unwatched_runtime_directory_is_seen(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    root = team.bob.path
    commit(root, {".runtime/kept.md": "# Kept\n"})  # tracked where no watch looks
    config = write_config(tmp_path, {"bob": {"path": root, "watch": "true", "interval": "1s"}})
    daemon = start(config)
    daemon.wait_status(lambda s: s.roots[0].status is not None, 20, "the start-up cycle")
    (root / ".runtime" / "kept.md").write_text("# Kept, edited\n")
    daemon.wait_status(lambda s: s.roots[0].status == "dirty", 20, "the edit to be seen")
