"""What a process loads for what it does (issue 18, item 5): every `memsync` process a user
(or the test suite) starts pays its imports in CPU, so a command loads only what its work and
its configuration use. tests/e2e/test_startup.py covers `--help`, `status` and `sync-now`;
these cover `init` and the daemon.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memsync.daemon.client import call
from memsync.hub.tokens import hub_init
from memsync.wire.cli import SyncReport, ValidateReport
from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.e2e.test_cli import memsync
from tests.e2e.test_daemon_memory import listing_env, module_list
from tests.e2e.test_startup import probe, probe_counting
from tests.e2e.test_views import (  # noqa: F401 - fixtures
    Scene,
    built,
    copied,
    hub,
    provider,
    scene,
)
from tests.helpers import commit, git, push, wait_for
from tests.kit import hub_process

# A one-shot `init` asks git: GitPython's import cost it more than the rest of its imports.
GITPYTHON = ("git", "gitdb")
# The wire models (pydantic) load for a `--json` document only.
WIRE = ("pydantic", "pydantic_core", "memsync.wire.cli")


def test_init_loads_neither_gitpython_nor_the_wire_models_it_does_not_print(
    tmp_path: Path,
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    upstream = tmp_path / "team.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(upstream))
    # A new root whose baseline goes to an empty upstream, then one that joins it.
    for name in ("first", "second"):
        code, heavy, out, err = probe(
            "init",
            str(tmp_path / name),
            "--upstream",
            str(upstream),
            env=env,
            heavy=(*GITPYTHON, *WIRE),
        )
        assert (code, heavy) == (0, []), err
        assert out.startswith(f"{tmp_path / name}: "), out
    assert git(tmp_path / "second", "rev-parse", "HEAD") == git(upstream, "rev-parse", "main")
    # --json prints the wire model's document; GitPython still stays out.
    code, heavy, out, err = probe(
        "init", str(tmp_path / "third"), "--json", env=env, heavy=(*GITPYTHON, *WIRE)
    )
    assert code == 0, err
    assert "memsync.wire.cli" in heavy
    assert not [m for m in heavy if m.split(".")[0] in GITPYTHON], heavy
    assert json.loads(out)["created"] is True


def test_validate_loads_neither_the_schema_nor_the_wire_models_it_does_not_print(
    tmp_path: Path,
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    root = tmp_path / "mem"
    assert probe("init", str(root), env=env)[0] == 0
    (root / "MEMORY.md").write_text("# User Context\n\n# Notes {#notes}\n\n- `a` one → [b]\n")
    code, heavy, out, err = probe(
        "validate", str(root), env=env, heavy=(*WIRE, "memsync.config.schema", "yaml")
    )
    assert (code, heavy) == (1, []), err
    # The document is the wire model's text, written without the model; the lines a
    # person reads say what it says.
    code, heavy, document, err = probe(
        "validate", str(root), "--json", env=env, heavy=(*WIRE, "memsync.config.schema")
    )
    assert (code, heavy) == (1, []), err
    assert document == ValidateReport.model_validate_json(document).model_dump_json() + "\n"
    problems = json.loads(document)["problems"]
    assert code == 1 and problems
    assert out.splitlines()[0].startswith(f"{root}: {len(problems)} problem(s) in ")
    for problem, line in zip(problems, out.splitlines()[1:], strict=True):
        assert line.split()[0] == problem["code"] and problem["message"] in line


def test_sync_now_json_prints_the_models_text_without_loading_the_models(
    team: Team, tmp_path: Path
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    for turn in range(2):  # the first loads the schema (no settings memo yet); the second not
        commit(team.alice.path, {"MEMORY_json.md": f"# Json\n\nturn {turn}\n"}, "json")
        push(team.alice.path)
        code, heavy, out, err = probe(
            "--config", str(config), "sync-now", "--json", env=env, heavy=WIRE
        )
        assert code == 0, err
        assert out == SyncReport.model_validate_json(out).model_dump_json() + "\n"
        assert SyncReport.model_validate_json(out).results[0].status == "synced"
        if turn:
            assert heavy == []


def test_hub_init_and_tokens_load_no_server_and_no_models_they_do_not_print(
    tmp_path: Path,
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    data = tmp_path / "hub"
    server = ("aiohttp", "memsync.hub.app", "memsync.hub.serve", "memsync.hub.workers")
    code, heavy, out, err = probe("hub", "init", str(data), env=env, heavy=(*server, *WIRE))
    assert (code, heavy) == (0, []), err
    assert out.startswith("msk_"), out
    create = ("hub", "token", "create", "--data", str(data), "--scope", "read:team")
    code, heavy, out, err = probe(*create, env=env, heavy=(*server, *WIRE))
    assert (code, heavy) == (0, []), err
    made = out.strip()
    code, heavy, out, err = probe(*create, "--json", env=env, heavy=server)
    assert (code, heavy) == (0, []), err
    assert json.loads(out)["scopes"] == ["read:team"]
    code, heavy, out, err = probe(
        "hub",
        "token",
        "revoke",
        made.split("_")[1],
        "--data",
        str(data),
        env=env,
        heavy=(*server, *WIRE),
    )
    assert (code, heavy) == (0, []), err
    assert out == f"token {made.split('_')[1]} revoked\n"


def test_keys_and_views_build_load_no_http_client_and_no_pull(
    provider: Path,  # noqa: F811 - the fixture
    tmp_path: Path,
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    http = ("aiohttp", "memsync.transports.http", "memsync.views.pull", "memsync.views.publish")
    key = tmp_path / "view.key"
    code, heavy, out, err = probe("keys", "generate", "--out", str(key), env=env, heavy=http)
    assert (code, heavy) == (0, []), err
    assert out.startswith("ed25519:"), out
    code, heavy, out, err = probe(
        "views",
        "build",
        str(provider),
        "auth",
        "--out",
        str(tmp_path / "out"),
        "--key",
        str(key),
        "--json",
        env=env,
        heavy=http,
    )
    assert (code, heavy) == (0, []), err
    assert (Path(json.loads(out)["out"]) / "package").is_file()


def test_doctor_and_config_init_ask_git_instead_of_loading_gitpython(
    team: Team, tmp_path: Path
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = tmp_path / "made.yaml"
    code, heavy, _, err = probe(
        "--config",
        str(config),
        "config",
        "init",
        "--root",
        f"bob={team.bob.path}",
        env=env,
        heavy=GITPYTHON,
    )
    assert (code, heavy) == (0, []), err
    assert f"path: {team.bob.path}" in config.read_text()
    code, heavy, out, err = probe(
        "--config", str(config), "doctor", "--json", env=env, heavy=GITPYTHON
    )
    assert (code, heavy) == (0, []), err + out
    checks = {c["name"]: c["status"] for c in json.loads(out)["checks"]}
    assert checks["roots.bob"] == "ok", out


def test_sync_now_through_a_daemon_reads_its_answer_without_the_models(
    team: Team, tmp_path: Path
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    # No cycle of the daemon's own may take the push first (then this sync-now would say
    # `current`): not its timer (on a loaded machine the test can outlast a 60 s poll), nor
    # its first cycle, which may still be running when it is ready: waited for first.
    config = write_config(tmp_path, {"bob": {"path": team.bob.path, "interval": "1h"}})
    with launcher(tmp_path) as launch:
        daemon = launch(config, env=env)
        wait_for(
            lambda: call(daemon.socket, "GET", "/v1/status")["roots"][0]["status"] == "current",
            30,
            "the daemon's first cycle",
        )
        for turn, flags in enumerate(((), ("--json",))):
            commit(team.alice.path, {"MEMORY_daemon.md": f"# Daemon\n\nturn {turn}\n"}, "d")
            push(team.alice.path)
            code, heavy, started, out, err = probe_counting(
                "--config", str(config), "sync-now", *flags, env=env, heavy=WIRE
            )
            assert (code, heavy, started) == (0, [], 0), err  # no git here: the daemon ran it
            if flags:
                [result] = SyncReport.model_validate_json(out).results
                assert (result.root, result.status) == ("bob", "synced"), out
            else:
                assert out.split()[:2] == ["bob", "synced"], out
        assert daemon.proc.poll() is None
    assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")


@contextlib.contextmanager
def listed_daemon(
    team: Team, tmp_path: Path, roots: dict[str, dict[str, object]] | None = None
) -> Iterator[tuple[Daemon, Callable[[], list[str]]]]:
    """A daemon (bob's root unless `roots`) after its first cycle, and its module list."""
    env, dump = listing_env(tmp_path)
    config = write_config(tmp_path, roots or {"bob": {"path": team.bob.path}})
    with launcher(tmp_path) as launch:
        daemon = launch(config, env=env)
        wait_for(
            lambda: call(daemon.socket, "GET", "/v1/status")["roots"][0]["status"] == "current",
            30,
            "the daemon's first cycle",
        )
        yield daemon, lambda: module_list(daemon.proc.pid, dump)


def daemon_modules(team: Team, tmp_path: Path) -> list[str]:
    """The modules of a daemon with bob's root after its first cycle."""
    with listed_daemon(team, tmp_path) as (_, modules):
        return modules()


def test_a_daemon_without_http_listen_keeps_no_metrics(team: Team, tmp_path: Path) -> None:
    # Nobody can scrape them: no prometheus_client (nor the git `memsync_build_info` asks).
    modules = daemon_modules(team, tmp_path)
    assert "memsync.daemon.app" in modules
    assert [m for m in modules if m.split(".")[0] == "prometheus_client"] == []
    assert "memsync.daemon.pausegauge" not in modules


def test_a_daemon_loads_no_click(team: Team, tmp_path: Path) -> None:
    # `memsync --config PATH run`, as systemd and the tests start it, is a plain form
    # (`cli.plain`): no click, no command group, no command module (issue 18).
    modules = daemon_modules(team, tmp_path)
    assert "memsync.cli.daemonrun" in modules
    assert [m for m in modules if m.split(".")[0] == "click"] == []
    assert "memsync.cli.group" not in modules
    assert "memsync.cli.run" not in modules and "memsync.cli.kit" not in modules


def test_a_daemon_whose_roots_do_not_watch_loads_no_watchdog_until_one_does(
    team: Team, tmp_path: Path
) -> None:
    watching = ("watchdog", "memsync.daemon.watch")
    with listed_daemon(team, tmp_path) as (daemon, modules):
        assert "memsync.daemon.app" in modules()
        assert [m for m in modules() if m.split(".")[0] in watching] == [], modules()
        assert [m for m in modules() if m.startswith(watching)] == []
        # A reload that turns `watch` on starts the watches then: a local commit is pushed
        # long before the 60 s schedule would.
        text = daemon.config.read_text()
        daemon.config.write_text(text.replace("watch: false", "watch: true"))
        os.kill(daemon.proc.pid, signal.SIGHUP)
        wait_for(lambda: "configuration reloaded" in daemon.log.read_text(), 30, "the reload")
        assert {"watchdog", "memsync.daemon.watch"} <= set(modules())
        commit(team.bob.path, {"MEMORY_watch.md": "# Watch\n\nheard\n"}, "watched")
        head = git(team.bob.path, "rev-parse", "HEAD")
        wait_for(lambda: git(team.upstream, "rev-parse", "main") == head, 30, "the push")
        assert daemon.proc.poll() is None


def test_a_hub_loads_the_manifest_models_and_cryptography_with_its_first_revision(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A hub with no revision yet (every hub a test starts, a new one in production) checks
    # no manifest and no signature, and writes its answers as plain JSON (wire.hubanswers):
    # pydantic, the models and cryptography load with the first upload.
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    data = tmp_path / "hub"
    assert probe("hub", "init", str(data), env=env)[0] == 0
    listing, dump = listing_env(tmp_path)
    monkeypatch.setenv("PYTHONPATH", listing["PYTHONPATH"])
    monkeypatch.setenv("MEMSYNC_TEST_MODULES", str(dump))
    with hub_process(data) as served:
        modules = module_list(served.proc.pid, dump)
    assert "memsync.hub.app" in modules
    later = ("cryptography", "pydantic", "pydantic_core", "memsync.views.manifest")
    assert [m for m in modules if m.split(".")[0] in later or m in later] == []
    assert "memsync.views.keys" not in modules
    assert "memsync.wire.cli" not in modules  # the CLI's models: a hub prints none of them


def site_env(tmp_path: Path, site: str, **extra: str) -> dict[str, str]:
    """The environment of a memsync process that runs `site` as its `sitecustomize`."""
    where = tmp_path / "site"
    where.mkdir(exist_ok=True)
    (where / "sitecustomize.py").write_text(site)
    paths = [str(where), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {"PYTHONPATH": os.pathsep.join(paths), "XDG_CACHE_HOME": str(tmp_path / "cache")} | extra


# Every process the daemon starts, as the `subprocess.Popen` audit event names it.
EXECS_SITE = """
import os, sys

def _hook(event, args):
    if event == "subprocess.Popen":
        with open(os.environ["MEMSYNC_TEST_EXECS"], "a") as out:
            out.write(" ".join(map(str, args[1])) + "\\n")

sys.addaudithook(_hook)
"""


def test_a_daemons_first_start_checks_its_config_in_a_fork_not_a_new_interpreter(
    team: Team, tmp_path: Path
) -> None:
    # No settings memo yet: the schema runs in a child, which is a fork of the daemon (it
    # has the interpreter and the daemon's modules already), not `python -m ...configcheck`.
    execs = tmp_path / "execs.txt"
    env = site_env(tmp_path, EXECS_SITE, MEMSYNC_TEST_EXECS=str(execs))
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    with launcher(tmp_path) as launch:
        daemon = launch(config, env=env, memo=False)
        wait_for(
            lambda: call(daemon.socket, "GET", "/v1/status")["roots"][0]["status"] == "current",
            30,
            "the daemon's first cycle",
        )
    started = execs.read_text().splitlines()
    assert any(line.startswith("git ") for line in started), started  # the hook sees them
    assert [line for line in started if "configcheck" in line] == []
    assert len(list((tmp_path / "cache" / "memsync" / "settings").iterdir())) == 1  # its memo


# The size of the permanent generation when the exit's last handler runs (registered first).
FROZEN_SITE = """
import atexit, gc, os

def _at_exit():
    with open(os.environ["MEMSYNC_TEST_FROZEN"], "a") as out:
        out.write(f"{gc.get_freeze_count()}\\n")

atexit.register(_at_exit)
"""


def test_a_command_leaves_what_it_loaded_frozen_to_the_exit(team: Team, tmp_path: Path) -> None:
    # The interpreter's exit collects garbage while it unloads the modules: walking every
    # object a command loaded costs ~50 ms (a fifth of a daemon's short life, of `doctor`).
    # A command frozen before it exits leaves the collector only what the exit itself frees.
    frozen = tmp_path / "frozen.txt"
    env = site_env(tmp_path, FROZEN_SITE, MEMSYNC_TEST_FROZEN=str(frozen))
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    with launcher(tmp_path) as launch:
        daemon = launch(config, env=env)
        daemon.proc.send_signal(signal.SIGTERM)
        assert daemon.proc.wait(timeout=30) == 0
    done = memsync("--config", str(config), "doctor", "--json", env=env)
    assert done.returncode == 0, done.stderr + done.stdout
    counts = [int(n) for n in frozen.read_text().split()]
    assert len(counts) == 2 and min(counts) > 10_000, counts


# Notes each trust store a TLS context of the process loads (the CA bundle's file or dir).
TRUST_SITE = """
import os, ssl

def _noting(name):
    original = getattr(ssl.SSLContext, name)

    def noted(self, *args, **kwargs):
        with open(os.environ["MEMSYNC_TEST_TRUST"], "a") as out:
            out.write(name + "\\n")
        return original(self, *args, **kwargs)

    setattr(ssl.SSLContext, name, noted)

for _name in ("set_default_verify_paths", "load_verify_locations"):
    _noting(_name)
"""


def noting_trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the processes started from now on note each trust store they load."""
    site = tmp_path / "trust-site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(TRUST_SITE)
    noted = tmp_path / "trust.txt"
    paths = [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(paths))
    monkeypatch.setenv("MEMSYNC_TEST_TRUST", str(noted))
    return noted


def test_a_hub_loads_no_ca_bundle_for_a_client_it_never_is(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # aiohttp builds its client's default TLS contexts when imported, each reading the CA
    # bundle (a third of a hub's imports); a hub only serves: it loads no trust store.
    noted = noting_trust(tmp_path, monkeypatch)
    data = tmp_path / "hub"
    hub_init(data)
    with hub_process(data) as served:
        assert served.healthy()
    assert served.proc.returncode == 0, served.log()
    assert not noted.exists(), noted.read_text()
    # (the note works: the same process loads one as soon as it builds a client context)
    code = "import ssl; ssl.create_default_context()"
    subprocess.run([sys.executable, "-c", code], check=True)
    assert noted.read_text().split() == ["set_default_verify_paths"]


def test_a_view_client_loads_no_ca_bundle_before_its_first_https_request(
    provider: Path,  # noqa: F811 - the fixture
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # aiohttp's default contexts are never used: the HTTP box verifies https with its own,
    # built on the first https request (test_http_tls), so a command that makes none loads
    # no trust store.
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    key = tmp_path / "view.key"
    code, _, public, err = probe("keys", "generate", "--out", str(key), env=env, heavy=())
    assert code == 0, err
    build = ("views", "build", str(provider), "auth", "--out", str(tmp_path / "out"))
    code, _, out, err = probe(*build, "--key", str(key), "--json", env=env, heavy=())
    assert code == 0, err
    noted = noting_trust(tmp_path, monkeypatch)
    verify = ("views", "verify", json.loads(out)["out"], "--key", public.strip(), "--json")
    code, heavy, out, err = probe(*verify, env=env, heavy=("aiohttp",))
    assert (code, "aiohttp.connector" in heavy) == (0, True), err + out  # (its contexts')
    assert json.loads(out)["valid"] is True, out
    assert not noted.exists(), noted.read_text()


def test_a_pull_over_http_loads_no_git_box(scene: Scene) -> None:  # noqa: F811 - the fixture
    # The git box (transports.git, views.gitsource) is a Git share's: a hub's view needs none.
    assert scene.publish().revision == 1
    pull = ("--config", str(scene.config), "views", "pull", "--json")
    git_box = ("memsync.transports.git", "memsync.views.gitsource")
    code, heavy, out, err = probe(*pull, env=scene.env, heavy=git_box)
    assert (code, heavy) == (0, []), err
    assert json.loads(out)["results"][0]["status"] == "pulled", out


def test_a_pull_of_git_shares_loads_no_http_client(team: Team, tmp_path: Path) -> None:
    # The HTTP box (aiohttp, yarl) is a view over HTTP's: views from Git shares need none,
    # in `views pull` as in a daemon (issue 18). Here the share is not there: the pull ends
    # `unavailable` after its git fetch fails, as it would over HTTP.
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(
        tmp_path,
        {"bob": {"path": team.bob.path}},
        "views:\n  notes:\n    root: bob\n    view_id: notes\n"
        f"    source: {{kind: git, url: {tmp_path / 'no-share.git'}, path: shares/notes}}\n"
        "    trust: {allow_unsigned: true}\n",
    )
    http = ("aiohttp", "yarl", "multidict", "memsync.transports.http", "memsync.views.httpsource")
    code, heavy, out, err = probe(
        "--config", str(config), "views", "pull", "--json", env=env, heavy=http
    )
    assert (code, heavy) == (1, []), err + out
    [result] = json.loads(out)["results"]
    assert (result["view"], result["status"]) == ("notes", "unavailable"), out
