"""`memsync config init` as a new user runs it: in a fresh HOME (HOME and XDG_* set for the
subprocess) with real roots and a real bare upstream, the written config passes `memsync
doctor`; an existing file is never replaced without --force, a symbolic link never, and a
path that is not a memory root is refused before anything is written."""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from memsync.wire.cli import DoctorReport
from tests.conftest import Team
from tests.e2e.test_cli import memsync
from tests.helpers import git

# What no test environment can pass: no systemd user manager here (doctor reports it, as a
# warning, and never fails it).
UNAVOIDABLE_WARNINGS = {"systemd"}


@dataclass(frozen=True)
class Home:
    home: Path
    env: dict[str, str]

    @property
    def config(self) -> Path:
        return self.home / ".config" / "memsync" / "config.yaml"


@pytest.fixture
def fresh(tmp_path: Path) -> Home:
    home, run = tmp_path / "home", tmp_path / "run"
    home.mkdir()
    run.mkdir(mode=0o700)
    env = {
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_RUNTIME_DIR": str(run),
        "MEMSYNC_CONFIG": "",
    }
    return Home(home, env)


def _doctor(fresh: Home) -> tuple[int, DoctorReport]:
    done = memsync("doctor", "--json", env=fresh.env)
    return done.returncode, DoctorReport.model_validate_json(done.stdout)


def _passes(code: int, report: DoctorReport) -> None:
    assert code == 0, report
    bad = {c.name: c.message for c in report.checks if c.status != "ok"}
    assert set(bad) <= UNAVOIDABLE_WARNINGS, bad
    assert all(c.status != "fail" for c in report.checks)


def test_the_config_it_finds_and_writes_passes_doctor(team: Team, fresh: Home) -> None:
    root = fresh.home / ".rightmemory"
    joined = memsync("init", str(root), "--upstream", str(team.upstream), env=fresh.env)
    assert joined.returncode == 0, joined.stderr
    missing = memsync("status", env=fresh.env)  # the no-config hint names the starter
    assert missing.returncode == 2
    assert "memsync config init" in missing.stderr
    nothing = memsync("doctor", env=fresh.env)
    assert nothing.returncode == 2
    assert "write one with `memsync config init`" in nothing.stdout

    done = memsync("config", "init", "--json", env=fresh.env)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result == {
        "path": str(fresh.config),
        "replaced": False,
        "roots": [{"root": "personal", "path": str(root), "remote": "origin", "sync": True}],
    }
    assert stat.S_IMODE(fresh.config.stat().st_mode) == 0o600
    assert stat.S_IMODE(fresh.config.parent.stat().st_mode) == 0o700
    text = fresh.config.read_text()
    assert f"socket: {fresh.env['XDG_RUNTIME_DIR']}/memsync.sock" in text
    assert f"state_dir: {fresh.home}/.local/state/memsync" in text

    code, report = _doctor(fresh)
    _passes(code, report)
    names = [c.name for c in report.checks]
    assert "roots.personal.upstream" in names  # the upstream was reached, not skipped
    assert not (fresh.home / ".local" / "state").exists()  # neither command made state

    synced = memsync("sync-now", "--json", env=fresh.env)  # and it works, not only checks
    assert synced.returncode == 0, synced.stdout + synced.stderr


def test_given_roots_with_and_without_a_remote(team: Team, fresh: Home, tmp_path: Path) -> None:
    lone = tmp_path / "lone"
    made = memsync("init", str(lone), env=fresh.env)  # no upstream: no remote at all
    assert made.returncode == 0, made.stderr
    git(team.bob.path, "remote", "rename", "origin", "team")  # the only remote, not origin
    done = memsync(
        "config",
        "init",
        "--root",
        f"work={team.alice.path}",
        "--root",
        f"side={team.bob.path}",
        "--root",
        f"lone={lone}",
        env=fresh.env,
    )
    assert done.returncode == 0, done.stderr
    assert "roots.lone: sync is off" in done.stderr
    text = fresh.config.read_text()
    assert "remote: team" in text
    assert f"git -C {lone} remote add origin URL" in text
    code, report = _doctor(fresh)
    _passes(code, report)
    checks = {c.name: c.message for c in report.checks}
    assert checks["roots.lone"] == f"{lone}: on branch main (sync is off)"
    assert checks["roots.side.upstream"] == "team answers and has branch main"


def test_never_replaces_without_force(team: Team, fresh: Home) -> None:
    args = ("config", "init", "--root", f"work={team.alice.path}")
    fresh.config.parent.mkdir(parents=True)
    fresh.config.write_text("# mine\n")
    refused = memsync(*args, env=fresh.env)
    assert refused.returncode == 2
    assert "already exists" in refused.stderr and "--force" in refused.stderr
    assert fresh.config.read_text() == "# mine\n"
    assert list(fresh.config.parent.iterdir()) == [fresh.config]  # no temp file left

    forced = memsync(*args, "--force", "--json", env=fresh.env)
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["replaced"] is True
    assert "work:" in fresh.config.read_text()
    assert stat.S_IMODE(fresh.config.stat().st_mode) == 0o600
    _passes(*_doctor(fresh))


@pytest.mark.parametrize("dangling", [False, True])
def test_never_writes_through_or_replaces_a_symlink(
    team: Team, fresh: Home, tmp_path: Path, dangling: bool
) -> None:
    elsewhere = tmp_path / "elsewhere.yaml"
    if not dangling:
        elsewhere.write_text("# someone else's file\n")
    fresh.config.parent.mkdir(parents=True)
    fresh.config.symlink_to(elsewhere)
    for extra in ((), ("--force",)):
        done = memsync("config", "init", "--root", f"work={team.alice.path}", *extra, env=fresh.env)
        assert done.returncode == 2, done.stdout
        assert "symbolic link" in done.stderr
        assert fresh.config.is_symlink()
        assert os.readlink(fresh.config) == str(elsewhere)
        if dangling:
            assert not elsewhere.exists()
        else:
            assert elsewhere.read_text() == "# someone else's file\n"


def test_an_out_path_in_a_directory_others_may_write_is_refused(
    team: Team, fresh: Home, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    out = shared / "config.yaml"
    done = memsync("config", "init", "--root", f"w={team.alice.path}", "--out", str(out))
    assert done.returncode == 2
    assert "writable by other users" in done.stderr
    assert not out.exists()
    mine = tmp_path / "made" / "deeper" / "memsync.yaml"  # created: 0700
    done = memsync("config", "init", "--root", f"w={team.alice.path}", "--out", str(mine))
    assert done.returncode == 0, done.stderr
    assert stat.S_IMODE(mine.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(mine.stat().st_mode) == 0o600


def test_what_is_not_a_memory_root_is_refused_and_nothing_written(
    team: Team, fresh: Home, tmp_path: Path
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    bare_repo = tmp_path / "repo"
    bare_repo.mkdir()
    git(bare_repo, "init", "-q")
    (bare_repo / "README.md").write_text("not memory\n")
    linked = tmp_path / "linked"
    linked.mkdir()
    git(linked, "init", "-q")
    (linked / "MEMORY.md").symlink_to(team.alice.path / "MEMORY.md")
    inner = team.alice.path / "inner"  # inside a root, not its top level
    inner.mkdir()
    (inner / "MEMORY.md").write_text("# not a root\n")
    cases = {
        str(tmp_path / "absent"): "does not exist",
        str(plain): "not the top level of a Git work tree",
        str(inner): "not the top level of a Git work tree",
        str(bare_repo): "no MEMORY.md",
        str(linked): "no MEMORY.md",
    }
    for path, why in cases.items():
        done = memsync("config", "init", "--root", f"x={path}", env=fresh.env)
        assert done.returncode == 2, (path, done.stdout)
        assert why in done.stderr, (path, done.stderr)
        assert not fresh.config.exists()
    for bad in ("noequals", "=/x", "bad name=/x", "-x=/x", "x="):
        done = memsync("config", "init", "--root", bad, env=fresh.env)
        assert done.returncode == 2, bad
        assert "--root" in done.stderr, bad
    nothing = memsync("config", "init", env=fresh.env)  # no ~/.rightmemory here
    assert nothing.returncode == 2
    assert "--root NAME=PATH" in nothing.stderr
    assert not fresh.config.exists()


def test_start_config_is_what_the_command_writes_and_prints(
    team: Team, fresh: Home, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`config init` and `config validate` only parse and render (issue 20, item 6):
    `starter.start_config` and `filecheck.check_config_file` in process write and report
    what the commands write and print, in the same environment."""
    from memsync.config.filecheck import check_config_file  # noqa: PLC0415
    from memsync.config.starter import start_config  # noqa: PLC0415

    option = f"alice={team.alice.path}"
    cli_out, ours = tmp_path / "cli.yaml", tmp_path / "ours.yaml"
    done = memsync(
        "config", "init", "--root", option, "--out", str(cli_out), "--json", env=fresh.env
    )
    assert done.returncode == 0, done.stderr
    for name, value in fresh.env.items():
        monkeypatch.setenv(name, value)
    started = start_config([option], out=ours, config_path=None, force=False, environ=os.environ)
    assert ours.read_bytes() == cli_out.read_bytes()
    printed = json.loads(done.stdout)
    assert printed["roots"] == [
        {"root": r.name, "path": str(r.path), "remote": r.remote, "sync": bool(r.remote)}
        for r in started.roots
    ]
    assert (started.path, started.replaced) == (ours, False)
    checked = memsync("config", "validate", str(ours), "--json", env=fresh.env)
    assert checked.returncode == 0, checked.stderr
    report = json.loads(checked.stdout)
    found = check_config_file(ours)
    assert (report["roots"], report["views"], report["warnings"]) == (
        len(found.settings.roots),
        len(found.settings.views),
        list(found.warnings),
    )
