"""Hooks in a real daemon: a command and a webhook run once per status transition with the
result document, their failures are logged and never hold up a sync, a hanging one is
killed at its timeout."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.e2e.test_daemon_logs import cycles, lines
from tests.helpers import commit, git, wait_for
from tests.kit import free_port

TOKEN = "hook-token-0123456789abcdef"


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


@dataclass
class Receiver:
    """A webhook endpoint on loopback: answers the next status of `answers` (then 200)
    and records each request's headers and JSON body."""

    url: str = ""
    answers: deque[int] = field(default_factory=deque)
    got: list[tuple[dict[str, str], dict[str, object], int]] = field(default_factory=list)

    async def hook(self, request: web.Request) -> web.Response:
        status = self.answers.popleft() if self.answers else 200
        self.got.append((dict(request.headers), await request.json(), status))
        return web.Response(status=status)


@contextlib.contextmanager
def receiver(answers: tuple[int, ...] = ()) -> Iterator[Receiver]:
    found = Receiver(answers=deque(answers))
    app = web.Application()
    app.router.add_post("/hook", found.hook)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1)
    loop = asyncio.new_event_loop()
    up = threading.Event()

    async def begin() -> None:
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        host, port = runner.addresses[0][:2]
        found.url = f"http://{host}:{port}/hook"
        up.set()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(begin())
        loop.run_forever()
        loop.run_until_complete(runner.cleanup())
        loop.close()

    thread = threading.Thread(target=serve, name="webhook", daemon=True)
    thread.start()
    assert up.wait(10), "the webhook receiver did not start"
    try:
        yield found
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(15)


def script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def hooks_config(tmp_path: Path, team: Team, port: int, hooks: str) -> Path:
    return write_config(
        tmp_path,
        {"bob": {"path": team.bob.path, "interval": "1s"}},
        extra=f"http: {{listen: 127.0.0.1:{port}}}\nhooks:\n{hooks}",
    )


def push_from_alice(team: Team, name: str) -> str:
    made = commit(team.alice.path, {f"MEMORY_{name}.md": f"# {name}\n"})
    assert team.alice.sync().status == "pushed"
    return made


def test_a_command_hook_runs_once_on_a_synced_transition_with_the_result(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    port = free_port()
    out, env = tmp_path / "hook.jsonl", tmp_path / "hook.env"
    hook = script(
        tmp_path / "hook.sh",
        f'cat >> {out}\necho "$MEMSYNC_HOOK_ROOT $MEMSYNC_HOOK_STATUS $HUB_TOKEN" >> {env}\n',
    )
    config = hooks_config(
        tmp_path, team, port, f"  - on: [synced]\n    roots: [bob]\n    command: [{hook}]\n"
    )
    daemon = start(config, env={"HUB_TOKEN": "daemon-secret"})
    wait_for(lambda: cycles(port, "bob", "current") >= 1, 20, "the first cycle")
    made = push_from_alice(team, "a")
    wait_for(lambda: out.exists() and out.read_text().count("\n") >= 1, 20, "the hook")
    settled = cycles(port, "bob", "current")
    wait_for(lambda: cycles(port, "bob", "current") >= settled + 3, 30, "more polls")
    (line,) = out.read_text().splitlines()
    document = json.loads(line)
    assert document["root"] == "bob" and document["status"] == "synced"
    assert document["previous_status"] == "current" and document["head"] == made
    assert document["time"].endswith("Z") and document["event"] == "status-changed"
    assert env.read_text() == "bob synced \n"  # the daemon's environment stays its own
    assert daemon.proc.poll() is None


def test_a_webhook_is_retried_and_a_failing_command_never_holds_up_a_sync(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    port = free_port()
    token_file = tmp_path / "hook-token"
    token_file.write_text(TOKEN + "\n")
    failing = script(tmp_path / "fail.sh", "echo 'it broke' >&2\nexit 1\n")
    with receiver(answers=(500,)) as hub:
        config = hooks_config(
            tmp_path,
            team,
            port,
            f"  - on: [synced]\n    command: [{failing}]\n"
            f"  - on: [synced]\n    webhook: {{url: '{hub.url}', token: {{file: {token_file}}}}}\n",
        )
        daemon = start(config)
        wait_for(lambda: cycles(port, "bob", "current") >= 1, 20, "the first cycle")
        made = push_from_alice(team, "a")
        wait_for(lambda: len(hub.got) >= 2, 30, "the webhook, retried after a 500")
        (_, first, first_status), (headers, body, status) = hub.got[:2]
        assert (first_status, status) == (500, 200) and first == body
        assert headers["Authorization"] == f"Bearer {TOKEN}"
        assert headers["Content-Type"].startswith("application/json")
        assert body["status"] == "synced" and body["head"] == made and body["root"] == "bob"
        wait_for(lambda: bool(lines(daemon, "hooks[0]")), 15, "the failing hook's line")
        (failed,) = lines(daemon, "hooks[0]")
        assert "exited 1: it broke" in failed and " WARNING " in failed
        # The next sync comes at once: no hook holds the root.
        second = push_from_alice(team, "b")
        wait_for(lambda: git(team.bob.path, "rev-parse", "HEAD") == second, 15, "the next sync")
        wait_for(lambda: len(lines(daemon, "hooks[0]")) == 2, 15, "one line per transition")
        wait_for(lambda: len(hub.got) >= 3, 15, "the second transition's webhook")
        assert len(hub.got) == 3
        assert TOKEN not in daemon.log.read_text()


def test_a_hanging_hook_is_killed_at_its_timeout(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    port = free_port()
    pidfile = tmp_path / "hook.pid"
    hanging = script(tmp_path / "hang.sh", f"echo $$ >> {pidfile}\nexec sleep 300\n")
    config = hooks_config(
        tmp_path, team, port, f"  - on: [synced]\n    command: [{hanging}]\n    timeout: 3s\n"
    )
    daemon = start(config)
    wait_for(lambda: cycles(port, "bob", "current") >= 1, 20, "the first cycle")
    push_from_alice(team, "a")
    wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 20, "the hook")
    pid = int(pidfile.read_text().split()[0])
    second = push_from_alice(team, "b")  # while the hook hangs, syncs go on
    wait_for(lambda: git(team.bob.path, "rev-parse", "HEAD") == second, 15, "the next sync")
    wait_for(lambda: bool(lines(daemon, "was killed")), 20, "the hook's timeout")
    (killed,) = lines(daemon, "was killed")
    assert "did not finish in 3s" in killed

    def gone() -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_for(gone, 10, "the hook's process to be gone")
    # The second sync's transition ran the hook again: it too ends at its timeout, not
    # with the test (nothing this test started may outlive it).
    started = [int(p) for p in pidfile.read_text().split()]
    wait_for(lambda: len(lines(daemon, "was killed")) == len(started), 20, "every hook's timeout")
    for other in started:
        wait_for(lambda other=other: not alive(other), 10, "each hook's process to be gone")


def alive(pid: int) -> bool:
    """Running: not gone and not a zombie (a killed orphan waits for the test's reaper)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"
