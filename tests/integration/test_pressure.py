"""Insight pressure and the prune generation, on real histories."""

from __future__ import annotations

from pathlib import Path

from memsync.cycles.pressure import count_new, prune_due
from memsync.cycles.records import Pressure
from memsync.transports.git import Git
from tests.conftest import Team
from tests.helpers import commit, git


def test_points_count_each_memory_commit_once(team: Team, tmp_path: Path) -> None:
    box, state = Git(team.bob.path), tmp_path / "insight.json"
    head = git(team.bob.path, "rev-parse", "HEAD")
    assert count_new(box, state, head, 3).points == 0  # the first count only sets the mark
    commit(team.bob.path, {"MEMORY_a.md": "# A\n"})
    commit(team.bob.path, {"PURSUITS.md": "# Pursuits\n\nnot memory\n"})
    head = commit(team.bob.path, {"MEMORY.md": "# User Context\n\nmore\n"})
    assert count_new(box, state, head, 3).points == 6  # two memory-touching commits
    assert count_new(box, state, head, 3).points == 6  # idempotent per commit


def test_claims_consume_on_success_and_keep_on_failure(tmp_path: Path) -> None:
    state = Pressure(points=170)
    assert state.claim(200) == (state, None)
    claimed, op = state.claim(150)
    assert op is not None and claimed.active_points == 150
    assert claimed.claim(150)[1] == op  # a crash resumes the same operation
    failed = claimed.completed("failed")
    assert failed.points == 170 and failed.active_operation == op
    done = failed.completed("noop")
    assert done.points == 20 and done.active_operation is None and done.last_result == "noop"
    path = tmp_path / "insight.json"
    done.save(path)
    assert Pressure.load(path) == done
    path.write_text("{not json")
    assert Pressure.load(path) == Pressure()


def test_prune_is_due_after_a_generation_of_memory_commits(team: Team) -> None:
    root, box = team.bob.path, Git(team.bob.path)
    for n in range(3):
        commit(root, {f"MEMORY_{n}.md": f"# {n}\n"})
    head = git(root, "rev-parse", "HEAD")
    before = prune_due(box, head, 3)
    assert before.due and before.boundary is None  # init's baseline touches MEMORY.md too
    git(root, "commit", "-q", "--allow-empty", "-m", "prune: checkpoint")
    head = git(root, "rev-parse", "HEAD")
    after = prune_due(box, head, 3)
    assert not after.due and after.count == 0 and after.boundary == head
    assert "0/3 commits since the latest prune" in after.reason
    commit(root, {"MEMORY_x.md": "# x\n"}, "body says prune: but the subject does not")
    assert prune_due(box, git(root, "rev-parse", "HEAD"), 3).count == 1
