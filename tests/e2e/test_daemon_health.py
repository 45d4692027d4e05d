"""The daemon stays answerable and says when it is ready (issue 16, items 18 and 20): a
config path that cannot be read refuses the reload at once, reloads coalesce on their own
thread and never starve the control socket; `/readyz` is 503 until every root finished its
first cycle, then follows the last cycles."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from memsync.config import load_config
from memsync.config.model import Settings, settings_from
from memsync.daemon.app import Daemon as DaemonApp
from memsync.daemon.client import call
from memsync.roots.create import init_root
from memsync.views.keys import generate_key
from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.e2e.test_cli import memsync
from tests.helpers import git, wait_for
from tests.kit import free_port


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


# -- item 18: reloads ------------------------------------------------------------------------


def test_a_fifo_at_the_config_path_refuses_each_reload_and_status_still_answers(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    copy = tmp_path / "copy.yaml"  # what the CLI reads: the daemon's own path is a FIFO now
    shutil.copy(config, copy)
    daemon = start(config)
    config.unlink()
    os.mkfifo(config)
    for _ in range(8):  # one at a time, so none coalesces with another
        daemon.proc.send_signal(signal.SIGHUP)
        began = time.monotonic()
        answer = call(daemon.socket, "GET", "/v1/status", timeout=15)
        assert answer["daemon"]["running"] and time.monotonic() - began < 15
    done = memsync("--config", str(copy), "status", "--json")
    assert done.returncode == 0, done.stderr
    refused = f"reload refused, keeping the running configuration: config file {config} is a FIFO"
    wait_for(lambda: refused in daemon.log.read_text(), 15, "the refused reload in the log")
    assert daemon.proc.poll() is None
    # It still serves: a sync through it gets a verdict.
    synced = memsync("--config", str(copy), "sync-now", "--json")
    assert json.loads(synced.stdout)["results"][0]["status"] == "current", synced.stderr


async def test_sighups_coalesce_into_one_reload_on_its_own_thread(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    path = write_config(tmp_path, {"bob": {"path": plain}})
    settings: Settings = settings_from(load_config(path), path)
    release = threading.Event()
    loads: list[str] = []

    def load() -> Settings:  # a config read that hangs until released (a stuck file system)
        loads.append(threading.current_thread().name)
        release.wait(30)
        return settings

    daemon = DaemonApp(settings, load)
    running = asyncio.create_task(daemon.run())
    client = ThreadPoolExecutor(max_workers=1)  # not the loop's default pool
    loop = asyncio.get_running_loop()
    try:
        deadline = time.monotonic() + 60
        while not settings.control_socket.exists():
            assert time.monotonic() < deadline and not running.done()
            await asyncio.sleep(0.02)
        os.kill(os.getpid(), signal.SIGHUP)
        while not loads:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        for _ in range(8):  # while that reload hangs
            os.kill(os.getpid(), signal.SIGHUP)
        status = loop.run_in_executor(
            client, lambda: call(settings.control_socket, "GET", "/v1/status", timeout=15)
        )
        assert (await asyncio.wait_for(status, 20))["daemon"]["running"]
        assert len(loads) == 1 and loads[0].startswith("reload")
        release.set()
        while len(loads) < 2:  # the burst asked for one more, no more
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        assert daemon._reloading is not None
        await asyncio.wait_for(daemon._reloading, 10)
        assert len(loads) == 2
    finally:
        release.set()
        daemon.stop()
        await asyncio.wait_for(running, 30)
        client.shutdown()


# -- item 20: readiness ----------------------------------------------------------------------


def readyz(port: int) -> tuple[int, dict[str, object]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_ready_only_after_every_root_and_view_finished_a_first_cycle(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    port = free_port()
    hanging = socket.socket()  # an upstream and a hub that take connections, never answer
    hanging.bind(("127.0.0.1", 0))
    hanging.listen(8)
    slow = f"http://127.0.0.1:{hanging.getsockname()[1]}"
    carol = tmp_path / "carol"
    init_root(carol)
    git(carol, "remote", "add", "origin", f"{slow}/t.git")
    public = generate_key(tmp_path / "view.key")
    listen = f"http: {{listen: 127.0.0.1:{port}}}\n"
    view = (
        "views:\n  team-auth:\n    root: bob\n    view_id: auth\n"
        f"    source: {{kind: http, url: {slow}/v1/views/auth}}\n"
        f'    trust: {{keys: ["{public}"]}}\n'
    )
    roots: dict[str, dict[str, object]] = {
        "bob": {"path": team.bob.path},
        "carol": {"path": carol, "timeout": "300s"},
    }
    config = write_config(tmp_path, roots, listen + view)
    try:
        daemon = start(config)
        first = [  # bob's first cycle is done, and ok
            "root carol: first cycle not finished",
            "view team-auth: first pull not finished",
        ]
        wait_for(lambda: readyz(port) == (503, {"status": "unready", "reasons": first}), 30, "bob")
    finally:
        hanging.close()  # carol's fetch and the view's pull are reset: their first cycles end
    failed = ["root carol: offline", "view team-auth: unavailable"]
    wait_for(lambda: readyz(port)[1].get("reasons") == failed, 60, "both failed")
    write_config(tmp_path, {"bob": {"path": team.bob.path}}, listen)
    daemon.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: readyz(port)[0] == 200, 30, "ready once only bob is configured")
    assert readyz(port)[1] == {"status": "ready"}
