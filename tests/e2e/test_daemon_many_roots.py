"""A team server: one daemon watching many roots runs a bounded number of threads (one
inotify reader for every watch, pools sized apart from the root count), and every watched
root still hears a commit (issue 18, item 6)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.helpers import commit, git, wait_for

ROOTS = 60
THREADS = 64  # the bound, whatever the number of roots


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


def threads(pid: int) -> int:
    return len(list(Path(f"/proc/{pid}/task").iterdir()))


def test_sixty_watched_roots_run_a_bounded_number_of_threads_and_each_hears_a_commit(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    roots = {"r0": team.bob.path}
    for i in range(1, ROOTS):
        roots[f"r{i}"] = shutil.copytree(team.bob.path, tmp_path / f"r{i}", symlinks=True)
    config = write_config(
        tmp_path,
        {name: {"path": path, "watch": "true", "interval": "10m"} for name, path in roots.items()},
    )
    daemon = start(config)
    daemon.wait_status(  # each answer runs `git status` in sixty roots
        lambda s: all(r.status is not None for r in s.roots), 60, "start-up cycles", interval=0.5
    )
    assert threads(daemon.proc.pid) <= THREADS
    # Only the watcher can run a cycle now (the poll is 10 minutes away): a commit in the
    # first root and one in the last are pushed.
    for name in ("r0", f"r{ROOTS - 1}"):
        made = commit(roots[name], {f"insight_logs/{name}.md": f"# {name}\n"}, f"from {name}")
        wait_for(
            lambda made=made: made in git(team.upstream, "rev-list", "main"),
            30,
            f"{name}'s commit upstream",
        )
    assert threads(daemon.proc.pid) <= THREADS
