"""The repair role through `memsync sync-now` as a subprocess: SIGKILL at the named fault
points and during the agent's run; the next run converges and the model never settles one
conflict twice. And through the daemon, with no command at all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from memsync.cli.app import App
from memsync.roots.faults import POINTS
from memsync.wire import SyncReport
from tests.conftest import Team
from tests.e2e.daemons import launcher
from tests.e2e.test_cli import memsync
from tests.e2e.test_startup import probe
from tests.helpers import commit, git, kill_while_agent_holds, snapshot, wait_for

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "agents" / "repair-merge.sh"
# Where a kill leaves the repair published (recovery finishes it) or not (it counts as a
# failed attempt and backs off). `after-staging` is first reached by the sync's own merge.
PUBLISHED = ("after-prepared", "after-worktree-update", "after-ref-update", "after-publish")
PUSH = ("before-push", "after-push")
UNPUBLISHED = ("after-merge", "after-validation", "cycle-during-executor")
BEFORE_REPAIR = ("after-staging",)
CRASH_POINTS = [p for p in (*BEFORE_REPAIR, *UNPUBLISHED, *PUBLISHED, *PUSH) if p in POINTS]


def scene(team: Team, tmp_path: Path, body: str) -> tuple[Path, Path]:
    """Alice and Bob edit the same line; Bob's config has a repair role; the agent's runs
    are counted in runs.log."""
    runs = tmp_path / "runs.log"
    script = tmp_path / "agent.sh"
    script.write_text(f'#!/bin/sh\necho "$MEMSYNC_OPERATION_ID" >> "{runs}"\n{body}\n')
    config = tmp_path / "config.yaml"
    config.write_text(
        "\n".join(
            [
                "version: 1",
                f"state_dir: {tmp_path / 'state'}",
                f"control: {{socket: {tmp_path / 'memsync.sock'}}}",
                "roots:",
                "  bob:",
                f"    path: {team.bob.path}",
                "    watch: false",
                "    repair: {role: fixer}",
                "roles:",
                f'  fixer: {{executor: command, command: ["/bin/sh", "{script}"], timeout: 60s}}',
            ]
        )
        + "\n"
    )
    App(config_path=str(config), command="").settings()  # loaded once: the runs read its memo
    commit(team.alice.path, {"MEMORY.md": "# User Context\n\nAlice prefers tabs.\n"})
    git(team.alice.path, "push", "-q", "origin", "HEAD:main")
    commit(team.bob.path, {"MEMORY.md": "# User Context\n\nBob prefers spaces.\n"})
    return config, runs


def count(runs: Path) -> int:
    return len(runs.read_text().splitlines()) if runs.exists() else 0


def sync_now(config: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return memsync("--config", str(config), "sync-now", "--json", env=env)


def settled(team: Team, tmp_path: Path) -> None:
    """Nothing of an operation is left open or lying around."""
    assert git(team.bob.path, "for-each-ref", "refs/memsync/candidates") == ""
    assert len(git(team.bob.path, "worktree", "list").splitlines()) == 1
    wt = tmp_path / "state" / "roots" / "bob" / "worktrees"
    assert not wt.exists() or list(wt.iterdir()) == []
    journal = tmp_path / "state" / "roots" / "bob" / "journal"
    phases = [json.loads(p.read_text())["phase"] for p in journal.glob("*.json")]
    assert "running" not in phases and "prepared" not in phases
    assert git(team.bob.path, "status", "--porcelain") == ""


def test_a_repair_through_the_cli_is_pushed(team: Team, tmp_path: Path) -> None:
    """A one-shot `sync-now` settles the conflict with the repair role and pushes it, on a
    git box that is not resident (issue 18): it asks git, as GitPython's import would cost
    more than the processes it saves."""
    config, runs = scene(team, tmp_path, f'exec /bin/sh "{EXAMPLE}"')
    code, heavy, out, err = probe(
        "--config", str(config), "sync-now", "--json", env={}, heavy=("git", "gitdb")
    )
    assert (code, heavy) == (0, []), err
    result = SyncReport.model_validate_json(out).results[0]
    assert result.status == "pushed", result.message
    assert "repair role fixer settled it" in result.message
    assert git(team.upstream, "rev-parse", "main") == git(team.bob.path, "rev-parse", "HEAD")
    assert count(runs) == 1
    settled(team, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("point", CRASH_POINTS)
def test_a_crash_anywhere_in_a_repair_converges_without_a_second_model_run(
    team: Team, tmp_path: Path, point: str
) -> None:
    config, runs = scene(team, tmp_path, f'exec /bin/sh "{EXAMPLE}"')
    local = git(team.bob.path, "rev-parse", "HEAD")
    crashed = sync_now(config, MEMSYNC_FAULT=point)
    assert crashed.returncode == -signal.SIGKILL, (crashed.stdout, crashed.stderr)

    done = sync_now(config)
    result = SyncReport.model_validate_json(done.stdout).results[0]
    settled(team, tmp_path)
    assert count(runs) == 1, (point, result)
    if point in UNPUBLISHED:  # the killed attempt counts; the role waits for its backoff
        assert result.status == "conflict", (point, result)
        assert "tried again after" in result.message
        assert git(team.bob.path, "rev-parse", "HEAD") == local
        return
    assert result.status in ("pushed", "current"), (point, result)
    head = git(team.bob.path, "rev-parse", "HEAD")
    assert git(team.upstream, "rev-parse", "main") == head
    assert "Memsync-Operation: " in git(team.bob.path, "log", "-1", "--format=%B")
    text = (team.bob.path / "MEMORY.md").read_text()
    assert "Alice prefers tabs." in text and "Bob prefers spaces." in text


def test_a_kill_while_the_agent_runs_converges_without_running_it_again(
    team: Team, tmp_path: Path
) -> None:
    fifo = tmp_path / "hold"
    os.mkfifo(fifo)
    pidfile = tmp_path / "agent.pid"
    config, runs = scene(team, tmp_path, f'echo $$ > "{pidfile}"\ncat "{fifo}" > /dev/null')
    before = snapshot(team.bob.path)
    agent = kill_while_agent_holds(["--config", str(config), "sync-now", "--json"], pidfile)
    wait_for(lambda: not _alive(agent), 10, "the agent to exit")

    done = sync_now(config)
    result = SyncReport.model_validate_json(done.stdout).results[0]
    assert result.status == "conflict", result
    assert "tried again after" in result.message
    assert snapshot(team.bob.path) == before
    settled(team, tmp_path)
    assert count(runs) == 1
    # The next run within the backoff does not ask the model either.
    again = SyncReport.model_validate_json(sync_now(config).stdout).results[0]
    assert again.status == "conflict" and count(runs) == 1


def test_the_daemon_settles_a_conflict_by_itself_once(team: Team, tmp_path: Path) -> None:
    """A conflicting upstream commit reaches a running daemon by polling: its sync cycle
    runs the repair role, the merge lands, validated, and is pushed; later cycles find
    nothing to settle and never run the model again."""
    config, runs = scene(team, tmp_path, f'exec /bin/sh "{EXAMPLE}"')
    config.write_text(
        config.read_text().replace(
            "    watch: false\n", "    watch: false\n    sync: {interval: 1s, timeout: 20s}\n"
        )
    )
    with launcher(tmp_path) as launch:
        daemon = launch(config)
        wait_for(
            lambda: (
                git(team.upstream, "rev-parse", "main") == git(team.bob.path, "rev-parse", "HEAD")
            ),
            30,
            "the daemon to settle the conflict and push the merge",
        )

        # The push lands before the cycle's verdict is recorded, and a later cycle may replace
        # `pushed` with `current` before this reads it (a loaded machine): wait for a verdict
        # that holds the pushed merge, whichever of the two it is.
        def settled_verdict() -> bool:
            root = daemon.status().roots[0]
            return root.status in ("pushed", "current") and root.last_success_at is not None

        wait_for(settled_verdict, 30, "the cycle that pushed the merge to report success")
        first = daemon.status().roots[0]
        assert first.head == git(team.upstream, "rev-parse", "main"), first
        settled_at = first.last_success_at

        def a_later_cycle() -> bool:
            later = daemon.status().roots[0].last_success_at
            return later is not None and settled_at is not None and later > settled_at

        wait_for(a_later_cycle, 30, "another sync cycle after the repair")
        assert count(runs) == 1
    merge = git(team.bob.path, "log", "-1", "--format=%P").split()
    assert len(merge) == 2
    text = (team.bob.path / "MEMORY.md").read_text()
    assert "Alice prefers tabs." in text and "Bob prefers spaces." in text
    assert "Memsync-Operation: " in git(team.bob.path, "log", "-1", "--format=%B")
    settled(team, tmp_path)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose: its parent (the killed memsync) was reaped.
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(") ", 1)[-1][:1] != "Z"
