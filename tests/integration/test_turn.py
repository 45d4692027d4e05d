"""One maintenance turn on a real root: a role (a small agent script) commits in its own
worktree; grants and the gate decide; the admission transaction lands it once."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from memsync.cycles.turn import CycleSettings, RoleFailed, TurnInput, run_cycle
from memsync.status import root_status
from memsync.transports.process import Deadline
from tests.conftest import Team
from tests.helpers import GIT_ENV, commit, git, snapshot

INSIGHT = CycleSettings("insight", True, threshold=2, points_per_commit=1)


class Script:
    """A role that is a shell script run in the worktree (an agent CLI stand-in)."""

    def __init__(self, body: str) -> None:
        self.body = body
        self.runs = 0

    def __call__(self, turn: TurnInput, deadline: Deadline) -> None:
        self.runs += 1
        env = {**os.environ, **GIT_ENV, "MEMSYNC_OPERATION_ID": turn.operation_id}
        done = subprocess.run(
            ["sh", "-c", self.body], cwd=turn.worktree, env=env, capture_output=True, check=False
        )
        if done.returncode != 0:
            raise RoleFailed(f"the role exited {done.returncode}: {done.stderr.decode()[-200:]}")


WRITE_LOG = (
    "mkdir -p insight_logs && printf '# Shape\\n\\nThe team keeps deploy rules.\\n' "
    "> insight_logs/2026-11-30-120000.md && git add -f insight_logs && "
    "git commit -qm 'insight: deploy rules cluster'"
)


def _pressure(team: Team, commits: int) -> None:
    """Raise insight pressure: the first count sets the mark, then memory commits add."""
    run_cycle(team.bob.settings, INSIGHT, Script("true"), team.bob.state_dir)
    for n in range(commits):
        commit(team.bob.path, {f"MEMORY_p{n}.md": f"# {n}\n"})


def test_not_due_runs_no_role(team: Team) -> None:
    role = Script(WRITE_LOG)
    result = run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir)
    assert result.status == "not-due" and role.runs == 0


def test_an_insight_lands_once_with_its_trailer(team: Team) -> None:
    _pressure(team, 2)
    role = Script(WRITE_LOG)
    result = run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir)
    assert result.status == "landed", result.message
    assert result.files == ("insight_logs/2026-11-30-120000.md",)
    head = git(team.bob.path, "rev-parse", "HEAD")
    assert head == result.commit
    body = git(team.bob.path, "log", "-1", "--format=%B")
    assert body.startswith("insight: deploy rules cluster")
    assert f"Memsync-Operation: {result.operation_id}" in body
    assert (team.bob.path / "insight_logs" / "2026-11-30-120000.md").is_file()
    assert git(team.bob.path, "status", "--porcelain") == ""
    again = run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir)
    assert again.status == "not-due" and role.runs == 1  # the points were consumed


def test_a_role_writing_outside_its_grants_is_refused_and_the_root_unchanged(team: Team) -> None:
    _pressure(team, 2)
    before = snapshot(team.bob.path)
    role = Script("printf '# hacked\\n' > MEMORY.md && git commit -qam 'insight: rewrite memory'")
    result = run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir)
    assert result.status == "refused"
    assert [p.code for p in result.problems] == ["grant-violation"]
    assert snapshot(team.bob.path) == before


def _many_logs(count: int) -> str:
    return (
        "mkdir -p insight_logs && "
        f"for n in $(seq 1 {count}); do printf '# Log\\n\\nOne of many.\\n' "
        "> insight_logs/2026-11-30-1200$n.md; done && git add -f insight_logs && "
        "git commit -qm 'insight: many logs'"
    )


@pytest.mark.parametrize("count", [2, 50])
def test_an_insight_turn_adding_more_than_one_log_is_refused(team: Team, count: int) -> None:
    """The grant is one log per turn: grants count files, not only paths."""
    _pressure(team, 2)
    before = snapshot(team.bob.path)
    head = git(team.bob.path, "rev-parse", "HEAD")
    result = run_cycle(team.bob.settings, INSIGHT, Script(_many_logs(count)), team.bob.state_dir)
    assert result.status == "refused", result.message
    assert {p.code for p in result.problems} == {"grant-violation"}
    assert len(result.problems) == count - 1
    assert git(team.bob.path, "rev-parse", "HEAD") == head
    assert snapshot(team.bob.path) == before


def test_leftovers_are_uncommitted_changes_and_a_failure_keeps_the_points(team: Team) -> None:
    _pressure(team, 2)
    result = run_cycle(
        team.bob.settings,
        INSIGHT,
        Script("mkdir -p insight_logs && echo x > insight_logs/a.md"),
        team.bob.state_dir,
    )
    assert result.status == "refused"
    assert [p.code for p in result.problems] == ["uncommitted-changes"]
    landed = run_cycle(team.bob.settings, INSIGHT, Script(WRITE_LOG), team.bob.state_dir)
    assert landed.status == "landed"  # the claim survived the failure


def test_a_noop_consumes_the_points(team: Team) -> None:
    _pressure(team, 2)
    assert (
        run_cycle(team.bob.settings, INSIGHT, Script("true"), team.bob.state_dir).status == "noop"
    )
    assert (
        run_cycle(team.bob.settings, INSIGHT, Script(WRITE_LOG), team.bob.state_dir).status
        == "not-due"
    )


def test_an_empty_prune_checkpoint_lands(team: Team) -> None:
    prune = CycleSettings("prune", True, threshold=1)
    role = Script("git commit -q --allow-empty -m 'prune: checkpoint'")
    result = run_cycle(team.bob.settings, prune, role, team.bob.state_dir)
    assert result.status == "landed", result.message
    assert git(team.bob.path, "log", "-1", "--format=%s") == "prune: checkpoint"
    assert run_cycle(team.bob.settings, prune, role, team.bob.state_dir).status == "not-due"


def test_an_insight_titled_as_a_prune_does_not_reset_the_prune_generation(team: Team) -> None:
    prune = CycleSettings("prune", True, threshold=2)
    _pressure(team, 2)  # two memory commits: prune is due
    role = Script(WRITE_LOG.replace("insight: deploy rules cluster", "prune: checkpoint"))
    assert run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir).status == "landed"
    assert git(team.bob.path, "log", "-1", "--format=%s") == "insight: prune: checkpoint"
    pruner = Script("git commit -q --allow-empty -m 'tidy up'")
    result = run_cycle(team.bob.settings, prune, pruner, team.bob.state_dir)
    assert result.status == "landed" and pruner.runs == 1, result.message
    # the prune turn's commit is a boundary whatever the role titled it
    assert git(team.bob.path, "log", "-1", "--format=%s") == "prune: tidy up"
    assert run_cycle(team.bob.settings, prune, pruner, team.bob.state_dir).status == "not-due"


def test_a_settled_turn_is_never_run_again_after_a_crash(team: Team) -> None:
    """A crash between the landing and the pressure update leaves the claim active; the
    next run finds the claim's operation settled and does not ask the role again."""
    _pressure(team, 2)
    state = team.bob.state_dir / "roots" / "bob" / "insight.json"
    role = Script(WRITE_LOG)
    seen: dict[str, object] = {}

    def remember(turn: TurnInput, deadline: Deadline) -> None:
        seen.update(json.loads(state.read_text()))  # the claim, as saved before the turn
        role(turn, deadline)

    assert run_cycle(team.bob.settings, INSIGHT, remember, team.bob.state_dir).status == "landed"
    assert seen["active_operation"]
    state.write_text(json.dumps(seen))  # as if killed before the claim was completed
    again = run_cycle(team.bob.settings, INSIGHT, remember, team.bob.state_dir)
    assert again.status == "noop" and "not run again" in again.message
    assert role.runs == 1
    assert json.loads(state.read_text())["active_operation"] is None


class MovesHead(Script):
    """The role works while the person commits in the root itself."""

    def __init__(self, body: str, root: Path, files: dict[str, str]) -> None:
        super().__init__(body)
        self.root, self.files = root, files

    def __call__(self, turn: TurnInput, deadline: Deadline) -> None:
        super().__call__(turn, deadline)
        commit(self.root, self.files, "a person's own commit meanwhile")


def test_a_turn_is_replayed_onto_a_moved_head_when_paths_do_not_meet(team: Team) -> None:
    _pressure(team, 2)
    role = MovesHead(WRITE_LOG, team.bob.path, {"MEMORY_mine.md": "# Mine\n"})
    result = run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir)
    assert result.status == "landed", result.message
    assert git(team.bob.path, "log", "-1", "--format=%s") == "insight: deploy rules cluster"
    assert git(team.bob.path, "log", "-2", "--format=%s").splitlines()[1] == (
        "a person's own commit meanwhile"
    )
    assert (team.bob.path / "MEMORY_mine.md").is_file()
    assert git(team.bob.path, "status", "--porcelain") == ""


def test_a_turn_whose_paths_changed_meanwhile_is_not_replayed(team: Team) -> None:
    _pressure(team, 2)
    role = MovesHead(WRITE_LOG, team.bob.path, {"insight_logs/2026-11-30-120000.md": "# Mine\n"})
    result = run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir)
    assert result.status == "failed" and "retried later" in result.message
    assert (team.bob.path / "insight_logs" / "2026-11-30-120000.md").read_text() == "# Mine\n"


def test_status_shows_each_cycle_where_it_stands_and_how_it_last_ended(team: Team) -> None:
    settings = team.bob.settings
    prune = CycleSettings("prune", True, threshold=3)
    git(team.bob.path, "commit", "-q", "--allow-empty", "-m", "prune: checkpoint")
    commit(team.bob.path, {"MEMORY_g1.md": "# one\n"})
    commit(team.bob.path, {"MEMORY_g2.md": "# two\n"})
    assert run_cycle(settings, prune, Script("true"), team.bob.state_dir).status == "not-due"
    shown = root_status(settings, team.bob.state_dir).prune
    assert (shown.commits, shown.last_result) == (2, None)

    commit(team.bob.path, {"MEMORY_g3.md": "# three\n"})
    role = Script("git commit -q --allow-empty -m 'prune: checkpoint'")
    assert run_cycle(settings, prune, role, team.bob.state_dir).status == "landed"
    shown = root_status(settings, team.bob.state_dir).prune
    assert (shown.commits, shown.last_result) == (0, "artifact")
    assert shown.last_run_at is not None

    _pressure(team, 2)
    assert run_cycle(settings, INSIGHT, Script(WRITE_LOG), team.bob.state_dir).status == "landed"
    insight = root_status(settings, team.bob.state_dir).insight
    assert (insight.points, insight.last_result) == (0, "artifact")
