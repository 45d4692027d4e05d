"""The config guard's reading kept for the next one-shot process (`gitconfigrecord`): a
fresh process uses it only while every input git read its config from is exactly as it
was; a root's config changed in any way between two processes (in place with the same size
and times, swapped for another file, an include, a worktree config, a link) is judged
afresh and still refused (SECURITY.md, "a root's own git config").

Each "process" is a new `ConfigGuard` (nothing in memory) and a one-shot box of the root
with a record path, as a cold `sync-now` makes; whether git ran is the process box's count.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from memsync.errors import UnsafeRepoConfig
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.roots.layout import RootLayout
from memsync.transports import process
from memsync.transports.git import Git
from memsync.transports.gitconfigrecord import RACY_NS, Inputs
from memsync.transports.gitguard import ConfigGuard
from tests.conftest import PROCESS_EXAMPLES, Team
from tests.helpers import commit, git
from tests.kit import wait_for

UNSAFE = "[core]\n\talternateRefsCommand = touch /never\n"


def _repo(tmp_path: Path, name: str = "root") -> Path:
    root = tmp_path / name
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    git(root, "config", "user.name", "Someone")
    return root


def _settled(root: Path) -> None:
    """Wait until no config file is so recent that a change could keep its timestamps."""
    wait_for(
        lambda: (found := Inputs.take(root)) is not None and not found.racy(time.time_ns()),
        timeout=5 * RACY_NS / 1e9 + 5,
        what="the config files to settle",
    )


def _cold(root: Path, record: Path | None) -> tuple[int, dict[str, str] | UnsafeRepoConfig]:
    """(git processes run, the guard's overrides or its refusal) in a fresh process (one
    without a record path asks git, as before records)."""
    box = Git(root, resident=False)
    box.config_record = record
    before = process.started()
    try:
        outcome: dict[str, str] | UnsafeRepoConfig = ConfigGuard().env(box)
    except UnsafeRepoConfig as exc:
        outcome = exc
    return process.started() - before, outcome


def _same_size(text: str, size: int) -> str:
    """A safe config of exactly `size` bytes (a padded user name)."""
    head, tail = "[user]\n\tname = ", "\n"
    assert size > len(head) + len(tail)
    return head + "x" * (size - len(head) - len(tail)) + tail


def _recorded(root: Path, record: Path) -> None:
    """The first cold process asks git and records; the second asks nothing."""
    _settled(root)
    ran, first = _cold(root, record)
    assert ran == 1 and isinstance(first, dict)
    assert record.is_file()
    ran, second = _cold(root, record)
    assert (ran, second) == (0, first)


def test_a_second_cold_process_reads_the_record_not_git(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    record = tmp_path / "state" / "repo-config.json"
    git(root, "config", "filter.lfs.clean", "git-lfs clean -- %f")  # a driver defused
    _recorded(root, record)
    _ran, env = _cold(root, record)
    assert isinstance(env, dict) and env["GIT_CONFIG_KEY_0"] == "filter.lfs.clean"
    assert record.stat().st_mode & 0o777 == 0o600


def _recorded_at_unsafe_size(tmp_path: Path) -> tuple[Path, Path, str, os.stat_result]:
    """A root whose config is padded to the size an unsafe one will have, recorded by a
    cold cycle: the root, the record, the unsafe text and the recorded file's stat."""
    root = _repo(tmp_path)
    record = tmp_path / "state" / "repo-config.json"
    config = root / ".git" / "config"
    original = config.read_text()
    unsafe = original + UNSAFE
    config.write_text(original + _same_size("", len(unsafe) - len(original)))
    _recorded(root, record)
    return root, record, unsafe, config.stat()


def test_a_change_in_place_with_the_same_size_and_times_is_refused(tmp_path: Path) -> None:
    root, record, unsafe, info = _recorded_at_unsafe_size(tmp_path)
    config = root / ".git" / "config"
    with config.open("r+") as handle:  # the same inode, the same size
        handle.write(unsafe)
    os.utime(config, ns=(info.st_atime_ns, info.st_mtime_ns))  # and the same mtime
    assert config.stat().st_size == info.st_size
    ran, outcome = _cold(root, record)
    assert ran == 1 and isinstance(outcome, UnsafeRepoConfig), outcome
    assert "core.alternaterefscommand" in outcome.message


def test_a_file_swapped_in_with_the_same_size_and_times_is_refused(tmp_path: Path) -> None:
    root, record, unsafe, info = _recorded_at_unsafe_size(tmp_path)
    config = root / ".git" / "config"
    other = root / ".git" / "config.new"
    other.write_text(unsafe)
    os.utime(other, ns=(info.st_atime_ns, info.st_mtime_ns))
    other.replace(config)
    ran, outcome = _cold(root, record)
    assert ran == 1 and isinstance(outcome, UnsafeRepoConfig), outcome


def test_an_include_is_never_recorded(tmp_path: Path) -> None:
    """An included file's content (or an `includeIf` condition) is git's to evaluate: no
    record, every process asks git (and the include refuses the root)."""
    root = _repo(tmp_path)
    record = tmp_path / "state" / "repo-config.json"
    _recorded(root, record)
    extra = tmp_path / "extra.config"
    extra.write_text("[user]\n\temail = a@b\n")
    git(root, "config", "include.path", str(extra))
    _settled(root)
    for _ in range(2):
        ran, outcome = _cold(root, record)
        assert ran == 1 and isinstance(outcome, UnsafeRepoConfig), outcome
        assert "include.path" in outcome.message
    assert not record.exists()


def test_a_worktree_config_created_later_is_read(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    record = tmp_path / "state" / "repo-config.json"
    git(root, "config", "core.repositoryformatversion", "1")
    git(root, "config", "extensions.worktreeConfig", "true")
    _recorded(root, record)
    (root / ".git" / "config.worktree").write_text(UNSAFE)
    ran, outcome = _cold(root, record)
    assert ran == 1 and isinstance(outcome, UnsafeRepoConfig), outcome


def test_a_credential_in_the_config_is_never_copied_into_a_record(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    record = tmp_path / "state" / "repo-config.json"
    _recorded(root, record)
    git(root, "remote", "add", "origin", "https://someone:s3cret@example.com/team.git")
    _settled(root)
    for _ in range(2):
        ran, outcome = _cold(root, record)
        assert ran == 1 and isinstance(outcome, dict)
    assert not record.exists()


def test_a_config_that_is_a_link_is_never_recorded(tmp_path: Path) -> None:
    root = _repo(tmp_path)
    record = tmp_path / "state" / "repo-config.json"
    config = root / ".git" / "config"
    target = tmp_path / "shared.config"
    target.write_bytes(config.read_bytes())
    config.unlink()
    config.symlink_to(target)
    assert Inputs.take(root) is None  # nothing git reads through a link is vouched for
    for _ in range(2):
        ran, outcome = _cold(root, record)
        assert ran == 1 and isinstance(outcome, dict)
    assert not record.exists()
    target.write_text(target.read_text() + UNSAFE)  # the link's own times never change
    ran, outcome = _cold(root, record)
    assert ran == 1 and isinstance(outcome, UnsafeRepoConfig)


def test_a_config_stamped_now_or_later_is_not_recorded(tmp_path: Path) -> None:
    """A file the coarse clock may stamp again with the same times is not vouched for."""
    root = _repo(tmp_path)
    record = tmp_path / "state" / "repo-config.json"
    config = root / ".git" / "config"
    later = time.time_ns() + 60 * 10**9
    os.utime(config, ns=(later, later))
    ran, outcome = _cold(root, record)
    assert ran == 1 and isinstance(outcome, dict)
    assert not record.exists()


def test_a_record_of_another_root_or_not_private_is_ignored(tmp_path: Path) -> None:
    first, second = _repo(tmp_path, "first"), _repo(tmp_path, "second")
    record = tmp_path / "state" / "repo-config.json"
    _recorded(first, record)
    _settled(second)
    (second / ".git" / "config").write_bytes((first / ".git" / "config").read_bytes())
    _settled(second)
    ran, _outcome = _cold(second, record)  # another root's record: git, then its own
    assert ran == 1
    assert json.loads(record.read_text())["key"][2][0] == str(second)
    record.chmod(0o644)  # readable by others: not ours alone, ignored
    ran, _outcome = _cold(second, record)
    assert ran == 1


def test_the_record_holds_no_verdict_only_what_git_listed(tmp_path: Path) -> None:
    """The rules judge the kept entries on every use: an entry the record holds that the
    rules refuse is refused (a record is never an allowance)."""
    root = _repo(tmp_path)
    record = tmp_path / "state" / "repo-config.json"
    _recorded(root, record)
    body = json.loads(record.read_text())
    body["entries"].insert(0, ["local", "file:.git/config", "core.alternaterefscommand", "x"])
    record.write_text(json.dumps(body))
    record.chmod(0o600)
    ran, outcome = _cold(root, record)
    assert ran == 0 and isinstance(outcome, UnsafeRepoConfig)


def test_a_cold_sync_keeps_the_record_in_the_roots_state(team: Team, tmp_path: Path) -> None:
    """`sync_root` without a daemon's memo is a one-shot cycle: it records, and a config
    change between two such cycles is still seen (the root refused, then synced again)."""
    bob = team.bob.path
    _settled(bob)
    commit(team.alice.path, {"MEMORY_y.md": "# Y\n"})
    assert team.alice.sync().status == "pushed"
    assert team.bob.sync().status == "synced"
    assert RootLayout.for_root(team.bob.state_dir, team.bob.settings.name).config_record.is_file()
    git(bob, "config", "core.alternateRefsCommand", "touch /never")
    result = sync_root(team.bob.settings, team.bob.state_dir, SyncOptions())
    assert result.status == "error" and "core.alternaterefscommand" in result.message
    git(bob, "config", "--unset-all", "core.alternateRefsCommand")
    assert team.bob.sync().status == "current"


# Keys of every kind the guard tells apart: inert, defused (a driver, a helper), forced,
# refused, an include (never recorded), and the worktree-config extension.
_LINES = [
    "[user]\n\tname = A\n",
    "[color]\n\tui = auto\n",
    "[color]\n\tui = always\n",
    '[filter "x"]\n\tclean = cat\n',
    '[merge "m"]\n\tdriver = cat\n',
    "[core]\n\tfsmonitor = true\n",
    "[core]\n\talternateRefsCommand = touch /never\n",
    "[http]\n\tsslVerify = false\n",
    '[remote "origin"]\n\turl = /elsewhere\n',
    "[include]\n\tpath = /nowhere\n",
    "[extensions]\n\tworktreeConfig = true\n",
]


def _verdict(outcome: dict[str, str] | UnsafeRepoConfig) -> object:
    if isinstance(outcome, UnsafeRepoConfig):
        return ("refused", outcome.message, tuple(outcome.findings))
    return ("runs", outcome)


@PROCESS_EXAMPLES
@given(
    st.lists(st.sampled_from(_LINES), max_size=4),
    st.lists(st.sampled_from(_LINES), max_size=2),
    st.lists(st.sampled_from(_LINES), max_size=3),
)
def test_a_verdict_from_the_record_equals_one_from_git(
    first: list[str], worktree: list[str], second: list[str]
) -> None:
    """Whatever the config holds, and however it changes between two processes, the guard
    of a process that may use the record says exactly what one that asks git says."""
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root = _repo(base)
        config = root / ".git" / "config"
        plain = config.read_text()
        record = base / "state" / "repo-config.json"
        for lines, extra in ((first, worktree), (second, [])):
            config.write_text(plain + "".join(lines))
            (root / ".git" / "config.worktree").write_text("".join(extra))
            _settled(root)
            for _ in range(2):  # the second may take the record
                _ran, outcome = _cold(root, record)
                assert _verdict(outcome) == _verdict(_cold(root, None)[1])
