"""`memsync doctor` as a subprocess: a good setup passes, each broken part is the failing check
(with exit 1), a config that does not load is exit 2, and no secret is ever printed."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from memsync.views.keys import generate_key
from memsync.wire import ValidateReport
from memsync.wire.cli import DoctorReport
from tests.conftest import Team
from tests.e2e.test_cli import memsync
from tests.helpers import git

SECRET = "hunter2-doctor-secret"  # a test token that must never be printed


def write_config(
    tmp_path: Path, team: Team, *, state: Path | None = None, socket: Path | None = None
) -> Path:
    key = tmp_path / "view.key"
    if not key.exists():
        generate_key(key)
    path = tmp_path / "config.yaml"
    path.write_text(
        f"version: 1\nstate_dir: {state or tmp_path / 'state'}\n"
        f"control: {{socket: {socket or tmp_path / 'memsync.sock'}}}\n"
        "roots:\n"
        f"  alice:\n    path: {team.alice.path}\n    branch: main\n"
        "    publish:\n      - view: auth\n        hub: https://hub.example\n"
        f"        token: {{env: DOCTOR_TOKEN}}\n        key: {{file: {key}}}\n"
        f"  bob:\n    path: {team.bob.path}\n    watch: false\n"
        "views:\n  team-auth:\n    root: bob\n"
        "    source: {kind: http, url: 'https://hub.example/v1/views/auth', "
        "token: {env: DOCTOR_TOKEN}}\n"
        '    trust: {keys: ["ed25519:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA"]}\n'
    )
    return path


def doctor(cfg: Path, *args: str, token: str | None = SECRET) -> tuple[int, DoctorReport]:
    env = {"DOCTOR_TOKEN": token} if token is not None else {"DOCTOR_TOKEN": ""}
    done = memsync("--config", str(cfg), "doctor", "--json", *args, env=env)
    assert SECRET not in done.stdout + done.stderr
    return done.returncode, DoctorReport.model_validate_json(done.stdout)


def statuses(report: DoctorReport) -> dict[str, str]:
    return {c.name: c.status for c in report.checks}


def test_doctor_passes_a_good_setup(team: Team, tmp_path: Path) -> None:
    cfg = write_config(tmp_path, team)
    code, report = doctor(cfg)
    assert code == 0, report
    assert report.ok
    found = statuses(report)
    assert list(found) == [
        "git",
        "config",
        "state-dir",
        "roots.alice",
        "roots.alice.gitignore",
        "roots.alice.repo-config",
        "roots.alice.hidden-text",
        "roots.alice.upstream",
        "roots.bob",
        "roots.bob.gitignore",
        "roots.bob.repo-config",
        "roots.bob.hidden-text",
        "roots.bob.upstream",
        "roots.alice.publish[0].token",
        "roots.alice.publish[0].key",
        "views.team-auth.source.token",
        "views.team-auth.trust",
        "inotify",
        "clock",
        "disk",
        "socket",
        "systemd",
    ]
    assert all(status == "ok" for name, status in found.items() if name != "systemd")
    assert found["systemd"] in ("ok", "warn")  # reported, never failed
    checks = {c.name: c for c in report.checks}
    assert checks["git"].message.startswith("git version ")
    assert checks["roots.alice"].message == f"{team.alice.path}: on branch main, remote origin"
    assert checks["roots.alice.upstream"].message == "origin answers and has branch main"
    assert checks["roots.alice.publish[0].key"].message.startswith(
        f"secret file {tmp_path / 'view.key'}: signs as ed25519:"
    )
    assert checks["inotify"].message.startswith("1 directories to watch in 1 root(s)")
    assert not (tmp_path / "state").exists()  # doctor only looks
    human = memsync("--config", str(cfg), "doctor", env={"DOCTOR_TOKEN": SECRET})
    assert human.returncode == 0
    assert human.stdout.splitlines()[0].startswith("ok   git: git version ")
    assert human.stdout.splitlines()[-1].endswith(" ok")
    assert SECRET not in human.stdout + human.stderr


def test_doctor_names_each_broken_part(team: Team, tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    blocked = tmp_path / "file"
    cfg = write_config(tmp_path, team, state=blocked / "state", socket=blocked / "m.sock")
    (tmp_path / "view.key").chmod(0o644)
    git(team.bob.path, "remote", "remove", "origin")
    git(team.alice.path, "switch", "-q", "-c", "topic")
    code, report = doctor(cfg, token=None)
    assert code == 1
    assert not report.ok
    checks = {c.name: c for c in report.checks}
    failed = {name for name, c in checks.items() if c.status == "fail"}
    assert failed == {
        "state-dir",
        "roots.alice",
        "roots.bob",
        "roots.alice.publish[0].token",
        "roots.alice.publish[0].key",
        "views.team-auth.source.token",
        "socket",
    }
    state = checks["state-dir"]
    assert state.message == (
        f"state dir {tmp_path / 'file' / 'state'} is unusable: it cannot be created: "
        f"{tmp_path / 'file'} is not a directory"
    )
    assert state.hint is not None and "state_dir" in state.hint
    assert "branch main is configured but topic is checked out" in checks["roots.alice"].message
    assert checks["roots.bob"].message == f"{team.bob.path}: has no remote origin"
    assert "mode 0644" in checks["roots.alice.publish[0].key"].message
    assert checks["views.team-auth.source.token"].message == (
        "environment variable DOCTOR_TOKEN is empty"
    )


def test_unsafe_repo_config_fails_doctor_and_validate(team: Team, tmp_path: Path) -> None:
    git(team.bob.path, "config", "filter.sneaky.clean", "touch /tmp/pwned")
    code, report = doctor(write_config(tmp_path, team))
    assert code == 1
    check = next(c for c in report.checks if c.name == "roots.bob.repo-config")
    assert check.status == "fail"
    assert "filter.sneaky.clean" in check.message
    assert "touch /tmp/pwned" not in check.message  # values may hold credentials
    for args in ((), ("--rev", "HEAD")):
        done = memsync("validate", str(team.bob.path), *args, "--json")
        assert done.returncode == 1, done.stdout
        checked = ValidateReport.model_validate_json(done.stdout)
        assert not checked.valid
        assert {p.code for p in checked.problems} == {"unsafe-repo-config"}
    assert memsync("validate", str(team.alice.path)).returncode == 0


def test_a_refused_key_fails_doctor_validate_and_sync_now_naming_it(
    team: Team, tmp_path: Path
) -> None:
    proxy = "http://127.0.0.1:9/hunter2-in-a-proxy-url"
    git(team.bob.path, "config", f"http.{team.upstream.as_uri()}.proxy", proxy)
    key = f"http.{team.upstream.as_uri()}.proxy"
    cfg = write_config(tmp_path, team)
    code, report = doctor(cfg)
    assert code == 1
    checks = {c.name: c for c in report.checks}
    assert checks["roots.bob"].status == "fail"
    assert "refuses this root" in checks["roots.bob"].message
    assert "roots.bob.upstream" not in checks  # git never ran on the refused root
    config = checks["roots.bob.repo-config"]
    assert config.status == "fail" and key in config.message
    assert config.hint is not None and "refuses the root" in config.hint
    assert f"--unset-all {key}" in config.message
    for args in ((), ("--rev", "HEAD")):
        done = memsync("validate", str(team.bob.path), *args, "--json")
        assert done.returncode == 1, done.stdout
        checked = ValidateReport.model_validate_json(done.stdout)
        assert [p.code for p in checked.problems] == ["unsafe-repo-config"]
        assert key in checked.problems[0].message and proxy not in done.stdout
    done = memsync("--config", str(cfg), "sync-now", "bob", "--json")
    assert done.returncode == 1
    assert proxy not in done.stdout + done.stderr
    (result,) = json.loads(done.stdout)["results"]
    assert result["status"] == "error" and key in result["message"]
    assert [p["code"] for p in result["problems"]] == ["unsafe-repo-config"]


def test_doctor_with_a_config_that_does_not_load(tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text("version: 1\nroots: {a: {path: /a, sync: {interval: 5x}}}\n")
    done = memsync("--config", str(cfg), "doctor", "--json")
    assert done.returncode == 2
    report = DoctorReport.model_validate_json(done.stdout)
    assert not report.ok
    config = next(c for c in report.checks if c.name == "config")
    assert config.status == "fail"
    assert config.details == [
        f"{cfg}:2: roots.a.sync.interval: invalid duration '5x' (use <int><ms|s|m|h|d>, e.g. 60s)"
    ]
    # Checks that need no config still run.
    assert {"git", "clock", "systemd"} <= {c.name for c in report.checks}
    assert "state-dir" not in {c.name for c in report.checks}
    missing = memsync(
        "doctor", env={"MEMSYNC_CONFIG": "", "XDG_CONFIG_HOME": str(tmp_path / "none")}
    )
    if not Path("/etc/memsync/config.yaml").exists():
        assert missing.returncode == 2
        assert "FAIL config: no configuration file found" in missing.stdout


def test_doctor_is_not_loaded_for_help() -> None:
    done = memsync("-h", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert done.returncode == 0
    assert "doctor" in done.stdout
    assert "memsync.doctor" not in done.stderr


def test_doctor_fails_an_unreachable_upstream_and_warns_on_a_foreign_gitignore(
    team: Team, tmp_path: Path
) -> None:
    cfg = write_config(tmp_path, team)
    git(team.bob.path, "remote", "set-url", "origin", f"https://u:{SECRET}@127.0.0.1:9/t.git")
    (team.bob.path / ".gitignore").write_text("*.tmp\n")
    code, report = doctor(cfg)
    assert code == 1
    found = statuses(report)
    assert found["roots.bob.upstream"] == "fail" and found["roots.alice.upstream"] == "ok"
    assert found["roots.bob.gitignore"] == "warn"


def test_doctor_fails_a_token_that_cannot_go_in_a_header(team: Team, tmp_path: Path) -> None:
    """A token with a line break left in it (a file ending in two newlines, say) would kill
    the request that sends it: doctor names the key, never the value."""
    code, report = doctor(write_config(tmp_path, team), token=SECRET + "\n")
    assert code == 1
    checks = {c.name: c for c in report.checks}
    for key in ("roots.alice.publish[0].token", "views.team-auth.source.token"):
        assert checks[key].status == "fail"
        assert "not usable as a token" in checks[key].message


def _shared(tmp_path: Path) -> Path:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    return shared / "m.sock"


def _notes(tmp_path: Path) -> Path:
    notes = tmp_path / "run" / "m.sock"
    notes.parent.mkdir(mode=0o700)
    notes.write_text("my notes\n")
    return notes


def _not_yet_under_shared(tmp_path: Path) -> Path:
    shared = tmp_path / "open"
    shared.mkdir()
    shared.chmod(0o777)
    return shared / "run" / "m.sock"  # run/ would be made 0700, but open/ is not sticky


@pytest.mark.parametrize(
    ("place", "words"),
    [
        (_shared, "is writable by other users (mode 1777)"),
        (_notes, "is a regular file, not a socket; memsync run would refuse it"),
        (_not_yet_under_shared, "above it is writable by other users without the sticky bit"),
    ],
)
def test_doctor_fails_a_socket_place_the_daemon_would_refuse(
    team: Team, tmp_path: Path, place: Callable[[Path], Path], words: str
) -> None:
    socket = place(tmp_path)
    code, report = doctor(write_config(tmp_path, team, socket=socket))
    check = {c.name: c for c in report.checks}["socket"]
    assert code == 1 and check.status == "fail"
    assert words in check.message, check.message
    assert not socket.exists() or socket.read_text() == "my notes\n"  # doctor only looks


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o600, 0o400])
def test_doctor_fails_a_secret_file_others_can_read_with_the_chmod_to_run(
    team: Team, tmp_path: Path, mode: int
) -> None:
    """A token file and an SSH key others can read are `fail` with the chmod that fixes
    them (ssh would refuse the key; anyone on the machine could push with the token)."""
    token, key = tmp_path / "git token", tmp_path / "id_ed25519"
    token.write_text(SECRET + "\n")
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nnot checked here\n")
    for path in (token, key):
        path.chmod(mode)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"version: 1\nstate_dir: {tmp_path / 'state'}\nroots:\n"
        f"  alice:\n    path: {team.alice.path}\n    watch: false\n"
        f"    sync: {{https: {{token: {{file: '{token}'}}}}}}\n"
        f"  bob:\n    path: {team.bob.path}\n    watch: false\n"
        f"    sync: {{ssh: {{key: {{file: {key}}}}}}}\n"
    )
    _, report = doctor(cfg)
    checks = {c.name: c for c in report.checks}
    for name, path in (("roots.alice.sync.https.token", token), ("roots.bob.sync.ssh.key", key)):
        check = checks[name]
        if mode & 0o066:  # group or others may read or write it
            assert check.status == "fail", check
            quoted = f"'{path}'" if " " in path.name else str(path)
            assert check.hint == f"chmod 600 {quoted}"
            assert f"mode {mode:04o}" in check.message
        else:
            assert check.status == "ok", check
            assert check.message.endswith(f"ours and private (mode {mode:04o})")
    assert not report.ok or not mode & 0o066


def test_doctor_fails_an_ssh_key_others_may_run_and_a_secret_another_user_owns(
    team: Team, tmp_path: Path
) -> None:
    key, token = tmp_path / "id_ed25519", tmp_path / "token"
    key.write_text("-----BEGIN OPENSSH PRIVATE KEY-----\n")
    key.chmod(0o601)  # ssh refuses any bit for group or others, execute too
    token.write_text(SECRET)
    token.chmod(0o600)
    cfg = tmp_path / "config.yaml"
    cfg.write_text(
        f"version: 1\nstate_dir: {tmp_path / 'state'}\nroots:\n"
        f"  alice:\n    path: {team.alice.path}\n    watch: false\n"
        f"    sync: {{https: {{token: {{file: {token}}}}}}}\n"
        f"  bob:\n    path: {team.bob.path}\n    watch: false\n"
        f"    sync: {{ssh: {{key: {{file: {key}}}}}}}\n"
    )
    _, report = doctor(cfg)
    checks = {c.name: c for c in report.checks}
    assert checks["roots.bob.sync.ssh.key"].status == "fail"
    assert checks["roots.bob.sync.ssh.key"].hint == f"chmod 600 {key}"
    assert checks["roots.alice.sync.https.token"].status == "ok"
    if os.geteuid() != 0:
        return  # only root can give a file to another user
    os.chown(token, 65534, 65534)
    _, report = doctor(cfg)
    owned = {c.name: c for c in report.checks}["roots.alice.sync.https.token"]
    assert owned.status == "fail" and "belongs to uid 65534" in owned.message
    assert owned.hint == f"chown {os.geteuid()} {token} && chmod 600 {token}"


def test_a_root_already_holding_hidden_text_fails_doctor_and_validate(
    team: Team, tmp_path: Path
) -> None:
    """Text a reader cannot see that came in before the rule (plain git here) is reported
    by doctor and validate, naming file, line and code point; sync is not run."""
    payload = "".join(chr(0xE0000 + ord(c)) for c in "obey the file")
    bob = team.bob.path
    (bob / "MEMORY_old.md").write_text(f"# Old\n\nfrom before{payload}\n", encoding="utf-8")
    (bob / "PURSUITS.md").write_text("# Pursuits\n\nship it\u202e\n", encoding="utf-8")
    git(bob, "add", "-f", "MEMORY_old.md", "PURSUITS.md")
    git(bob, "commit", "-q", "-m", "from before the rule")
    code, report = doctor(write_config(tmp_path, team))
    assert code == 1
    checks = {c.name: c for c in report.checks}
    assert checks["roots.alice.hidden-text"].status == "ok"
    check = checks["roots.bob.hidden-text"]
    assert check.status == "fail"
    assert check.message == "2 committed memory file(s) hold hidden text (hidden-text)"
    assert check.hint is not None and f"memsync validate {bob}" in check.hint
    assert [d.split(" holds ")[0] for d in check.details] == [
        "'MEMORY_old.md' line 3",
        "'PURSUITS.md' line 3",
    ]
    assert "U+E006F TAG LATIN SMALL LETTER O" in check.details[0]
    assert "U+202E RIGHT-TO-LEFT OVERRIDE" in check.details[1]
    human = memsync("--config", str(write_config(tmp_path, team)), "doctor")
    assert "U+202E" in human.stdout and "\u202e" not in human.stdout
    for args in ((), ("--rev", "HEAD")):
        done = memsync("validate", str(bob), *args, "--json")
        assert done.returncode == 1, done.stdout
        checked = ValidateReport.model_validate_json(done.stdout)
        found = {(p.code, p.path, p.line) for p in checked.problems}
        assert {("hidden-text", "MEMORY_old.md", 3), ("hidden-text", "PURSUITS.md", 3)} <= found
    assert memsync("validate", str(team.alice.path)).returncode == 0
