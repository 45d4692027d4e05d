"""A command goes through the running daemon only when that daemon serves the same
configuration file (issue 17, item 1): `--config OTHER.yaml` runs in process and says which
file the daemon serves; the daemon's own file, reached by any path, goes through it."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memsync.wire import StatusReport, SyncReport
from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.e2e.test_cli import memsync
from tests.helpers import commit, git


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


def test_another_config_runs_in_process_and_the_daemons_own_goes_through_it(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    socket_path = tmp_path / "run" / "memsync.sock"  # one socket, as with the default path
    served = write_config(tmp_path, {"bob": {"path": team.bob.path}}, filename="a.yaml")
    other = write_config(
        tmp_path, {"alice": {"path": team.alice.path}}, socket_path=socket_path, filename="b.yaml"
    )
    start(served)
    made = commit(team.bob.path, {"MEMORY_b.md": "# B\n"})

    # B: the daemon (serving A) knows no root `alice`; this process syncs it itself.
    done = memsync("--config", str(other), "sync-now", "alice", "--json")
    assert done.returncode == 0, done.stderr
    (result,) = SyncReport.model_validate_json(done.stdout).results
    assert result.root == "alice" and result.status in ("current", "synced", "pushed")
    seen = memsync("--config", str(other), "status", "--json")
    assert seen.returncode == 0, seen.stderr
    report = StatusReport.model_validate_json(seen.stdout)
    assert [r.root for r in report.roots] == ["alice"]
    assert not report.daemon.running
    assert report.daemon.config == os.path.realpath(other)
    assert report.daemon.other_config == os.path.realpath(served)
    text = memsync("--config", str(other), "status")
    assert f"the running daemon serves another configuration ({os.path.realpath(served)})" in (
        text.stdout
    ), text.stdout

    # A, through a symbolic link and without git on PATH: only the daemon can sync it.
    link = tmp_path / "link.yaml"
    link.symlink_to(served)
    no_git = tmp_path / "empty-bin"
    no_git.mkdir()
    done = memsync("--config", str(link), "sync-now", "bob", "--json", env={"PATH": str(no_git)})
    assert done.returncode == 0, done.stderr
    (result,) = SyncReport.model_validate_json(done.stdout).results
    assert result.status in ("pushed", "current"), result
    assert git(team.upstream, "rev-parse", "main") == made
    seen = memsync("--config", str(link), "status", "--json")
    report = StatusReport.model_validate_json(seen.stdout)
    assert report.daemon.running and report.daemon.config == os.path.realpath(served)
    assert report.daemon.other_config is None
    text = memsync("--config", str(served), "status")
    assert f"  config: {os.path.realpath(served)}" in text.stdout, text.stdout
