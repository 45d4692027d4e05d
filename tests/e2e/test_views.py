"""Shared views end to end through the CLI: keys, a real hub process, publish, pull, tamper."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memsync.config.load import load_config
from memsync.config.model import settings_from
from memsync.hub.tokens import hub_init, open_store
from memsync.roots.create import init_root
from memsync.roots.faults import VIEW_POINTS
from memsync.views.archive import ArchiveLimits
from memsync.views.build import build_static
from memsync.views.keys import generate_key, load_private_key
from memsync.views.verify import verify_view
from memsync.wire import (
    KeyReport,
    StatusReport,
    ViewBuildReport,
    ViewPublishReport,
    ViewsPullReport,
    ViewVerifyReport,
)
from tests.conftest import copy_built
from tests.e2e.hubs import running_hub, static_site
from tests.helpers import GIT_ENV, commit, git

MEMORY = """\
# User Context

# Auth Systems {#auth}

How our services authenticate.

- `login` uses short-lived tokens → []
- `refresh` rotates refresh tokens → [dep:login]

# Private {#private}

- `secret-plan` never share this → []
"""

RECIPE = """\
version = 1
view_id = "auth"
kind = "file"
title = "Auth"
approved = true
intent = "How our services authenticate"
render = "extractive"
include_headings = ["auth"]
include_nodes = []
include_files = []
exclude_ids = []
"""


def memsync(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "memsync", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV, **(env or {})},
        timeout=120,
        check=False,
    )


@dataclass(frozen=True)
class Built:
    """The view scene's files, built once per session (per xdist worker) and copied per test.

    `path` holds the provider root `alice` (sharing `auth`), the hub data dir `hub` with an
    admin, a publish:auth and a read:auth token, the signing key `view.key`, and bob's root.
    No file in it that memsync reads names its own location (the hub's audit log only
    records where `hub init` ran), so a copy works wherever it lands.
    """

    path: Path
    admin: str
    public: str
    tokens: dict[str, str]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Made by the code `memsync init`, `hub init`, `hub token create` and `keys generate`
    run (their commands have their own tests): six set-up processes less per worker."""
    base = tmp_path_factory.mktemp("view-scene")
    root = base / "alice"
    init_root(root)
    commit(
        root,
        {
            "MEMORY.md": MEMORY,
            "shared_views/auth/view.md": "# Auth\n\nHow we auth.\n",
            "shared_views/auth/recipe.toml": RECIPE,
        },
        "share auth",
    )
    data = base / "hub"
    admin = hub_init(data)
    public = generate_key(base / "view.key")
    init_root(base / "bob")
    tokens = {"PUB": token(data, "publish:auth"), "READ": token(data, "read:auth")}
    return Built(base, admin, public, tokens)


@pytest.fixture
def copied(built: Built, tmp_path: Path) -> Built:
    """A private copy of the built scene: no test sees another's publishes or pulls."""
    dest = tmp_path / "scene"
    dest.mkdir()
    copy_built(built.path, dest, ("alice", "hub", "view.key", "bob"))
    return replace(built, path=dest)


@pytest.fixture
def provider(copied: Built) -> Path:
    return copied.path / "alice"


@pytest.fixture
def hub(copied: Built) -> Iterator[tuple[str, Path, str]]:
    data, admin = copied.path / "hub", copied.admin
    with running_hub(data) as (url, log):
        yield url, data, admin
    assert not any(admin in line for line in log)  # never a token in the hub's logs


def token(data: Path, scope: str) -> str:
    store = open_store(data)
    try:
        return store.create([scope])[1]
    finally:
        store.close()


def imported(root: Path) -> Path:
    return root / ".runtime" / "shared_views" / "imports" / "team-auth" / "dist" / "MEMORY.md"


def test_build_is_deterministic_and_verifies(provider: Path, tmp_path: Path) -> None:
    made = memsync("keys", "generate", "--out", str(tmp_path / "view.key"), "--json")
    assert made.returncode == 0, made.stderr
    public = KeyReport.model_validate_json(made.stdout).public_key
    packages = []
    for out in ("out1", "out2"):
        built = memsync(
            "views",
            "build",
            str(provider),
            "auth",
            "--out",
            str(tmp_path / out),
            "--key",
            str(tmp_path / "view.key"),
            "--json",
        )
        assert built.returncode == 0, built.stderr
        report = ViewBuildReport.model_validate_json(built.stdout)
        packages.append((Path(report.out) / "package").read_bytes())
    assert packages[0] == packages[1]
    checked = memsync(
        "views",
        "verify",
        str(tmp_path / "out1" / "v1" / "views" / "auth"),
        "--key",
        public,
        "--json",
    )
    assert checked.returncode == 0, checked.stdout
    verify = ViewVerifyReport.model_validate_json(checked.stdout)
    assert verify.valid and verify.revision == 1 and verify.items == 3
    wrong = memsync(
        "views",
        "verify",
        str(tmp_path / "out1" / "v1" / "views" / "auth"),
        "--key",
        "ed25519:" + "A" * 42 + "E",
        "--json",
    )
    assert wrong.returncode == 1
    assert "untrusted-key" in {
        p.code for p in ViewVerifyReport.model_validate_json(wrong.stdout).problems
    }
    text = (tmp_path / "out1" / "v1" / "views" / "auth" / "package").read_bytes()
    assert b"secret-plan" not in text
    # The command only parses and renders (issue 20, item 6): `views.verify.verify_view` in
    # process is what it printed, field for field, for the good key and the wrong one.
    for key, printed in ((public, checked.stdout), ("ed25519:" + "A" * 42 + "E", wrong.stdout)):
        check = verify_view(
            str(tmp_path / "out1" / "v1" / "views" / "auth"),
            keys=(key,),
            threshold=1,
            view_id=None,
            heading=None,
            allow_unsigned=False,
            limits=ArchiveLimits(),
        )
        shown = ViewVerifyReport.model_validate_json(printed)
        assert (check.valid, check.source, check.view_id, check.revision, check.expires) == (
            shown.valid,
            shown.source,
            shown.view_id,
            shown.revision,
            shown.expires,
        )
        assert (check.files, check.items, list(check.signed_by)) == (
            shown.files,
            shown.items,
            shown.signed_by,
        )
        assert [(p.code, p.path, p.line, p.message) for p in check.problems] == [
            (p.code, p.path, p.line, p.message) for p in shown.problems
        ]


@dataclass
class Scene:
    """A provider publishing `auth` to a real hub, and bob importing it as `team-auth`."""

    provider: Path
    hub_url: str
    hub_data: Path
    key: Path
    env: dict[str, str]
    bob: Path
    config: Path

    def publish(self) -> ViewPublishReport:
        done = memsync(
            "views",
            "publish",
            "auth",
            "--root",
            str(self.provider),
            "--hub",
            self.hub_url,
            "--token",
            "env:PUB",
            "--key",
            str(self.key),
            "--json",
            env=self.env,
        )
        assert done.returncode == 0, done.stderr + done.stdout
        return ViewPublishReport.model_validate_json(done.stdout)

    def publish_here(self) -> int:
        """What `publish` runs, in this process (set-up only): the revision published."""
        from memsync.views.publish import publish_view  # noqa: PLC0415 - views load when used

        key = load_private_key(self.key)
        done = asyncio.run(
            publish_view(self.provider, "auth", self.hub_url, self.env["PUB"], [key])
        )
        assert done.status == "published", done
        return done.revision

    def pull_here(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """What `pull` runs without a daemon, in this process (set-up only)."""
        from memsync.views.pull import pull_views  # noqa: PLC0415 - views load when used

        monkeypatch.setenv("READ", self.env["READ"])
        settings = settings_from(load_config(self.config), self.config)
        settings.state_dir.mkdir(parents=True, exist_ok=True)
        [result] = asyncio.run(pull_views(settings.views, settings.state_dir))
        assert result.status == "pulled", result

    def pull(self, **env: str) -> tuple[int, ViewsPullReport | None]:
        done = memsync(
            "--config", str(self.config), "views", "pull", "--json", env={**self.env, **env}
        )
        report = ViewsPullReport.model_validate_json(done.stdout) if done.stdout else None
        return done.returncode, report


@pytest.fixture
def scene(copied: Built, provider: Path, hub: tuple[str, Path, str], tmp_path: Path) -> Scene:
    url, data, _admin = hub
    bob = copied.path / "bob"
    config = tmp_path / "config.yaml"
    config.write_text(
        f"version: 1\nstate_dir: {tmp_path / 'state'}\n"
        f"roots:\n  bob:\n    path: {bob}\n    sync: {{enabled: false}}\n"
        f"views:\n  team-auth:\n    root: bob\n    view_id: auth\n"
        f"    source: {{kind: http, url: {url}/v1/views/auth, token: {{env: READ}}}}\n"
        f'    trust: {{keys: ["{copied.public}"]}}\n'
    )
    key = copied.path / "view.key"
    return Scene(provider, url, data, key, dict(copied.tokens), bob, config)


def test_publish_pull_and_tamper(scene: Scene) -> None:
    first = scene.publish()
    assert (first.status, first.revision) == ("published", 1)
    assert scene.publish().status == "unchanged"

    code, report = scene.pull()
    assert code == 0 and report and report.results[0].status == "pulled", report
    assert "login" in imported(scene.bob).read_text()
    assert "secret-plan" not in imported(scene.bob).read_text()
    code, report = scene.pull()
    assert code == 0 and report and report.results[0].status == "current"

    commit(scene.provider, {"MEMORY.md": MEMORY.replace("short-lived", "5-minute")}, "shorter")
    assert scene.publish().revision == 2
    [package] = scene.hub_data.glob("views/auth/revisions/2/package")
    tampered = bytearray(package.read_bytes())
    tampered[len(tampered) // 2] ^= 0xFF  # tampered at rest on the hub
    package.write_bytes(bytes(tampered))
    before = imported(scene.bob).read_bytes()
    code, report = scene.pull()
    assert report is not None
    result = report.results[0]
    assert code == 1 and result.status == "stale", result
    assert {p.code for p in result.problems} & {"hash-mismatch", "length-mismatch"}
    assert imported(scene.bob).read_bytes() == before  # the old import keeps serving

    status = memsync("--config", str(scene.config), "status", "--json", env=scene.env)
    views = StatusReport.model_validate_json(status.stdout).views
    assert [(v.view, v.status, v.revision) for v in views] == [("team-auth", "stale", 1)]
    assert scene.env["READ"] not in status.stdout
    assert git(scene.bob, "status", "--porcelain") == ""


@pytest.mark.slow
@pytest.mark.parametrize("point", VIEW_POINTS)
def test_consumer_killed_during_promotion_recovers(
    scene: Scene, point: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Set-up in this process, by the code the commands run (test_publish_pull_and_tamper
    # runs them): bob holds revision 1 and the hub serves revision 2; the killed pull and
    # the one after it are the commands'.
    assert scene.publish_here() == 1
    scene.pull_here(monkeypatch)
    old = imported(scene.bob).read_text()
    new = old.replace("short-lived", "5-minute")
    commit(scene.provider, {"MEMORY.md": MEMORY.replace("short-lived", "5-minute")}, "shorter")
    assert scene.publish_here() == 2
    code, _ = scene.pull(MEMSYNC_FAULT=point)
    # With RENAME_EXCHANGE there is no moment between two renames: that point never comes.
    assert code == -9 or point == "view-between-renames", code
    if point != "view-between-renames":
        assert imported(scene.bob).read_text() in (old, new)
    code, report = scene.pull()
    assert code == 0 and report is not None, report
    assert report.results[0].revision == 2
    assert imported(scene.bob).read_text() == new
    assert list((scene.bob / ".runtime" / "shared_views").glob("candidates/*")) == []
    # unchanged files were linked from the old import: no second name survives the crash
    files = [p for p in imported(scene.bob).parents[1].rglob("*") if not p.is_dir()]
    assert files and all(p.lstat().st_nlink == 1 and p.is_file() for p in files), files


def build(root: Path, out: Path, key: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return memsync(
        "views", "build", str(root), "auth", "--out", str(out), "--key", str(key), "--json", *extra
    )


def test_build_takes_the_next_revision_from_out(
    copied: Built, provider: Path, tmp_path: Path
) -> None:
    """A content change signs the revision after OUT's (a consumer that trusted the first
    takes it: no `rollback`, no `equivocation`); unchanged content builds nothing; an
    explicit --revision must be above OUT's."""
    out, key, bob = tmp_path / "out", copied.path / "view.key", copied.path / "bob"
    first = ViewBuildReport.model_validate_json(build(provider, out, key).stdout)
    assert (first.status, first.revision) == ("built", 1)
    manifest = out / "v1" / "views" / "auth" / "manifest"
    written = manifest.read_bytes()
    with static_site(out) as url:
        config = tmp_path / "config.yaml"
        config.write_text(
            f"version: 1\nstate_dir: {tmp_path / 'state'}\n"
            f"roots:\n  bob:\n    path: {bob}\n    sync: {{enabled: false}}\n"
            f"views:\n  team-auth:\n    root: bob\n    view_id: auth\n"
            f"    source: {{kind: http, url: {url}/v1/views/auth}}\n"
            f'    trust: {{keys: ["{copied.public}"]}}\n'
        )

        def pull() -> tuple[str, int | None, list[str]]:
            done = memsync("--config", str(config), "views", "pull", "--json")
            [result] = ViewsPullReport.model_validate_json(done.stdout).results
            return result.status, result.revision, [p.code for p in result.problems]

        assert pull() == ("pulled", 1, [])
        again = build(provider, out, key)
        assert again.returncode == 0, again.stderr
        unchanged = ViewBuildReport.model_validate_json(again.stdout)
        assert (unchanged.status, unchanged.revision) == ("unchanged", 1)
        assert manifest.read_bytes() == written  # nothing built, nothing rewritten
        text = memsync("views", "build", str(provider), "auth", "--out", str(out))
        assert "unchanged" in text.stdout and "revision 1" in text.stdout, text

        commit(provider, {"MEMORY.md": MEMORY.replace("short-lived", "5-minute")}, "shorter")
        second = ViewBuildReport.model_validate_json(build(provider, out, key).stdout)
        assert (second.status, second.revision) == ("built", 2)
        assert pull() == ("pulled", 2, [])
        assert "5-minute" in imported(bob).read_text()

        lower = build(provider, out, key, "--revision", "2")
        assert lower.returncode == 2, lower.stdout
        assert "existing revision 2" in lower.stdout + lower.stderr
        forced = ViewBuildReport.model_validate_json(
            build(provider, out, key, "--revision", "7").stdout
        )
        assert (forced.status, forced.revision) == ("built", 7)
        assert pull() == ("pulled", 7, [])


def test_build_static_is_what_the_command_writes_and_prints(
    copied: Built, provider: Path, tmp_path: Path
) -> None:
    """`views build` only parses and renders (issue 20, item 6): `build_static` in process
    writes the package the command writes and decides the revision it reports."""
    key = copied.path / "view.key"
    printed = ViewBuildReport.model_validate_json(build(provider, tmp_path / "cli", key).stdout)
    ours = tmp_path / "ours"
    for status, revision in (("built", 1), ("unchanged", 1)):
        done = build_static(
            provider,
            "auth",
            ours,
            keys=[load_private_key(key)],
            expires=timedelta(days=30),
            limits=ArchiveLimits(),
            now=datetime.now(UTC),
        )
        assert (done.decided.unchanged, done.decided.revision) == (status == "unchanged", revision)
        assert done.target == ours / "v1" / "views" / "auth"
        assert (done.built.sha256, sorted(done.built.files)) == (
            printed.package_sha256,
            printed.files,
        )
    assert (ours / "v1" / "views" / "auth" / "package").read_bytes() == (
        Path(printed.out) / "package"
    ).read_bytes()


def test_build_refuses_an_out_holding_something_else(provider: Path, tmp_path: Path) -> None:
    target = tmp_path / "out" / "v1" / "views" / "auth"
    target.mkdir(parents=True)
    (target / "manifest").write_text("<html>not ours</html>\n")
    done = memsync("views", "build", str(provider), "auth", "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert "is not a memsync view manifest" in done.stderr
    assert (target / "manifest").read_text() == "<html>not ours</html>\n"  # untouched


def big_memory(size: int) -> str:
    """MEMORY with an `auth` section of about `size` bytes that does not compress much
    (a real 2 MiB file, not a zip bomb)."""
    lines = [
        f"Token note {hashlib.sha256(str(i).encode()).hexdigest()}.\n"
        for i in range(size // 78 + 1)
    ]
    return MEMORY.replace("How our services authenticate.\n", "".join(lines))


def test_a_file_over_the_per_file_cap_is_refused_with_its_problem_everywhere(
    copied: Built, provider: Path, tmp_path: Path
) -> None:
    """A 2 MiB file: the builder refuses it by name (JSON and text) unless its cap is
    raised; a consumer refuses it as `too-large` naming the file (JSON and text) until
    `views.<name>.max_file_size` allows it, then imports it."""
    commit(provider, {"MEMORY.md": big_memory(2 * 1024 * 1024)}, "a big auth section")
    out, key, bob = tmp_path / "out", copied.path / "view.key", copied.path / "bob"
    refused = build(provider, out, key)
    assert refused.returncode == 1, refused.stderr
    error = json.loads(refused.stdout)["error"]
    assert error["code"] == "refused"
    assert [(p["code"], p["location"]) for p in error["problems"]] == [
        ("too-large", "dist/MEMORY.md")
    ]
    assert "too-large" in refused.stderr and "dist/MEMORY.md" in refused.stderr
    assert not out.exists()

    done = build(provider, out, key, "--max-file-size", "4MiB")
    assert done.returncode == 0, done.stderr
    verified = memsync(
        "views", "verify", str(out / "v1" / "views" / "auth"), "--key", copied.public, "--json"
    )
    report = ViewVerifyReport.model_validate_json(verified.stdout)
    assert not report.valid
    assert [(p.code, p.path) for p in report.problems] == [("too-large", "dist/MEMORY.md")]

    with static_site(out) as url:
        config = tmp_path / "config.yaml"
        view = (
            f"version: 1\nstate_dir: {tmp_path / 'state'}\n"
            f"roots:\n  bob:\n    path: {bob}\n    sync: {{enabled: false}}\n"
            f"views:\n  team-auth:\n    root: bob\n    view_id: auth\n"
            f"    source: {{kind: http, url: {url}/v1/views/auth}}\n"
            f'    trust: {{keys: ["{copied.public}"]}}\n'
        )
        config.write_text(view)
        pulled = memsync("--config", str(config), "views", "pull", "--json")
        assert pulled.returncode == 1, pulled.stderr
        [result] = ViewsPullReport.model_validate_json(pulled.stdout).results
        assert result.status == "unavailable", result
        assert [(p.code, p.path) for p in result.problems] == [("too-large", "dist/MEMORY.md")]
        text = memsync("--config", str(config), "views", "pull")
        assert text.returncode == 1
        assert "too-large" in text.stdout and "dist/MEMORY.md" in text.stdout, text.stdout

        config.write_text(view + "    max_file_size: 4MiB\n")
        pulled = memsync("--config", str(config), "views", "pull", "--json")
        assert pulled.returncode == 0, pulled.stdout + pulled.stderr
        [result] = ViewsPullReport.model_validate_json(pulled.stdout).results
        assert (result.status, result.revision, result.problems) == ("pulled", 1, [])
        assert imported(bob).stat().st_size > 1024 * 1024  # over the default cap
