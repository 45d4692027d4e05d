"""The daemon with a real hub process: hub events sync a root at once; metrics and health."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import ClassVar

import pytest

from memsync.hub.tokens import hub_init, open_store
from memsync.roots.create import init_root
from memsync.views.keys import generate_key, load_private_key
from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.e2e.hubs import BADID_BYTES, hostile_hub, running_hub
from tests.e2e.test_cli import memsync
from tests.helpers import commit, git, wait_for
from tests.kit import free_port


@pytest.fixture
def start(tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    with launcher(tmp_path) as launch:
        yield launch


@pytest.fixture
def hub(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    # The hub's data dir and tokens are made here, by the code `hub init` and `hub token
    # create` run (their commands have their own tests): a set-up process less each.
    data = tmp_path / "hub"
    hub_init(data)
    with running_hub(data) as (url, _log):
        yield url, data


def token(data: Path, scope: str) -> str:
    store = open_store(data)
    try:
        return store.create([scope])[1]
    finally:
        store.close()


def notify(url: str, secret: str, commit_sha: str) -> None:
    request = urllib.request.Request(
        f"{url}/v1/roots/team/notify",
        data=json.dumps({"commit": commit_sha}).encode(),
        headers={"Authorization": f"Bearer {secret}", "Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=5) as answer:
        assert answer.status in (200, 202, 204)


def test_an_upstream_event_syncs_at_once(
    team: Team, tmp_path: Path, start: object, hub: tuple[str, Path]
) -> None:
    url, data = hub
    follow, tell = token(data, "root:team"), token(data, "notify:team")
    extra = (
        f'      events: "{url}/v1/events?root=team"\n      events_token: {{value: "{follow}"}}\n'
    )
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    text = config.read_text().replace(
        "sync: {interval: 60s, timeout: 20s}",
        "sync:\n      interval: 60s\n      timeout: 20s\n" + extra,
    )
    config.write_text(text)
    daemon = start(config)  # type: ignore[operator]
    wait_for(lambda: "following hub events" in daemon.log.read_text(), 15, "the event stream")
    daemon.wait_status(lambda s: s.roots[0].status == "current", 15, "the start-up catch-up")
    latencies = []
    for n in range(3):
        made = commit(team.alice.path, {f"MEMORY_{n}.md": f"# {n}\n"})
        assert team.alice.sync().status == "pushed"
        sent = time.monotonic()
        notify(url, tell, made)
        wait_for(lambda m=made: git(team.bob.path, "rev-parse", "HEAD") == m, 5, "the event sync")
        latencies.append(time.monotonic() - sent)
    assert max(latencies) < 5  # the interval is 60 s: only the event can explain this
    print(f"event propagation: {[round(x * 1000) for x in latencies]} ms")


def test_metrics_health_and_readiness(team: Team, tmp_path: Path, start: object) -> None:
    port = free_port()
    carol = tmp_path / "carol"
    init_root(carol)
    git(carol, "remote", "add", "origin", "http://127.0.0.1:9/nowhere.git")
    config = write_config(
        tmp_path,
        {"bob": {"path": team.bob.path}, "carol": {"path": carol}},
        extra=f"http: {{listen: 127.0.0.1:{port}}}\n",
    )
    start(config)  # type: ignore[operator]
    base = f"http://127.0.0.1:{port}"
    with urllib.request.urlopen(f"{base}/healthz", timeout=5) as answer:
        assert answer.status == 200

    def counted() -> bool:
        with urllib.request.urlopen(f"{base}/metrics", timeout=5) as answer:
            text = answer.read().decode()
        return 'memsync_sync_total{root="bob",status="current"}' in text and (
            'memsync_sync_total{root="carol",status="offline"}' in text
        )

    wait_for(counted, 20, "both roots' first cycles in the metrics")
    with pytest.raises(urllib.error.HTTPError) as unready:
        urllib.request.urlopen(f"{base}/readyz", timeout=5)
    assert unready.value.code == 503
    assert "carol" in unready.value.read().decode()


def test_two_daemons_a_local_commit_reaches_the_other_machine_by_itself(
    team: Team, tmp_path: Path, hub: tuple[str, Path]
) -> None:
    """Alice's daemon validates and pushes her commit, then tells the hub; Bob's daemon
    follows the hub and syncs at once. Neither runs on a short interval."""
    url, data = hub
    follow, tell = token(data, "root:team"), token(data, "notify:team")
    configs = {}
    for name, member in (("alice", team.alice), ("bob", team.bob)):
        home = tmp_path / name / "daemon"
        home.mkdir(parents=True)
        sync = [
            "    sync:",
            "      interval: 60s",
            f'      events: "{url}/v1/events?root=team"',
            f'      events_token: {{value: "{follow}"}}',
            f'      notify: {{hub: "{url}", token: {{value: "{tell}"}}, root: team}}',
        ]
        config = write_config(home, {name: {"path": member.path, "watch": "true"}})
        config.write_text(
            config.read_text().replace("    sync: {interval: 60s, timeout: 20s}", "\n".join(sync))
        )
        configs[name] = (home, config)
    with launcher(configs["alice"][0]) as launch_a, launcher(configs["bob"][0]) as launch_b:
        alice, bob = launch_a(configs["alice"][1]), launch_b(configs["bob"][1])
        for daemon in (alice, bob):
            wait_for(lambda d=daemon: "following hub events" in d.log.read_text(), 15, "streams")
        latencies = []
        for n in range(3):
            made = commit(team.alice.path, {f"MEMORY_{n}.md": f"# {n}\n"})
            sent = time.monotonic()
            wait_for(lambda m=made: git(team.bob.path, "rev-parse", "HEAD") == m, 10, "bob")
            latencies.append(time.monotonic() - sent)
        print(f"commit on alice -> published on bob: {[round(x * 1000) for x in latencies]} ms")
        assert max(latencies) < 10


def test_a_team_server_publishes_its_views_when_head_moves(
    team: Team, tmp_path: Path, start: Callable[..., Daemon], hub: tuple[str, Path]
) -> None:
    url, data = hub
    key = tmp_path / "view.key"
    generate_key(key)
    publisher, reader = token(data, "publish:auth"), token(data, "read:auth")
    alice = team.alice.path
    memory = provide_view(alice)
    config = write_config(tmp_path, {"alice": {"path": alice, "watch": "true"}})
    config.write_text(
        config.read_text()
        + f'    publish: [{{view: auth, hub: "{url}", token: {{value: "{publisher}"}}, '
        f"key: {{file: {key}}}}}]\n"
    )
    start(config)

    def revision() -> int:
        request = urllib.request.Request(
            f"{url}/v1/views/auth/manifest", headers={"Authorization": f"Bearer {reader}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=5) as answer:
                return int(json.load(answer)["signed"]["revision"])
        except urllib.error.HTTPError:
            return 0

    wait_for(lambda: revision() == 1, 20, "the first revision (the catch-up push)")
    commit(alice, {"MEMORY.md": memory.replace("short-lived", "5-minute")})
    wait_for(lambda: revision() == 2, 20, "a new revision after the next local commit")


def publish_auth(root: Path, url: str, key: Path, publisher: str) -> None:
    """What `views publish auth` from `root` to the hub runs, in this process, as a provider
    would (the command has its own tests: test_views): a set-up process less each."""
    from memsync.views.publish import publish_view  # noqa: PLC0415 - views load when used

    done = asyncio.run(publish_view(root, "auth", url, publisher, [load_private_key(key)]))
    assert done.status == "published", done


def consume_auth(config: Path, url: str, public: str, token_ref: str, refresh: str = "5m") -> None:
    """Add the `team-auth` view of the hub's `auth` to bob's config."""
    config.write_text(
        config.read_text()
        + f"views:\n  team-auth:\n    root: bob\n    view_id: auth\n    refresh: {refresh}\n"
        + f"    source: {{kind: http, url: {url}/v1/views/auth, token: {token_ref}}}\n"
        + f'    trust: {{keys: ["{public}"]}}\n'
    )


def provide_view(alice: Path) -> str:
    """Commit an `auth` view recipe and its memory into `alice`; the memory text."""
    views = alice / "shared_views" / "auth"
    views.mkdir(parents=True)
    (views / "view.md").write_text("# Auth\n")
    (views / "recipe.toml").write_text(
        'version = 1\nview_id = "auth"\nkind = "file"\ntitle = "Auth"\napproved = true\n'
        'intent = "auth"\nrender = "extractive"\ninclude_headings = ["auth"]\n'
        "include_nodes = []\ninclude_files = []\nexclude_ids = []\n"
    )
    memory = "# User Context\n\n# Auth {#auth}\n\n- `login` short-lived tokens → []\n"
    commit(
        alice,
        {
            "MEMORY.md": memory,
            "shared_views/auth/view.md": "# Auth\n",
            "shared_views/auth/recipe.toml": (views / "recipe.toml").read_text(),
        },
    )
    return memory


def test_views_pull_goes_through_the_daemon(
    team: Team, tmp_path: Path, start: Callable[..., Daemon], hub: tuple[str, Path]
) -> None:
    url, data = hub
    key = tmp_path / "view.key"
    public = generate_key(key)
    provide_view(team.alice.path)
    publish_auth(team.alice.path, url, key, token(data, "publish:auth"))
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    consume_auth(config, url, public, "{env: HUB_READ}")
    # Only the daemon knows the read token: an in-process pull could not authenticate.
    start(config, env={"HUB_READ": token(data, "read:auth")})
    done = memsync("--config", str(config), "views", "pull", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)["results"][0]
    assert result["view"] == "team-auth" and result["status"] in ("pulled", "current")
    assert result["revision"] == 1


def test_a_revision_event_pulls_the_view_at_once_and_metrics_follow(
    team: Team, tmp_path: Path, start: Callable[..., Daemon], hub: tuple[str, Path]
) -> None:
    url, data = hub
    key = tmp_path / "view.key"
    public = generate_key(key)
    memory = provide_view(team.alice.path)
    publisher = token(data, "publish:auth")
    publish_auth(team.alice.path, url, key, publisher)
    port = free_port()
    config = write_config(
        tmp_path, {"bob": {"path": team.bob.path}}, extra=f"http: {{listen: 127.0.0.1:{port}}}\n"
    )
    consume_auth(config, url, public, f"{{value: {token(data, 'read:auth')}}}", "10m")
    daemon = start(config)

    daemon.wait_status(lambda s: s.views[0].revision == 1, 20, "the start-up pull")
    wait_for(lambda: "following hub events" in daemon.log.read_text(), 15, "the view's stream")
    commit(team.alice.path, {"MEMORY.md": memory.replace("short-lived", "5-minute")})
    publish_auth(team.alice.path, url, key, publisher)
    daemon.wait_status(
        lambda s: s.views[0].revision == 2,
        10,
        "the revision event to pull revision 2 (refresh is 10m)",
    )

    def metric(name: str) -> float | None:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith(name):
                    return float(line.rsplit(" ", 1)[1])
        return None

    wait_for(lambda: metric('memsync_view_revision{view="team-auth"}') == 2, 10, "the gauge")
    age = metric('memsync_view_age_seconds{view="team-auth"}')
    assert age is not None and 0 <= age < 60


class _HostileStream(http.server.BaseHTTPRequestHandler):
    """First connection: garbage, then a drop. Next ones: one good event, then heartbeats."""

    connections: ClassVar[list[dict[str, str]]] = []
    go: ClassVar[threading.Event] = threading.Event()

    def do_GET(self) -> None:
        self.connections.append(dict(self.headers))
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        if len(self.connections) == 1:
            self.wfile.write(b"\xff\xfe\x00garbage\nevent: upstream\ndata: {not json\n\nid: 41\n\n")
            self.wfile.flush()
            return  # drop the stream
        self.go.wait(30)
        self.wfile.write(b'id: 42\nevent: upstream\ndata: {"root": "team", "commit": "x"}\n\n')
        self.wfile.flush()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self.wfile.write(b": heartbeat\n\n")
                self.wfile.flush()
            except OSError:
                return
            time.sleep(0.2)

    def log_message(self, *args: object) -> None:
        pass


def test_a_hub_that_sends_garbage_and_drops_the_stream_is_survived(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    _HostileStream.connections = []
    _HostileStream.go = threading.Event()
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _HostileStream)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
        url = f"http://127.0.0.1:{server.server_address[1]}/v1/events?root=team"
        config.write_text(
            config.read_text().replace(
                "sync: {interval: 60s, timeout: 20s}",
                f'sync:\n      interval: 60s\n      timeout: 20s\n      events: "{url}"',
            )
        )
        daemon = start(config)
        wait_for(lambda: len(_HostileStream.connections) >= 2, 20, "a reconnect after the drop")
        assert _HostileStream.connections[1].get("Last-Event-ID") == "41"
        made = commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
        assert team.alice.sync().status == "pushed"
        _HostileStream.go.set()  # now the good event: bob syncs at once (the interval is 60 s)
        wait_for(lambda: git(team.bob.path, "rev-parse", "HEAD") == made, 15, "bob to sync")
        assert daemon.proc.poll() is None
    finally:
        server.shutdown()
        server.server_close()


# --- a hostile hub against the real daemon: it keeps answering, in bounded memory ---------


def follow_config(tmp_path: Path, bob: Path, url: str, token_line: str = "") -> Path:
    """bob's daemon config following `url` (plus an `events_token` line, if given)."""
    config = write_config(tmp_path, {"bob": {"path": bob}})
    extra = f'      events: "{url}"\n' + (f"      {token_line}\n" if token_line else "")
    config.write_text(
        config.read_text().replace(
            "sync: {interval: 60s, timeout: 20s}",
            "sync:\n      interval: 60s\n      timeout: 20s\n" + extra,
        )
    )
    return config


def rss(pid: int) -> int:
    """The process's resident set size in bytes (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS")


@pytest.mark.parametrize("mode", ["endless", "flood", "gzip"])
def test_a_hostile_stream_costs_bounded_memory_and_status_still_answers(
    team: Team, tmp_path: Path, start: Callable[..., Daemon], mode: str
) -> None:
    """A never-ending event, a blank-line flood, a gzip bomb: for 5 s the daemon's RSS
    stays within 64 MiB of where it started and its control socket answers `status` within
    3 s every time it is asked (every 0.1 s). Before: 1.6 GiB in 20 s; `status` took 19-32 s
    (5 s at that rate is 400 MiB, and the first `status` alone outlasts the window)."""
    with hostile_hub() as hub:
        hub.mode = mode
        daemon = start(follow_config(tmp_path, team.bob.path, f"{hub.url}/v1/events?root=team"))
        wait_for(lambda: len(hub.requests) >= 1, 20, "the daemon to follow the hub")
        base = peak = rss(daemon.proc.pid)
        slowest, until = 0.0, time.monotonic() + 5

        def answered_for_five_seconds() -> bool:
            nonlocal slowest, peak
            asked = time.monotonic()
            assert daemon.status().roots[0].root == "bob"
            slowest = max(slowest, time.monotonic() - asked)
            peak = max(peak, rss(daemon.proc.pid))
            return time.monotonic() >= until

        wait_for(answered_for_five_seconds, 60, "five seconds of status answers", interval=0.1)
        assert daemon.proc.poll() is None
        sent = sum(hub.sent)
    mib = 1024 * 1024
    print(
        f"{mode}: daemon RSS {base / mib:.0f} -> peak {peak / mib:.0f} MiB; hub sent "
        f"{sent / mib:.0f} MiB on {len(hub.requests)} connection(s); slowest status {slowest:.2f} s"
    )
    assert peak - base < 64 * mib
    assert slowest < 3


def test_ids_with_control_characters_and_a_token_file_with_two_newlines_are_survived(
    team: Team, tmp_path: Path, start: Callable[..., Daemon]
) -> None:
    """Before, either one killed the daemon (exit 3): the id when it went back as
    `Last-Event-ID`, the token file at start. Now the id is dropped; the token is refused by
    its config key (never its value) and the stream followed without it."""
    token_file = tmp_path / "follow.token"
    token_file.write_bytes(b"msk_s3cret\n\n")
    with hostile_hub() as hub:
        hub.mode, hub.per_connection = "badid", BADID_BYTES  # the bad ids, then a drop
        config = follow_config(
            tmp_path,
            team.bob.path,
            f"{hub.url}/v1/events?root=team",
            f"events_token: {{file: {token_file}}}",
        )
        daemon = start(config)
        wait_for(lambda: len(hub.requests) >= 3, 30, "two reconnects")
        assert daemon.proc.poll() is None
        assert hub.requests[1].get("Last-Event-ID") == "42"
        assert all("Authorization" not in r for r in hub.requests)
        assert daemon.status().roots[0].root == "bob"
    log = daemon.log.read_text()
    assert "roots.bob.sync.events_token" in log
    assert "msk_s3cret" not in log
