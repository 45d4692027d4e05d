"""`/metrics` of a real daemon and of a real multi-worker hub, as Prometheus scrapes them:
the daemon's status gauge and last-success times move with real syncs and pulls; a hub of
two worker processes answers every scrape, through whichever worker, with the hub's totals.
Both pages pass `promtool check metrics`."""

from __future__ import annotations

import platform
import re
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path

import aiohttp

from memsync import __version__
from memsync.views.keys import generate_key
from memsync.wire.hub import TokenCreated
from tests.conftest import Team
from tests.e2e.daemons import Daemon, write_config
from tests.e2e.test_cli import memsync
from tests.e2e.test_daemon_events import (
    consume_auth,
    hub,
    provide_view,
    publish_auth,
    start,
    token,
)
from tests.e2e.test_hub_workers import Hub, connections, spread
from tests.e2e.test_hub_workers import hub as workers_hub
from tests.helpers import commit, git, metric, metric_samples, promtool_check, wait_for
from tests.integration.test_hub import bearer, build
from tests.kit import free_port

__all__ = ["hub", "start", "workers_hub"]  # fixtures pytest finds here by name

# Every root status word of CONTRACT §2 and §8: each has its series from the first cycle.
CONTRACT_STATUSES = {
    *("current", "synced", "pushed", "dirty", "conflict", "rejected", "rewound", "offline"),
    *("error", "busy", "disabled", "unconfigured", "auth-failed", "host-key-changed", "paused"),
}


def page(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return str(answer.read().decode())


def statuses(text: str, label: str, name: str) -> dict[str, float]:
    """`{status: value}` of `memsync_<label>_status{<label>=name}`."""
    return {
        dict(labels)["status"]: value
        for (metric_name, labels), value in metric_samples(text).items()
        if metric_name == f"memsync_{label}_status" and dict(labels)[label] == name
    }


def test_the_root_status_gauge_and_last_success_follow_real_syncs(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    port = free_port()
    config = write_config(
        tmp_path, {"bob": {"path": team.bob.path}}, extra=f"http: {{listen: 127.0.0.1:{port}}}\n"
    )
    start(config)
    success = "memsync_root_last_success_timestamp_seconds"
    wait_for(lambda: metric(page(port), success, root="bob") is not None, 20, "the first cycle")
    text = page(port)
    promtool_check(text)
    now = statuses(text, "root", "bob")
    assert set(now) >= CONTRACT_STATUSES
    assert now == {status: (1 if status == "current" else 0) for status in now}
    git_words = subprocess.run(["git", "--version"], capture_output=True, text=True, check=True)
    git_version = re.match(r"git version (\S+)", git_words.stdout)
    assert git_version is not None
    build_info = {
        "version": __version__,
        "python": platform.python_version(),
        "git": git_version.group(1),
    }
    assert metric(text, "memsync_build_info", **build_info) == 1
    first = metric(text, success, root="bob")
    assert first is not None

    made = commit(team.alice.path, {"MEMORY_new.md": "# New\n"})
    assert team.alice.sync().status == "pushed"
    done = memsync("--config", str(config), "sync-now", "--json")
    assert '"status":"synced"' in done.stdout.replace(" ", ""), done.stdout + done.stderr
    assert git(team.bob.path, "rev-parse", "HEAD") == made
    text = page(port)
    assert statuses(text, "root", "bob")["synced"] == 1
    assert statuses(text, "root", "bob")["current"] == 0
    synced = metric(text, success, root="bob")
    assert synced is not None and synced > first

    origin = git(team.bob.path, "remote", "get-url", "origin")
    git(team.bob.path, "remote", "set-url", "origin", "http://127.0.0.1:9/nowhere.git")
    done = memsync("--config", str(config), "sync-now", "--json")
    assert '"status":"offline"' in done.stdout.replace(" ", ""), done.stdout + done.stderr
    text = page(port)
    assert statuses(text, "root", "bob")["offline"] == 1
    assert sum(statuses(text, "root", "bob").values()) == 1
    assert metric(text, success, root="bob") == synced  # a failure is no success

    git(team.bob.path, "remote", "set-url", "origin", origin)
    done = memsync("--config", str(config), "sync-now", "--dry-run", "--json")
    assert '"status":"current"' in done.stdout.replace(" ", ""), done.stdout + done.stderr
    text = page(port)
    assert statuses(text, "root", "bob")["offline"] == 1  # a dry run changes no status
    assert metric(text, success, root="bob") == synced
    done = memsync("--config", str(config), "sync-now", "--json")
    text = page(port)
    assert statuses(text, "root", "bob")["current"] == 1
    assert sum(statuses(text, "root", "bob").values()) == 1
    back = metric(text, success, root="bob")
    assert back is not None and back > synced
    promtool_check(text)


def test_the_view_status_gauge_and_last_success_follow_a_real_pull(
    team: Team, tmp_path: Path, start: Callable[..., Daemon], hub: tuple[str, Path]
) -> None:
    url, data = hub
    key = tmp_path / "view.key"
    public = generate_key(key)
    provide_view(team.alice.path)
    publish_auth(team.alice.path, url, key, token(data, "publish:auth"))
    port = free_port()
    config = write_config(
        tmp_path, {"bob": {"path": team.bob.path}}, extra=f"http: {{listen: 127.0.0.1:{port}}}\n"
    )
    consume_auth(config, url, public, f"{{value: {token(data, 'read:auth')}}}", "10m")
    start(config)
    success = "memsync_view_last_success_timestamp_seconds"
    wait_for(lambda: metric(page(port), success, view="team-auth") is not None, 20, "the pull")
    text = page(port)
    assert statuses(text, "view", "team-auth")["pulled"] == 1
    assert sum(statuses(text, "view", "team-auth").values()) == 1
    promtool_check(text)


async def test_two_workers_answer_every_scrape_with_the_hubs_totals(workers_hub: Hub) -> None:
    hub = workers_hub
    created = hub.cli("token", "create", "--scope", "metrics", "--json")
    scraper = TokenCreated.model_validate_json(created.stdout).token
    manifest, package = build("auth", 1)
    async with connections(16) as sessions:
        await spread(hub, sessions, hub.admin)  # 16 x 200, both workers hold connections
        for session in sessions:
            for _ in range(3):  # 48 x 401 (no token), on both workers
                async with session.get(f"{hub.url}/v1/views") as answer:
                    assert answer.status == 401
        form = aiohttp.FormData()
        form.add_field("manifest", manifest, filename="manifest", content_type="application/json")
        form.add_field("package", package, filename="package", content_type="application/zip")
        url = f"{hub.url}/v1/views/auth/revisions"
        async with sessions[0].post(url, data=form, headers=bearer(hub.admin)) as answer:
            assert answer.status == 201
        async with aiohttp.ClientSession() as streaming:
            stream = await streaming.get(f"{hub.url}/v1/events", headers=bearer(hub.admin))
            assert stream.status == 200
            pages = []
            for session in sessions:  # each on its connection, spread over both workers
                async with session.get(f"{hub.url}/metrics", headers=bearer(scraper)) as answer:
                    assert answer.status == 200
                    pages.append(await answer.text())
            stream.close()
    for text in pages:
        assert metric(text, "memsync_hub_requests_total", route="/v1/views", status="200") == 16
        assert metric(text, "memsync_hub_requests_total", route="/v1/views", status="401") == 48
        assert metric(text, "memsync_hub_token_failures_total", reason="missing") == 48
        assert metric(text, "memsync_hub_uploads_total", result="created") == 1
        assert metric(text, "memsync_hub_view_revision", view="auth") == 1
        assert metric(text, "memsync_hub_event_streams_open") == 1
    promtool_check(pages[0])
