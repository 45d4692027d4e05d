"""Idle memory (issue 18, item 4): a daemon with one small root and nothing else configured
holds only what it uses at rest. View pulls (and cryptography with them), the maintenance
cycles, the HTTP client (hub events, notifications, webhooks) load when a root or view
first uses them, so the process stays well under what it took when they loaded at start.

Observed from outside the real `memsync run` process: its VmRSS from /proc, and its module
list, written when it gets SIGUSR1 by a `sitecustomize` the test puts on its PYTHONPATH
(nothing in memsync reads it)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from memsync.daemon.client import call
from tests.conftest import Team
from tests.e2e.daemons import launcher, write_config
from tests.e2e.hubs import hostile_hub
from tests.e2e.test_cli import memsync
from tests.e2e.test_daemon_events import follow_config
from tests.helpers import wait_for
from tests.kit import free_port

# Not imported by an idle daemon whose config names no view, cycle, hook or hub. Each entry
# is a package or module; its submodules count too.
NOT_AT_REST = (
    "cryptography",
    "memsync.views.pull",
    "memsync.views.trust",
    "memsync.views.consumer",
    "memsync.views.manifest",
    "memsync.views.keys",
    "memsync.views.archive",
    "memsync.views.build",
    "memsync.views.publish",
    "memsync.hub",
    "memsync.cli.views",
    "memsync.cli.hub",
    "memsync.doctor",
    "memsync.cycles.runner",
    "memsync.cycles.roles",
    "memsync.cycles.turn",
    "memsync.daemon.events",
    "memsync.transports.http",
    "rich",
    # The HTTP server and client load only for what needs them (hub events, HTTP views,
    # webhooks, `http.listen`): the control socket is served with asyncio alone.
    "aiohttp",
    "multidict",
    "yarl",
    # No pydantic at rest: the configuration is validated in a short child process (or
    # recalled from the settings memo), and the control socket's documents are plain JSON.
    "pydantic",
    "pydantic_core",
    "yaml",
    "memsync.config.schema",
    "memsync.config.load",
    "memsync.wire.cli",
    "memsync.wire.pause",
    "memsync.wire.requestmodels",
)
# Measured 39-40 MB with one small root after its first cycle (62 MB with aiohttp and
# pydantic loaded, 70-73 MB with the view stack too). The module list above is the exact
# guard; the bound is issue 18's target.
RSS_BOUND_MB = 50

SITE = """
import os, signal, sys

def _dump(signum, frame):
    path = os.environ["MEMSYNC_TEST_MODULES"]
    with open(path + ".tmp", "w") as out:
        out.write("\\n".join(sorted(sys.modules)))
    os.replace(path + ".tmp", path)

signal.signal(signal.SIGUSR1, _dump)
"""


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for {pid}")


def module_list(pid: int, dump: Path) -> list[str]:
    """The daemon's `sys.modules`, as its `sitecustomize` writes it on SIGUSR1."""
    dump.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR1)
    wait_for(dump.exists, 10, "the daemon's module list")
    return dump.read_text().split("\n")


def listing_env(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """The environment of a daemon that writes its module list (`module_list`), and where.
    A fresh cache home: no settings memo, so the schema's child runs as at a first start."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SITE)
    dump = tmp_path / "modules.txt"
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    env = {
        "PYTHONPATH": os.pathsep.join(paths),
        "MEMSYNC_TEST_MODULES": str(dump),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
    }
    return env, dump


def test_an_idle_daemon_with_one_root_loads_only_what_it_uses(team: Team, tmp_path: Path) -> None:
    env, dump = listing_env(tmp_path)
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    with launcher(tmp_path) as launch:
        daemon = launch(config, env=env, memo=False)  # the schema's child runs
        wait_for(
            lambda: call(daemon.socket, "GET", "/v1/status")["roots"][0]["status"] is not None,
            30,
            "the daemon's first cycle",
        )
        rss = rss_mb(daemon.proc.pid)
        modules = module_list(daemon.proc.pid, dump)
        # What a person does to an idle daemon leaves it at rest: `sync-now` and `status`
        # through it, a reload of an edited config and a refused one (in a child).
        cache = {"XDG_CACHE_HOME": env["XDG_CACHE_HOME"]}
        done = memsync("--config", str(config), "sync-now", "--json", env=cache)
        assert done.returncode == 0 and '"status":"current"' in done.stdout, done
        assert memsync("--config", str(config), "status", env=cache).returncode == 0
        config.write_text(config.read_text().replace("interval: 60s", "interval: 90s"))
        os.kill(daemon.proc.pid, signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in daemon.log.read_text(), 30, "the reload")
        good = config.read_text()
        config.write_text(good + "bogus: 1\n")  # refused, with its problem on its own line
        os.kill(daemon.proc.pid, signal.SIGHUP)
        wait_for(lambda: ": bogus: " in daemon.log.read_text(), 30, "the refused reload")
        used = module_list(daemon.proc.pid, dump)
        assert daemon.proc.poll() is None  # still running: the signal only asked for the list

    # The list is the daemon's own: what it runs at rest is there.
    assert {"memsync.daemon.app", "memsync.daemon.control", "memsync.roots.cycle"} <= set(modules)
    for listed in (modules, used):
        loaded = [m for m in listed if any(m == n or m.startswith(n + ".") for n in NOT_AT_REST)]
        assert loaded == []
    assert rss <= RSS_BOUND_MB, f"idle daemon RSS {rss:.1f} MB > {RSS_BOUND_MB} MB"


# Records, from inside the daemon, each CA bundle load and whether its TLS context verifies.
TLS_SITE = """
import os, ssl

def _recording(name):
    load = getattr(ssl.SSLContext, name)

    def recorded(self, *args, **kwargs):
        with open(os.environ["MEMSYNC_TEST_TLS"], "a") as out:
            out.write(f"{name} {int(self.verify_mode)}\\n")
        return load(self, *args, **kwargs)

    setattr(ssl.SSLContext, name, recorded)

for _name in ("set_default_verify_paths", "load_default_certs"):
    _recording(_name)
"""


def test_a_daemon_using_aiohttp_reads_no_ca_bundle_for_the_context_that_verifies_nothing(
    team: Team, tmp_path: Path
) -> None:
    """aiohttp builds, when imported, a TLS context for `ssl=False` (which memsync never asks
    for) and reads the system's CA bundle into it (~30 ms of CPU). A daemon loads aiohttp for
    hub events, HTTP views, webhooks and `http.listen`: whichever comes first loads it
    without that read; the context that verifies still reads the bundle (https must work)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(TLS_SITE)
    loads = tmp_path / "tls.txt"
    env = {
        "PYTHONPATH": os.pathsep.join([str(site), *filter(None, [os.environ.get("PYTHONPATH")])]),
        "MEMSYNC_TEST_TLS": str(loads),
    }
    with hostile_hub() as hub:
        config = follow_config(tmp_path, team.bob.path, f"{hub.url}/v1/events?root=team")
        config.write_text(config.read_text() + f"http: {{listen: 127.0.0.1:{free_port()}}}\n")
        with launcher(tmp_path) as launch:
            daemon = launch(config, env=env)
            wait_for(lambda: len(hub.requests) >= 1, 20, "the daemon to follow the hub")
            assert daemon.proc.poll() is None
    recorded = loads.read_text().split("\n")
    assert "load_default_certs 2" in recorded  # aiohttp was loaded: the verifying context
    assert [line for line in recorded if line.endswith(" 0")] == []  # CERT_NONE: none read
