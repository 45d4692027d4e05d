"""The git box against the real git binary: clean environment, no hooks, timeouts."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsync.errors import GitTimeout
from memsync.roots.layout import RootLayout
from memsync.roots.lock import RootLock
from memsync.transports.git import Git, redact
from tests.conftest import Team
from tests.helpers import commit, git, wait_for


def test_redact_hides_userinfo_everywhere() -> None:
    text = "fatal: unable to access 'https://bob:t0ken@host/x.git/' and ssh://u@h/y"
    shown = redact(text)
    assert "t0ken" not in shown and "bob" not in shown and "u@h" not in shown
    assert "https://***@host/x.git/" in shown


def test_inherited_git_environment_is_ignored(team: Team, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GIT_DIR", str(team.upstream))
    monkeypatch.setenv("GIT_WORK_TREE", "/")
    head = git(team.bob.path, "rev-parse", "HEAD")
    assert Git(team.bob.path).rev_parse("HEAD") == head


def test_hooks_never_run(team: Team) -> None:
    marker = team.bob.path.parent / "hook-ran"
    hooks = team.bob.path / ".git" / "hooks"
    for name in (
        "pre-merge-commit",
        "post-merge",
        "pre-commit",
        "commit-msg",
        "post-commit",
        "post-checkout",
        "reference-transaction",
        "pre-push",
    ):
        (hooks / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
        (hooks / name).chmod(0o755)
    git(team.bob.path, "config", "core.hooksPath", str(hooks))
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    commit(team.bob.path, {"MEMORY_b.md": "# B\n"}, "bob")  # plain git: may run hooks
    marker.unlink(missing_ok=True)
    assert team.bob.sync().status == "pushed"  # a merge commit, a ref transaction, a push
    assert not marker.exists(), marker.read_text()


def test_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", str(repo))
    started = time.monotonic()
    with pytest.raises(GitTimeout):
        Git(repo, timeout=0.5).run("fetch", "--upload-pack=sleep 31.4159 #", str(repo))
    assert time.monotonic() - started < 10

    def gone() -> bool:
        found = subprocess.run(["pgrep", "-f", "sleep 31.4159"], capture_output=True, check=False)
        return found.returncode == 1

    wait_for(gone, what="the timed-out git child to be killed")


def test_non_ascii_names_sync_and_count_as_dirty(team: Team) -> None:
    name = "MEMORY_日本 notes é.md"
    commit(team.alice.path, {name: "# 日本\n"})
    assert team.alice.sync().status == "pushed"
    result = team.bob.sync()
    assert result.status == "synced" and result.files == (name,)
    assert (team.bob.path / name).read_text() == "# 日本\n"
    (team.bob.path / name).write_text("# edited\n")
    dirty = team.bob.sync()
    assert dirty.status == "dirty" and dirty.files == (name,)


def test_root_lock_excludes_another_process(team: Team) -> None:
    layout = RootLayout.for_root(team.bob.state_dir, "bob")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pathlib import Path; from memsync.roots.lock import RootLock\n"
            f"lock = RootLock(Path({str(layout.lock_file)!r}), wait=5); lock.acquire()\n"
            "print('held', flush=True); sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=os.environ,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        busy = team.bob.sync(wait=0)
        assert busy.status == "busy"
        assert str(holder.pid) in busy.message
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=10)
    assert team.bob.sync(wait=5).status == "current"
    with RootLock(layout.lock_file, wait=0):
        pass  # the kernel released the dead holder's lock


def test_a_killed_lock_holder_leaves_no_lock(team: Team) -> None:
    layout = RootLayout.for_root(team.bob.state_dir, "bob")
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time; from pathlib import Path; from memsync.roots.lock import RootLock\n"
            f"RootLock(Path({str(layout.lock_file)!r})).acquire(); print('held', flush=True)\n"
            "time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
    holder.kill()
    holder.wait(timeout=10)
    assert team.bob.sync(wait=0).status == "current"


def test_redact_handles_an_at_sign_inside_the_password() -> None:
    shown = redact("https://user:p@ss@host.example/repo.git")
    assert "ss" not in shown.split("host")[0] and shown == "https://***@host.example/repo.git"


def test_ref_value_reads_loose_and_packed_refs_like_rev_parse(team: Team) -> None:
    box = Git(team.bob.path)
    ref = "refs/remotes/origin/main"
    expected = git(team.bob.path, "rev-parse", ref)
    assert box.ref_value(ref) == expected  # loose (written by our fetch) or packed
    git(team.bob.path, "pack-refs", "--all")
    assert not (team.bob.path / ".git" / ref).exists()
    assert box.ref_value(ref) == expected
    assert box.ref_value("refs/remotes/origin/nope") is None
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    team.alice.sync()
    git(team.bob.path, "fetch", "-q", "origin")  # a loose ref now overrides the packed one
    assert box.ref_value(ref) == git(team.bob.path, "rev-parse", ref) != expected


def test_a_no_op_cycle_never_writes_the_index(team: Team) -> None:
    """A background cycle must not take index.lock: a person's `git commit` at that moment
    would fail. Touched files make git want to refresh stat data; it must not write it.
    (memsync refreshes stat data only once per index it has not yet left fresh:
    `roots/indexstat.py`, tested in test_index_stat.py; here that refresh is already done.)"""
    index = team.bob.path / ".git" / "index"
    then = time.time() - 10
    os.utime(index, (then, then))  # quiet long enough: the first cycle refreshes it once
    assert team.bob.sync().status == "current"
    for path in (team.bob.path / "MEMORY.md", team.bob.path / "PURSUITS.md"):
        path.touch()
    before = index.stat()
    assert team.bob.sync().status == "current"
    after = index.stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
