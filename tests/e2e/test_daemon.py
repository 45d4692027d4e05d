"""`memsync run` as a real process: it keeps roots in step by itself, answers on its
control socket, survives bad input, reloads on SIGHUP and stops cleanly on SIGTERM."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memsync.daemon.client import call
from memsync.roots.create import init_root
from memsync.wire import SyncReport
from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.e2e.test_cli import memsync
from tests.helpers import commit, git, head_of, is_ancestor, wait_for


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


def head(path: Path, ref: str = "HEAD") -> str:
    """The commit `ref` names; HEAD from its loose ref file when there is one (`head_of`):
    the tests poll it while the daemon works, a git process each time."""
    return head_of(path) if ref == "HEAD" else git(path, "rev-parse", ref)


def test_a_pushed_commit_arrives_by_polling_and_a_local_commit_is_pushed_by_watching(
    team: Team, tmp_path: Path, start: object
) -> None:
    config = write_config(
        tmp_path, {"bob": {"path": team.bob.path, "watch": "true", "interval": "1s"}}
    )
    daemon = start(config)  # type: ignore[operator]
    made = commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    wait_for(lambda: head(team.bob.path) == made, 15, "alice's commit to reach bob by polling")
    mine = commit(team.bob.path, {"MEMORY_b.md": "# B\n"})
    wait_for(
        lambda: git(team.upstream, "rev-parse", "main") == mine,
        15,
        "bob's local commit to be validated and pushed by the watcher",
    )
    report = daemon.cli_status()  # the command, through the daemon
    assert report.daemon.running and report.daemon.pid == daemon.proc.pid
    assert [e.name for e in report.daemon.schedule] == ["bob"]
    daemon.proc.send_signal(signal.SIGTERM)
    assert daemon.proc.wait(timeout=30) == 0
    assert any("STOPPING=1" in m for m in daemon.messages())
    assert not daemon.socket.exists()


def test_sync_now_goes_through_the_daemon(team: Team, tmp_path: Path, start: object) -> None:
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    start(config)  # type: ignore[operator]
    made = commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    # Without git on its PATH, this CLI process could not sync in-process: the daemon does.
    no_git = tmp_path / "empty-bin"
    no_git.mkdir()
    env = {"PATH": str(no_git)}
    first = subprocess.Popen(
        [sys.executable, "-m", "memsync", "--config", str(config), "sync-now", "--json"],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, **env},
    )
    second = memsync("--config", str(config), "sync-now", "--json", env=env)
    out, _ = first.communicate(timeout=60)
    for text in (out, second.stdout):
        result = SyncReport.model_validate_json(text).results[0]
        assert result.status in ("synced", "current"), result
    assert head(team.bob.path) == made


def test_junk_on_the_control_socket_and_a_broken_reload_leave_it_running(
    team: Team, tmp_path: Path, start: object
) -> None:
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    daemon = start(config)  # type: ignore[operator]
    for junk in (
        b"\x00\xffGARBAGE\r\n\r\n",
        b"POST /v1/sync HTTP/1.1\r\nContent-Length: 5\r\n\r\n{{{{{",
    ):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(daemon.socket))
            client.sendall(junk)
            client.recv(4096)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:  # gone mid-request
        client.connect(str(daemon.socket))
        client.sendall(b"POST /v1/sync HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}")
    assert daemon.status().daemon.running
    config.write_text("version: 1\nroots: [this is not a mapping\n")
    daemon.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "reload refused" in daemon.log.read_text(), 15, "the refused reload")
    made = commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    good = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    done = memsync("--config", str(good), "sync-now", "--json")
    assert SyncReport.model_validate_json(done.stdout).results[0].status == "synced"
    assert head(team.bob.path) == made
    assert daemon.proc.poll() is None


def test_an_unreachable_root_backs_off_while_another_keeps_syncing(
    team: Team, tmp_path: Path, start: object
) -> None:
    carol = tmp_path / "carol"
    init_root(carol)
    git(carol, "remote", "add", "origin", "http://127.0.0.1:9/nowhere.git")
    config = write_config(
        tmp_path,
        {
            "bob": {"path": team.bob.path, "interval": "1s"},
            "carol": {"path": carol, "interval": "1s"},
        },
    )
    daemon = start(config)  # type: ignore[operator]

    def carol_backs_off() -> bool:
        entry = daemon.entry("carol")
        return entry.failures >= 1 and entry.backoff_until is not None

    wait_for(carol_backs_off, 20, "carol to back off")
    made = commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    wait_for(lambda: head(team.bob.path) == made, 15, "bob to keep syncing")
    statuses = {r.root: r.status for r in daemon.status().roots}
    assert statuses["carol"] == "offline" and statuses["bob"] in ("synced", "current")


def test_an_idle_daemon_starts_no_git_process(team: Team, tmp_path: Path, start: object) -> None:
    log = tmp_path / "git-calls.log"
    wrapper = tmp_path / "git-bin"
    wrapper.mkdir()
    real = subprocess.run(
        ["sh", "-c", "command -v git"], capture_output=True, text=True, check=True
    )
    (wrapper / "git").write_text(
        f'#!/bin/sh\necho "$@" >> {log}\nexec {real.stdout.strip()} "$@"\n'
    )
    (wrapper / "git").chmod(0o755)
    config = write_config(tmp_path, {"bob": {"path": team.bob.path, "watch": "true"}})
    daemon = start(config, env={"PATH": f"{wrapper}:{os.environ['PATH']}"})  # type: ignore[operator]
    daemon.wait_status(lambda s: s.roots[0].status == "current", 20, "the start-up catch-up")
    settled = log.read_text().count("\n")
    time.sleep(2.0)  # an observation window: nothing may happen in it
    assert log.read_text().count("\n") == settled, log.read_text()


def test_a_stale_socket_is_taken_over_and_a_live_one_is_not(
    team: Team, tmp_path: Path, start: object
) -> None:
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    stale = tmp_path / "run" / "memsync.sock"
    stale.parent.mkdir(mode=0o700)
    leftover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    leftover.bind(str(stale))
    leftover.close()  # the file stays, nobody answers: a killed daemon's leftover
    first = start(config)  # type: ignore[operator]
    assert oct(stale.stat().st_mode & 0o777) == "0o600"
    second = start(config, wait=False)  # type: ignore[operator]
    assert second.proc.wait(timeout=30) == 2
    assert "another memsync daemon" in second.log.read_text()
    assert first.proc.poll() is None and first.status().daemon.running


def test_a_killed_daemon_restarts_and_converges(team: Team, tmp_path: Path, start: object) -> None:
    config = write_config(tmp_path, {"bob": {"path": team.bob.path, "interval": "1s"}})
    first = start(config)  # type: ignore[operator]
    for n in range(3):
        commit(team.alice.path, {f"MEMORY_{n}.md": f"# {n}\n"})
        assert team.alice.sync().status == "pushed"
    first.proc.kill()
    first.proc.wait(timeout=10)
    second = start(config)  # type: ignore[operator]
    upstream = git(team.upstream, "rev-parse", "main")
    wait_for(lambda: head(team.bob.path) == upstream, 20, "bob to converge after a restart")
    # The branch moves before the publication's record is settled: wait for the cycle that
    # moved it to end, then nothing may be left pending (the killed daemon's record
    # included: the restarted one recovered it).
    wait_for(
        lambda: second.status().roots[0].pending_operations == 0,
        20,
        "the restarted daemon to settle every operation",
    )
    assert git(team.bob.path, "status", "--porcelain") == ""
    assert head(team.bob.path) == upstream


def test_a_reload_moves_only_the_jobs_whose_interval_changed(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    """SIGHUP re-times a root whose interval changed; an unchanged root keeps its next run
    (re-adding it would draw a new time, jittered by six minutes here)."""
    roots = {"alice": {"path": team.alice.path, "interval": "1h"}}
    roots["bob"] = {"path": team.bob.path, "interval": "1h"}
    config = write_config(tmp_path, roots)
    daemon = start(config)

    def next_runs() -> dict[str, str]:
        block = call(daemon.socket, "GET", "/v1/daemon")
        return {e["name"]: e["next_run_at"] for e in block["schedule"]}

    before = next_runs()
    roots["alice"]["interval"] = "3h"
    write_config(tmp_path, roots)
    daemon.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "configuration reloaded" in daemon.log.read_text(), 30, "the reload")
    after = next_runs()
    assert after["bob"] == before["bob"]
    assert after["alice"] > before["bob"]  # 3h from now, not 1h
    roots["bob"]["watch"] = "true"  # a change that is no interval moves no job either
    write_config(tmp_path, roots)
    daemon.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: daemon.log.read_text().count("configuration reloaded") == 2, 30, "again")
    assert next_runs() == after
    assert daemon.proc.poll() is None


def test_a_root_that_disappears_is_unconfigured_and_the_rest_go_on(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    config = write_config(
        tmp_path,
        {
            "alice": {"path": team.alice.path, "watch": "true"},
            "bob": {"path": team.bob.path, "watch": "true"},
        },
    )
    daemon = start(config)
    moved = tmp_path / "alice-moved"
    team.alice.path.rename(moved)  # the watched directory vanishes
    made = commit(moved, {"MEMORY_a.md": "# A\n"})
    git(moved, "push", "-q", "origin", "HEAD:main")
    done = memsync("--config", str(config), "sync-now", "--json")
    results = {r.root: r for r in SyncReport.model_validate_json(done.stdout).results}
    assert results["alice"].status == "unconfigured"
    assert results["bob"].status in ("synced", "current") and head(team.bob.path) == made
    assert daemon.proc.poll() is None


def test_autocommit_turns_an_agents_edit_into_a_pushed_commit(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    config = write_config(
        tmp_path, {"bob": {"path": team.bob.path, "watch": "true", "autocommit": True}}
    )
    start(config)
    (team.bob.path / "MEMORY.md").write_text("# User Context\n\nwritten by an agent\n")
    wait_for(
        lambda: "written by an agent" in git(team.upstream, "show", "main:MEMORY.md"),
        15,
        "the edit to be committed, validated and pushed by the daemon",
    )
    assert git(team.bob.path, "status", "--porcelain") == ""


def test_the_daemon_runs_an_insight_cycle_by_itself(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    """Commits arriving from the upstream raise insight pressure until the daemon runs the
    role by itself; the log lands, validated, and is pushed. No manual command anywhere."""
    script = Path(__file__).resolve().parents[2] / "examples" / "agents" / "write-insight.sh"
    daemon = start(_insight_config(team, tmp_path, script, "trigger_points: 2"))
    for n in range(3):  # the first publication sets the mark; the next two add a point each
        _arrives(team, n)

    def landed_upstream() -> bool:
        names = git(team.upstream, "ls-tree", "-r", "--name-only", "main").split()
        return any(n.startswith("insight_logs/") for n in names)

    wait_for(landed_upstream, 30, "the insight log to land in bob's root and be pushed")
    insight = daemon.status().roots[0].insight
    assert insight.last_result == "artifact" and insight.points == 0
    subject = git(team.upstream, "log", "-1", "--format=%s", "main", "--", "insight_logs")
    assert subject.startswith("insight: ")
    body = git(team.upstream, "log", "-1", "--format=%B", "main", "--", "insight_logs")
    assert "Memsync-Operation: " in body and "-insight-" in body


def _insight_config(team: Team, tmp_path: Path, script: Path, options: str) -> Path:
    """Bob polling every second, insight on (`options` added) with `script` as its role."""
    config = write_config(tmp_path, {"bob": {"path": team.bob.path, "interval": "1s"}})
    config.write_text(
        config.read_text()
        + f"    insight: {{enabled: true, points_per_commit: 1, {options}}}\n"
        + f"roles:\n  insight: {{executor: command, command: [sh, {script}], timeout: 60s}}\n"
    )
    return config


def _arrives(team: Team, n: int) -> None:
    """Alice pushes a memory commit; the daemon brings it to bob (polling)."""
    made = commit(team.alice.path, {f"MEMORY_n{n}.md": f"# Note {n}\n"})
    assert team.alice.sync().status == "pushed"
    refuted: set[str] = set()
    wait_for(lambda: _holds(team.bob.path, made, refuted), 15, f"bob to get commit {n}")


def _holds(root: Path, commit_sha: str, refuted: set[str]) -> bool:
    """The root's HEAD contains `commit_sha` (False while the object is not even there).
    `refuted`: the HEADs already found without it, which are not asked of git again while
    HEAD stays there (what a commit reaches never changes)."""
    current = head_of(root)
    if current == commit_sha:
        return True
    if current in refuted:
        return False
    present = git(root, "cat-file", "-t", commit_sha, check=False) == "commit"
    if present and is_ancestor(root, commit_sha, current):
        return True
    refuted.add(current)
    return False


def test_a_refused_cycle_backs_off_instead_of_asking_again_at_once(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    """An insight role that writes outside its grants is refused; the publications that
    follow do not make the daemon ask it again until its backoff has passed."""
    runs = tmp_path / "runs"
    script = tmp_path / "overreach.sh"
    script.write_text(
        f"#!/bin/sh\ncat > /dev/null\necho run >> '{runs}'\n"
        "printf '# User Context\\n\\nRewritten.\\n' > MEMORY.md\n"
        "git -c user.name=r -c user.email=r@localhost commit -qam 'insight: mine now'\n"
    )
    daemon = start(_insight_config(team, tmp_path, script, "trigger_points: 1, check_every: 1s"))
    for n in range(4):  # the first publication sets the mark; the next ones add points
        _arrives(team, n)
        if n == 1:
            daemon.wait_status(
                lambda s: s.roots[0].insight.last_result == "failed",
                30,
                "the role to run once and be refused",
            )
    assert len(runs.read_text().splitlines()) == 1
    assert "Rewritten." not in (team.bob.path / "MEMORY.md").read_text()


# Each request the controller refuses, and how: one daemon answers them all in turn (a
# refusal changes nothing, and after the last the daemon must still run).
REFUSED = [
    ("/v1/sync", {"roots": ["nope"]}, 400, "usage"),
    ("/v1/sync", {"roots": "not a list"}, 400, "bad-request"),
    ("/v1/views/pull", {"views": ["nope"]}, 400, "usage"),
    ("/v1/cycles/insight", {"root": "nope", "force": False}, 400, "usage"),
    ("/v1/cycles/bogus", {"root": "bob"}, 404, "not-found"),
    ("/v1/pause", {"name": "nope"}, 400, "usage"),
    ("/v1/resume", {"name": "nope"}, 400, "usage"),
]


def test_each_request_the_controller_refuses_is_an_error_with_its_words(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    daemon = start(config)
    for path, body, status, code in REFUSED:
        payload = json.dumps(body).encode()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.settimeout(30)
            client.connect(str(daemon.socket))
            client.sendall(
                f"POST {path} HTTP/1.1\r\nHost: memsync\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(payload)}\r\nConnection: close\r\n\r\n".encode()
                + payload
            )
            answer = b""
            while chunk := client.recv(65536):
                answer += chunk
        head, _, rest = answer.partition(b"\r\n\r\n")
        got = int(head.split()[1])
        error = json.loads(rest)["error"]
        assert (got, error["code"]) == (status, code), (path, answer)
        assert error["message"], (path, answer)
        assert daemon.status().daemon.running, path
