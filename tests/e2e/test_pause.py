"""`memsync pause` / `resume` (issue 17, item 11): a paused root runs nothing (an upstream
commit does not arrive, `sync-now` answers `paused` with exit 0), shows in `status` and
metrics, stays paused across a daemon restart, and `resume` or the end of `--for` brings
the commit in; without a daemon the CLI writes and honours the same record."""

from __future__ import annotations

import signal
import stat
import urllib.request
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memsync.roots import pause
from memsync.wire import StatusReport, SyncReport
from memsync.wire.pause import PauseReport
from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.e2e.test_cli import memsync
from tests.helpers import commit, git, wait_for
from tests.kit import free_port


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


def head(path: Path) -> str:
    return git(path, "rev-parse", "HEAD")


def pushed_by_alice(team: Team, name: str) -> str:
    made = commit(team.alice.path, {f"MEMORY_{name}.md": f"# {name}\n"})
    assert team.alice.sync().status == "pushed"
    return made


def sync_now(config: Path) -> tuple[int, str]:
    done = memsync("--config", str(config), "sync-now", "bob", "--json")
    (result,) = SyncReport.model_validate_json(done.stdout).results
    return done.returncode, result.status


def root_status(config: Path) -> tuple[str | None, bool, str | None]:
    done = memsync("--config", str(config), "status", "--json")
    assert done.returncode == 0, done.stderr
    (root,) = StatusReport.model_validate_json(done.stdout).roots
    return root.status, root.paused, root.paused_until


def paused_gauge(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text: str = answer.read().decode()
    (line,) = [x for x in text.splitlines() if x.startswith('memsync_paused{kind="root"')]
    return line


def test_a_paused_root_stays_put_across_a_restart_until_resumed_or_its_time_runs_out(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    port = free_port()
    config = write_config(
        tmp_path, {"bob": {"path": team.bob.path}}, f"http: {{listen: 127.0.0.1:{port}}}\n"
    )
    daemon = start(config)
    before = head(team.bob.path)
    done = memsync("--config", str(config), "pause", "bob", "--json")
    assert done.returncode == 0, done.stderr
    assert PauseReport.model_validate_json(done.stdout).paused
    wait_for(lambda: "root bob: paused until resumed" in daemon.log.read_text(), 10, "daemon log")
    made = pushed_by_alice(team, "a")

    assert sync_now(config) == (0, "paused")  # through the daemon: held, not a failure
    assert head(team.bob.path) == before
    assert root_status(config) == ("paused", True, None)
    assert paused_gauge(port) == 'memsync_paused{kind="root",name="bob"} 1.0'

    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(timeout=30) == 0
    daemon = start(config)  # its catch-up cycle at start-up is held too
    assert sync_now(config) == (0, "paused")
    assert head(team.bob.path) == before
    assert root_status(config) == ("paused", True, None)

    done = memsync("--config", str(config), "resume", "bob")
    assert done.returncode == 0 and "root bob: resumed" in done.stdout, done
    wait_for(lambda: head(team.bob.path) == made, 20, "the resumed root to sync")
    assert paused_gauge(port) == 'memsync_paused{kind="root",name="bob"} 0.0'

    done = memsync("--config", str(config), "pause", "bob", "--for", "1s")
    assert done.returncode == 0, done.stderr
    later = pushed_by_alice(team, "b")  # the 60 s timer is far off: only the expiry wakes it
    wait_for(lambda: head(team.bob.path) == later, 20, "the pause to run out and bob to sync")
    assert root_status(config)[1] is False


def test_without_a_daemon_the_cli_writes_and_honours_the_pause(team: Team, tmp_path: Path) -> None:
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    before = head(team.bob.path)
    done = memsync("--config", str(config), "pause", "bob")
    assert done.returncode == 0 and "root bob: paused until resumed" in done.stdout, done
    record = pause.pause_file(tmp_path / "state")
    assert stat.S_IMODE(record.stat().st_mode) == 0o600
    made = pushed_by_alice(team, "a")
    assert sync_now(config) == (0, "paused")
    assert head(team.bob.path) == before
    assert root_status(config) == ("paused", True, None)
    text = memsync("--config", str(config), "status").stdout
    assert "paused until resumed (memsync resume bob)" in text, text

    assert memsync("--config", str(config), "resume", "bob").returncode == 0
    assert sync_now(config) == (0, "synced")
    assert head(team.bob.path) == made

    done = memsync("--config", str(config), "pause", "bob", "--for", "3s", "--json")
    assert done.returncode == 0, done.stderr
    held = PauseReport.model_validate_json(done.stdout)
    assert held.paused and held.until is not None
    until = datetime.fromisoformat(held.until.replace("Z", "+00:00"))
    seen = root_status(config)
    # A loaded machine may take longer than the pause to answer: then it may have run out.
    assert seen == ("paused", True, held.until) or datetime.now(UTC) >= until, seen
    # The record's own clock says when it runs out (no status process a poll); then the
    # command says so too.
    state = tmp_path / "state"
    wait_for(lambda: pause.holding(state, "root", "bob") is None, 10, "the pause to run out")
    assert root_status(config)[0] != "paused"
    later = pushed_by_alice(team, "b")
    assert sync_now(config) == (0, "synced")
    assert head(team.bob.path) == later


@pytest.mark.parametrize(
    "args",
    [
        ("pause", "nobody"),
        ("resume", "nobody"),
        ("pause", "bob", "--kind", "view"),
        ("pause", "bob", "--for", "soon"),
        ("pause", "bob", "--for", "0s"),
        ("pause", "bob", "--for", "9999d"),
    ],
)
def test_unknown_names_and_bad_durations_are_usage_errors(
    tmp_path: Path, args: tuple[str, ...]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    config = write_config(tmp_path, {"bob": {"path": plain}})
    done = memsync("--config", str(config), *args)
    assert done.returncode == 2, done
    assert done.stderr.startswith("memsync: ") and len(done.stderr.splitlines()) == 1
    assert not pause.pause_file(tmp_path / "state").exists()
