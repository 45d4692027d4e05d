"""Nothing a root's own Git config or attributes name is ever run, on any git call memsync
makes: status, fetch, staging, merges (and the merge commits memsync creates), publication
and push. Each mechanism gets a program that would leave a marker file; a sync through
the real git box must leave none, and the root must still sync correctly.
"""

from __future__ import annotations

import http.server
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.errors import UnsafeRepoConfig
from memsync.transports.git import Git
from memsync.transports.repoconfig import repo_config_problems
from tests.conftest import Team
from tests.helpers import commit, git

BASE = "# Memory\n\n" + "".join(f"line {n}\n" for n in range(1, 21))


@pytest.fixture
def marker(tmp_path: Path) -> Path:
    return tmp_path / "ran"


def program(tmp_path: Path, marker: Path, name: str, body: str = "cat") -> str:
    """An executable that records that it ran, then does `body` (default: copy stdin)."""
    path = tmp_path / "bin" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{marker}"\n{body}\n')
    path.chmod(0o755)
    return str(path)


def ran(marker: Path) -> str:
    return marker.read_text() if marker.exists() else ""


def attributes(root: Path, text: str) -> None:
    info = root / ".git" / "info"
    info.mkdir(exist_ok=True)
    (info / "attributes").write_text(text)


def diverge(team: Team) -> None:
    """Alice pushes one edit, Bob commits another to the same file far from it."""
    commit(team.alice.path, {"MEMORY_x.md": BASE})
    assert team.alice.sync().status == "pushed"
    assert team.bob.sync().status == "synced"
    commit(team.alice.path, {"MEMORY_x.md": BASE.replace("line 2\n", "line two\n")})
    assert team.alice.sync().status == "pushed"
    commit(team.bob.path, {"MEMORY_x.md": BASE.replace("line 19\n", "line nineteen\n")})


def test_filters_never_run_on_status_staging_merge_or_publication(
    team: Team, tmp_path: Path, marker: Path
) -> None:
    diverge(team)  # plain git first: it may run what follows
    bob = team.bob.path
    for kind in ("clean", "smudge"):
        git(bob, "config", f"filter.evil.{kind}", program(tmp_path, marker, kind))
    git(bob, "config", "filter.evil.required", "true")
    attributes(bob, "* filter=evil\n")
    (bob / ".gitattributes").write_text("*.md filter=evil\n")  # untracked, local
    result = team.bob.sync()
    assert result.status == "pushed", result.message
    assert ran(marker) == ""
    merged = (bob / "MEMORY_x.md").read_text()
    assert "line two\n" in merged and "line nineteen\n" in merged


def test_a_process_filter_never_runs(team: Team, tmp_path: Path, marker: Path) -> None:
    diverge(team)  # plain git first: it may run what follows
    git(team.bob.path, "config", "filter.evil.process", program(tmp_path, marker, "process"))
    git(team.bob.path, "config", "filter.evil.required", "true")
    attributes(team.bob.path, "*.md filter=evil\n")
    assert team.bob.sync().status == "pushed"
    assert ran(marker) == ""


def test_a_merge_driver_never_decides_the_merged_bytes(
    team: Team, tmp_path: Path, marker: Path
) -> None:
    diverge(team)  # plain git first: it may run what follows
    bob = team.bob.path
    driver = program(tmp_path, marker, "merge", 'echo EVIL > "$1"; exit 0')
    git(bob, "config", "merge.evil.driver", f"{driver} %A %O %B")
    git(bob, "config", "merge.default", "evil")
    attributes(bob, "*.md merge=evil\n")
    result = team.bob.sync()
    assert result.status == "pushed", result.message
    assert ran(marker) == ""
    upstream = git(team.upstream, "show", "main:MEMORY_x.md")
    assert "EVIL" not in upstream
    assert "line two" in upstream and "line nineteen" in upstream


def test_diff_drivers_and_external_diff_never_run(team: Team, tmp_path: Path, marker: Path) -> None:
    diverge(team)  # plain git first: it may run what follows
    bob = team.bob.path
    git(bob, "config", "diff.evil.textconv", program(tmp_path, marker, "textconv"))
    git(bob, "config", "diff.evil.command", program(tmp_path, marker, "command"))
    git(bob, "config", "diff.external", program(tmp_path, marker, "external"))
    attributes(bob, "* diff=evil\n")
    assert team.bob.sync().status == "pushed"
    assert ran(marker) == ""


def test_signing_programs_never_run_on_merge_commits(
    team: Team, tmp_path: Path, marker: Path
) -> None:
    diverge(team)  # plain git first: it may run what follows
    bob = team.bob.path
    git(bob, "config", "commit.gpgSign", "true")
    git(bob, "config", "gpg.program", program(tmp_path, marker, "gpg", "exit 1"))
    git(bob, "config", "gpg.format", "openpgp")
    assert team.bob.sync().status == "pushed"
    assert ran(marker) == ""


def test_fsmonitor_and_editor_programs_never_run(team: Team, tmp_path: Path, marker: Path) -> None:
    diverge(team)  # plain git first: it may run what follows
    bob = team.bob.path
    git(bob, "config", "core.fsmonitor", program(tmp_path, marker, "fsmonitor"))
    git(bob, "config", "core.editor", program(tmp_path, marker, "editor"))
    git(bob, "config", "sequence.editor", program(tmp_path, marker, "sequence"))
    git(bob, "config", "core.pager", program(tmp_path, marker, "pager"))
    assert team.bob.sync().status == "pushed"
    assert ran(marker) == ""


def test_upload_and_receive_pack_programs_refuse_the_root(
    team: Team, tmp_path: Path, marker: Path
) -> None:
    diverge(team)  # plain git first: it may run what follows
    bob = team.bob.path
    git(bob, "config", "remote.origin.uploadpack", program(tmp_path, marker, "upload"))
    git(bob, "config", "remote.origin.receivepack", program(tmp_path, marker, "receive"))
    result = team.bob.sync()
    assert result.status == "error", result.message
    shown = "\n".join(p.message for p in result.problems)
    assert "remote.origin.uploadpack" in shown and "remote.origin.receivepack" in shown
    assert str(tmp_path / "bin") not in shown  # the key, never its value
    assert ran(marker) == ""


@pytest.mark.parametrize(
    "key", ["include.path", "includeIf.gitdir:/.path", "includeIf.gitdir:/nowhere/.path"]
)
def test_an_included_config_refuses_the_root(
    team: Team, tmp_path: Path, marker: Path, key: str
) -> None:
    """What an included file says may change between memsync's read and git's (and an
    `includeIf` may match in one directory and not another): no include is allowed."""
    diverge(team)  # plain git first: it may run what follows
    bob = team.bob.path
    extra = tmp_path / "extra.config"
    clean = program(tmp_path, marker, "clean")
    extra.write_text(f'[filter "inc"]\n\tclean = {clean}\n\tsmudge = {clean}\n')
    git(bob, "config", key, str(extra))
    attributes(bob, "* filter=inc\n")
    result = team.bob.sync()
    assert result.status == "error", result.message
    assert key.lower() in result.message.lower()
    assert f"git -C {bob} config --unset-all" in result.message
    assert ran(marker) == ""
    reported = repo_config_problems(bob)
    assert any(key.lower() in p.message.lower() for p in reported)
    git(bob, "config", "--unset-all", key)  # the fix the message gives
    assert team.bob.sync().status == "pushed"
    assert ran(marker) == ""


def test_a_config_change_between_cycles_is_seen(team: Team, tmp_path: Path, marker: Path) -> None:
    """The box caches what it read of the config; a new driver must still be defused."""
    bob = team.bob.path
    diverge(team)
    assert team.bob.sync().status == "pushed"
    git(bob, "config", "filter.late.smudge", program(tmp_path, marker, "late"))
    attributes(bob, "* filter=late\n")
    commit(team.alice.path, {"MEMORY_y.md": "# Y\n"})
    assert team.alice.sync().status == "pushed"
    assert team.bob.sync().status == "synced"
    assert ran(marker) == ""


# -- transports -------------------------------------------------------------------------------


def test_remote_vcs_helpers_never_run(
    team: Team, tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    helper = program(tmp_path, marker, "git-remote-evil", "exit 1")
    monkeypatch.setenv("PATH", f"{Path(helper).parent}:{Path.cwd()}:/usr/bin:/bin")
    git(team.bob.path, "config", "remote.origin.vcs", "evil")
    result = team.bob.sync()
    assert result.status in ("offline", "error")
    assert ran(marker) == ""


@pytest.mark.parametrize(
    "url", ["evil::/nowhere", "ext::sh -c touch% {marker}", "fd::3"], ids=["helper", "ext", "fd"]
)
def test_remote_helper_urls_never_run(
    team: Team, tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch, url: str
) -> None:
    helper = program(tmp_path, marker, "git-remote-evil", "exit 1")
    monkeypatch.setenv("PATH", f"{Path(helper).parent}:/usr/bin:/bin")
    bob = team.bob.path
    git(bob, "config", "protocol.allow", "always")
    git(bob, "config", "protocol.ext.allow", "always")
    git(bob, "config", "url.x::.insteadOf", "nothing")  # a rewrite rule of its own
    git(bob, "config", "remote.origin.url", url.format(marker=marker))
    result = team.bob.sync()
    assert result.status in ("offline", "error", "unconfigured")
    assert ran(marker) == ""


def test_insteadof_rewrites_to_a_helper_never_run(
    team: Team, tmp_path: Path, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    helper = program(tmp_path, marker, "git-remote-evil", "exit 1")
    monkeypatch.setenv("PATH", f"{Path(helper).parent}:/usr/bin:/bin")
    git(team.bob.path, "config", f"url.evil::{team.upstream}.insteadOf", str(team.upstream))
    assert team.bob.sync().status in ("offline", "error")
    assert ran(marker) == ""


def test_git_proxy_never_runs(team: Team, tmp_path: Path, marker: Path) -> None:
    bob = team.bob.path
    git(bob, "config", "core.gitProxy", program(tmp_path, marker, "proxy", "exit 1"))
    git(bob, "config", "remote.origin.url", "git://127.0.0.1:9/team.git")
    result = team.bob.sync()
    assert result.status == "offline", result.message
    assert ran(marker) == ""


def test_ssh_command_from_the_root_never_runs(team: Team, tmp_path: Path, marker: Path) -> None:
    bob = team.bob.path
    git(bob, "config", "core.sshCommand", program(tmp_path, marker, "ssh", "exit 1"))
    git(bob, "config", "remote.origin.url", "ssh://nobody@127.0.0.1:9/team.git")
    result = team.bob.sync()
    assert result.status == "offline", result.message
    assert ran(marker) == ""


class _AskForPassword(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(401)
        self.send_header("WWW-Authenticate", 'Basic realm="x"')
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def asks_for_password() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _AskForPassword)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/team.git"
    finally:
        server.shutdown()
        server.server_close()


def test_credential_helpers_never_run(
    team: Team, tmp_path: Path, marker: Path, asks_for_password: str
) -> None:
    bob = team.bob.path
    helper = program(tmp_path, marker, "credential", "exit 0")
    git(bob, "config", "credential.helper", helper)
    git(bob, "config", "credential.http://127.0.0.1.helper", helper)
    git(bob, "config", "core.askPass", helper)
    git(bob, "config", "remote.origin.url", asks_for_password)
    result = team.bob.sync()
    assert result.status == "auth-failed", result.message  # asked; nobody answered
    assert ran(marker) == ""


# -- reporting --------------------------------------------------------------------------------


def test_program_config_is_reported_without_values(team: Team, tmp_path: Path) -> None:
    bob = team.bob.path
    secret = "hunter2-in-a-helper"
    git(bob, "config", "credential.helper", f"!echo password={secret}")
    git(bob, "config", "filter.evil.smudge", "cat")
    git(bob, "config", "core.gitProxy", "proxy-program")
    attributes(bob, "# a comment\n*.md filter=evil merge=union\n* merge=mine diff=python\n")
    problems = repo_config_problems(bob)
    assert {p.code for p in problems} == {"unsafe-repo-config"}
    text = "\n".join(f"{p.path}:{p.line}: {p.message}" for p in problems)
    assert secret not in text
    assert "credential.helper" in text and "filter.evil.smudge" in text
    assert "core.gitproxy" in text.lower()
    assert ".git/info/attributes:2: 'filter=evil'" in text
    assert ".git/info/attributes:3: 'merge=mine'" in text
    assert "merge=union" not in text and "diff=python" not in text


def test_a_plain_root_reports_nothing(team: Team) -> None:
    assert repo_config_problems(team.bob.path) == ()


# -- refusal ------------------------------------------------------------------------------------


def test_a_refused_root_runs_no_git_but_the_config_read(
    team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused root's cycle stops before any git but `git config --list` runs; the
    verdict names every key and the way to remove it."""
    bob = team.bob.path
    git(bob, "config", "core.alternateRefsCommand", "touch /never")
    git(bob, "config", "color.ui", "always")
    log = tmp_path / "calls"
    wrapper = tmp_path / "wrap" / "git"
    wrapper.parent.mkdir()
    real = git(bob, "--exec-path").strip() + "/git"
    wrapper.write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {log}\nexec {real} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{wrapper.parent}:/usr/bin:/bin")
    result = team.bob.sync()
    assert result.status == "error", result.message
    assert "core.alternaterefscommand" in result.message and "touch" not in result.message
    assert [p.code for p in result.problems] == ["unsafe-repo-config"] * 2
    assert "color.ui" in result.problems[1].message
    calls = log.read_text().splitlines()
    assert calls and all(" config --list " in f" {call} " for call in calls), calls


@pytest.mark.parametrize(
    ("name", "fix"),
    [
        ("objects/info/alternates", "repack -a -d"),
        ("objects/info/http-alternates", "repack -a -d"),
        ("info/grafts", "rm --"),
    ],
)
def test_an_alternate_object_store_refuses_the_root_until_it_is_gone(
    team: Team, name: str, fix: str
) -> None:
    bob = team.bob.path
    commit(team.alice.path, {"MEMORY_y.md": "# Y\n"})
    assert team.alice.sync().status == "pushed"
    assert team.bob.sync().status == "synced"  # the guard's reading is cached now
    store = bob / ".git" / name
    store.write_text(f"{team.alice.path / '.git' / 'objects'}\n")
    result = team.bob.sync()
    assert result.status == "error", result.message
    assert name in result.message and fix in result.message
    assert any(name in p.message for p in repo_config_problems(bob))
    store.unlink()
    assert team.bob.sync().status == "current"
    assert repo_config_problems(bob) == ()


def test_a_repository_memsync_made_may_borrow_objects_it_chose(team: Team) -> None:
    """`trusted_alternates` is for repositories memsync makes itself (never a root's)."""
    bob = team.bob.path
    store = bob / ".git" / "objects" / "info" / "alternates"
    store.write_text(f"{team.alice.path / '.git' / 'objects'}\n")
    with pytest.raises(UnsafeRepoConfig, match="objects/info/alternates"):
        Git(bob).run("status")
    assert Git(bob, trusted_alternates=True).at(bob).run("status").returncode == 0
    git(bob, "config", "core.worktree", str(team.alice.path))
    with pytest.raises(UnsafeRepoConfig, match=r"core\.worktree"):  # only alternates are waived
        Git(bob, trusted_alternates=True).run("status")


def test_a_config_git_cannot_read_refuses_the_root(team: Team) -> None:
    """Fail closed: what git cannot read, memsync cannot judge."""
    bob = team.bob.path
    config = bob / ".git" / "config"
    good = config.read_bytes()
    config.write_bytes(good + b"[broken\n")
    result = team.bob.sync()
    assert result.status == "error", result.message
    assert "git cannot read it" in result.message and "until it is fixed" in result.message
    config.write_bytes(good)
    assert team.bob.sync().status == "current"


def test_a_relative_path_entry_never_runs_a_program_in_the_root(
    team: Team, marker: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """git runs in the root's work tree: an empty or relative PATH entry (a user's `.` or a
    stray `::`) would find a `git` or an `ssh` there. The box keeps absolute entries only."""
    root = team.bob.path
    for name in ("git", "ssh"):
        fake = root / name
        fake.write_text(f'#!/bin/sh\necho "{name} $*" >> "{marker}"\nexit 1\n')
        fake.chmod(0o755)
    (root / ".git" / "info").mkdir(exist_ok=True)
    (root / ".git" / "info" / "exclude").write_text("/git\n/ssh\n")
    monkeypatch.setenv("PATH", os.pathsep.join(["", ".", "bin", os.environ["PATH"]]))
    commit(team.alice.path, {"MEMORY_x.md": BASE})
    assert team.alice.sync().status == "pushed"
    result = team.bob.sync()
    assert result.status == "synced", result.message
    assert (root / "MEMORY_x.md").read_text() == BASE
    assert ran(marker) == ""
