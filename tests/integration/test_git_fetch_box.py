"""A cycle's first box (`gitfetch.Fetches`: the runner, its status and the fetch) and the
whole box made `like` it (`GitCore.like`): every process of either runs in the same box
(the forced config, the clean environment, the config guard, the one deadline)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.errors import GitTimeout, UnsafeRepoConfig
from memsync.transports.git import FetchOutcome, Git
from memsync.transports.gitfetch import Fetches
from memsync.transports.process import Deadline
from tests.conftest import Team
from tests.helpers import commit, git, push


def _first(path: Path, deadline: Deadline, record: Path | None = None) -> Fetches:
    box = Fetches(path, timeout=30, deadline=deadline, resident=False)
    box.config_record = record
    return box


def test_the_whole_box_is_the_first_one_in_all_but_its_methods(
    team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(team.bob.path, "config", "core.pager", "less")  # the root's own: the box forces cat
    monkeypatch.setenv("GIT_DIR", "/nowhere")  # inherited: never a box's
    deadline = Deadline.after(30)
    first = _first(team.bob.path, deadline, tmp_path / "record")
    whole = Git.like(first)
    assert whole.deadline is first.deadline  # one budget for the cycle, shared
    assert (whole.cwd, whole.timeout, whole.resident) == (first.cwd, first.timeout, False)
    assert (whole.credentials, whole.trusted_alternates) == (first.credentials, False)
    assert whole.config_record == first.config_record
    assert whole.box_env == first.box_env and "GIT_DIR" not in whole.box_env  # clean env
    # Both run git with the forced config, whatever the root's own config says.
    for box in (first, whole):
        assert box.out("config", "--get", "core.pager") == "cat"


def test_a_fetch_on_the_first_box_then_reads_on_the_whole_one(team: Team, tmp_path: Path) -> None:
    head = commit(team.alice.path, {"MEMORY_f.md": "# F\n"}, "f")
    push(team.alice.path)
    first = _first(team.bob.path, Deadline.after(30), tmp_path / "record")
    outcome, _ = first.fetch("origin", "main", "refs/remotes/origin/main")
    assert outcome is FetchOutcome.OK
    whole = Git.like(first)
    assert whole.ref_value("refs/remotes/origin/main") == head
    assert whole.work_state().head == git(team.bob.path, "rev-parse", "HEAD")


def test_the_config_guard_refuses_the_root_for_both_boxes(team: Team) -> None:
    git(team.bob.path, "config", "remote.origin.uploadpack", "touch /tmp/never")
    first = _first(team.bob.path, Deadline.after(30))
    for box in (first, Git.like(first)):
        with pytest.raises(UnsafeRepoConfig):
            box.work_state()


def test_the_deadline_spent_on_the_first_box_bounds_the_whole_one(team: Team) -> None:
    first = _first(team.bob.path, Deadline(0.0, 5.0))  # already over
    whole = Git.like(first)
    for box in (first, whole):
        with pytest.raises(GitTimeout, match="time limit"):
            box.work_state()
