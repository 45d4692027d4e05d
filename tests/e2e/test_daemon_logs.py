"""What `memsync run` says: one line when a root's status changes (old -> new, commit ids,
the reason), nothing while it stays; JSON lines with `log.format: json`; a refused reload
lists every problem."""

from __future__ import annotations

import json
import signal
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.helpers import commit, git, wait_for
from tests.kit import free_port


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


def cycles(port: int, root: str, status: str) -> float:
    """How many sync cycles of `root` ended `status` (the daemon's own counter)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    key = f'memsync_sync_total{{root="{root}",status="{status}"}} '
    found = [line for line in text.splitlines() if line.startswith(key)]
    return float(found[0].split()[-1]) if found else 0.0


def lines(daemon: Daemon, word: str) -> list[str]:
    return [line for line in daemon.log.read_text().splitlines() if word in line]


def test_a_persons_edit_is_one_info_line_and_a_repeated_status_says_nothing(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    port = free_port()
    config = write_config(
        tmp_path,
        {"bob": {"path": team.bob.path, "interval": "1s"}},
        extra=f"http: {{listen: 127.0.0.1:{port}}}\n",
    )
    daemon = start(config)
    wait_for(lambda: bool(lines(daemon, "root bob: current")), 20, "the first cycle")
    (team.bob.path / "MEMORY.md").write_text("# Memory\n\nan edit not yet committed\n")
    wait_for(lambda: cycles(port, "bob", "dirty") >= 4, 30, "several polls of a dirty root")
    said = lines(daemon, "dirty")
    assert len(said) == 1, daemon.log.read_text()
    assert " INFO root bob: current -> dirty (head " in said[0]
    assert not lines(daemon, "WARNING"), daemon.log.read_text()
    made = commit(team.bob.path, {"MEMORY.md": "# Memory\n\nan edit, committed\n"})
    wait_for(lambda: git(team.upstream, "rev-parse", "main") == made, 20, "the push")
    wait_for(lambda: bool(lines(daemon, "-> pushed")), 10, "the pushed line")
    (pushed,) = lines(daemon, "-> pushed")
    assert f"dirty -> pushed (head {made[:12]}" in pushed and " INFO " in pushed
    assert pushed[:4].isdigit() and pushed[10] == "T"  # stamped: stderr is not the journal
    settled = cycles(port, "bob", "current")
    wait_for(lambda: cycles(port, "bob", "current") >= settled + 3, 30, "quiet polls")
    assert len(lines(daemon, "-> current")) <= 1  # settling after the push, at most once
    assert not lines(daemon, "WARNING"), daemon.log.read_text()


def test_offline_is_said_once_and_its_end_is_said_in_json(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    port = free_port()
    config = write_config(
        tmp_path,
        {"bob": {"path": team.bob.path, "interval": "1s"}},
        extra=f"http: {{listen: 127.0.0.1:{port}}}\nlog: {{format: json}}\n",
    )
    daemon = start(config)
    wait_for(lambda: bool(lines(daemon, '"status":"current"')), 20, "the first cycle")
    upstream = git(team.bob.path, "remote", "get-url", "origin")
    git(team.bob.path, "remote", "set-url", "origin", "http://127.0.0.1:9/nowhere.git")
    # Two offline cycles: the second is the repeat that must say nothing (each more one
    # waits out a doubled back-off of the product's own, 4-8 s by the third).
    wait_for(lambda: cycles(port, "bob", "offline") >= 2, 40, "a repeated offline cycle")
    git(team.bob.path, "remote", "set-url", "origin", upstream)
    wait_for(lambda: bool(lines(daemon, '"recovered"')), 40, "the way back")
    records = [json.loads(line) for line in daemon.log.read_text().splitlines()]
    changes = [r for r in records if r.get("root") == "bob" and "status" in r["fields"]]
    assert [(r["fields"]["previous_status"], r["fields"]["status"]) for r in changes] == [
        (None, "current"),
        ("current", "offline"),
        ("offline", "current"),
    ]
    _, offline, back = changes
    assert offline["level"] == "warning" and back["level"] == "info"
    assert back["event"] == "recovered" and back["logger"] == "memsync.daemon"
    assert back["fields"]["head"] == git(team.bob.path, "rev-parse", "HEAD")
    assert back["time"].endswith("Z") and "nowhere" not in back["message"]
    assert offline["event"] == "status-changed" and offline["message"]


def test_a_refused_reload_lists_every_problem_with_its_line(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    daemon = start(config)
    good = config.read_text()
    config.write_text(good + "bogus: 1\nhooks:\n  - on: [sinked]\n    command: [/bin/true]\n")
    daemon.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: len(lines(daemon, "reload refused")) >= 3, 15, "the refused reload")
    said = lines(daemon, "reload refused: ")  # one line a problem, with file, line, location
    assert len(said) == 2, daemon.log.read_text()
    assert any(f"{config}:{good.count(chr(10)) + 1}: bogus" in line for line in said), said
    assert any(": hooks[0].on[0]: unknown status 'sinked'" in line for line in said), said
    assert all(" ERROR " in line for line in said)
    assert daemon.proc.poll() is None


def test_a_failing_view_is_said_once_however_often_it_is_retried(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    dead = free_port()  # nothing listens there
    config = write_config(
        tmp_path,
        {"bob": {"path": team.bob.path}},
        extra=(
            "views:\n  team-auth:\n    root: bob\n    refresh: 1s\n"
            f"    source: {{kind: http, url: 'http://127.0.0.1:{dead}/v1/views/auth'}}\n"
            "    trust: {keys: ['ed25519:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA']}\n"
        ),
    )
    daemon = start(config)

    wait_for(lambda: daemon.entry("team-auth").failures >= 2, 60, "a failed pull retried")
    said = lines(daemon, "view team-auth")
    assert len(said) == 1, daemon.log.read_text()
    assert " ERROR view team-auth: unavailable" in said[0]
    assert not lines(daemon, "retrying"), daemon.log.read_text()  # attempts are not news
