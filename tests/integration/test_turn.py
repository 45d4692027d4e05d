"""One maintenance turn on a real root: a role (a small agent script) commits in its own
worktree; grants and the gate decide; the admission transaction lands it once."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from memsync.config.sections import CommandRoleSettings
from memsync.cycles.roles import CommandRole
from memsync.cycles.turn import CycleSettings, RoleFailed, TurnInput, run_cycle
from memsync.status import root_status
from memsync.transports.process import PIPE_GRACE, Deadline
from tests.conftest import Team
from tests.helpers import GIT_ENV, commit, git, snapshot, wait_for

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


def _git_state(root: Path) -> dict[str, str]:
    """The root's own repository as a role must leave it: every ref (but memsync's rescue
    refs), HEAD, the config, the hooks and the object-store settings, byte for byte."""
    dot = root / ".git"
    refs = git(root, "for-each-ref", "--format=%(refname) %(objectname)")
    state = {
        "refs": "\n".join(r for r in refs.splitlines() if "refs/memsync/rescue/" not in r),
        "HEAD": (dot / "HEAD").read_text(),
        "config": (dot / "config").read_text(),
        "hooks": " ".join(sorted(p.name for p in (dot / "hooks").iterdir()))
        if (dot / "hooks").is_dir()
        else "",
    }
    for name in ("packed-refs", "objects/info/alternates", "info/attributes"):
        path = dot / name
        state[name] = path.read_text() if path.exists() else "<none>"
    return state


def test_a_commit_in_the_root_while_the_role_runs_is_role_escaped_and_put_back(
    team: Team,
) -> None:
    """A person and a role writing the root look the same: the turn is `failed` with
    `role-escaped`, the root's branch is put back, the commit is kept under a rescue ref
    and the work tree (holding it) is not touched."""
    _pressure(team, 2)
    head = git(team.bob.path, "rev-parse", "HEAD")
    role = MovesHead(WRITE_LOG, team.bob.path, {"MEMORY_mine.md": "# Mine\n"})
    result = run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir)
    assert result.status == "failed", result.message
    assert {p.code for p in result.problems} == {"role-escaped"}
    assert "refs/heads/main" in result.message
    assert git(team.bob.path, "rev-parse", "HEAD") == head
    moved = git(team.bob.path, "for-each-ref", "--format=%(objectname)", "refs/memsync/rescue/")
    assert git(team.bob.path, "log", "-1", "--format=%s", moved) == (
        "a person's own commit meanwhile"
    )
    assert (team.bob.path / "MEMORY_mine.md").read_text() == "# Mine\n"  # nothing lost
    assert not (team.bob.path / "insight_logs").exists()  # nothing of the role landed


ESCAPES = {
    # found through the alternates file of its own repository, not told
    "discovered-through-alternates": 'ROOT_GIT=$(dirname "$(cat .git/objects/info/alternates)")'
    + ' && git --git-dir "$ROOT_GIT" update-ref refs/heads/main HEAD~1',
    # the role's commit, pushed into the root's checked-out branch behind git's back
    "fetch-and-update-ref": WRITE_LOG
    + ' && git --git-dir "$ROOT_GIT" fetch -q "$PWD" HEAD'
    + ' && git --git-dir "$ROOT_GIT" update-ref refs/heads/main FETCH_HEAD',
    "push-a-new-branch": WRITE_LOG + ' && git push -q "$ROOT_GIT" HEAD:refs/heads/escaped',
    "write-the-ref-file": WRITE_LOG
    + ' && git push -q "$ROOT_GIT" HEAD:refs/heads/tmp'
    + ' && cp "$ROOT_GIT/refs/heads/tmp" "$ROOT_GIT/refs/heads/main"'
    + ' && rm "$ROOT_GIT/refs/heads/tmp"',
    "rewind-the-branch": 'git --git-dir "$ROOT_GIT" update-ref refs/heads/main HEAD~1',
    "config": 'printf "[core]\\n\\thooksPath = /tmp\\n" >> "$ROOT_GIT/config"',
    "hook": 'mkdir -p "$ROOT_GIT/hooks" && printf "#!/bin/sh\\n" > "$ROOT_GIT/hooks/post-commit"'
    + ' && chmod +x "$ROOT_GIT/hooks/post-commit"',
    "symbolic-head": 'git --git-dir "$ROOT_GIT" symbolic-ref HEAD refs/heads/elsewhere',
    "pack-refs": 'git --git-dir "$ROOT_GIT" pack-refs --all',
    "alternates": 'printf "/tmp\\n" > "$ROOT_GIT/objects/info/alternates"',
    "attributes": 'mkdir -p "$ROOT_GIT/info" && echo "* filter=x" > "$ROOT_GIT/info/attributes"',
    "delete-a-ref": 'git --git-dir "$ROOT_GIT" update-ref -d refs/remotes/origin/main',
}


@pytest.mark.parametrize("escape", sorted(ESCAPES))
def test_an_insight_command_role_that_writes_the_root_is_role_escaped(
    team: Team, escape: str
) -> None:
    """The role works in a repository of its own; one that finds the root (through its
    alternates file here) and writes its refs, config, hooks or object settings anyway is
    `role-escaped`: the turn failed, the root exactly as before, nothing published."""
    _pressure(team, 2)
    before, files = _git_state(team.bob.path), snapshot(team.bob.path)
    script = f"ROOT_GIT='{team.bob.path / '.git'}'; " + ESCAPES[escape]
    role = CommandRole(CommandRoleSettings("insight", ("sh", "-c", script), timedelta(seconds=30)))
    result = run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir)
    assert result.status == "failed", result.message
    assert "role-escaped" in {p.code for p in result.problems}, result.problems
    assert _git_state(team.bob.path) == before
    assert snapshot(team.bob.path) == files
    assert not (team.bob.path / "insight_logs").exists()
    landed = run_cycle(team.bob.settings, INSIGHT, Script(WRITE_LOG), team.bob.state_dir)
    assert landed.status == "landed", landed.message  # the claim was kept; the root works


def test_the_old_attack_moves_only_the_roles_own_branch(team: Team) -> None:
    """`git update-ref refs/heads/main HEAD` in the role's worktree moved the root's branch
    when the worktree was a linked one; in the role's own repository it moves that
    repository's branch, and the turn lands through the gate as usual."""
    _pressure(team, 2)
    start = git(team.bob.path, "rev-parse", "HEAD")
    role = Script(WRITE_LOG + " && git update-ref refs/heads/main HEAD")
    result = run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir)
    assert result.status == "landed", result.message
    assert git(team.bob.path, "rev-parse", "HEAD") == result.commit
    assert git(team.bob.path, "rev-parse", "HEAD~1") == start  # one collapsed commit
    assert git(team.bob.path, "for-each-ref", "refs/memsync/") == ""


def test_the_role_works_in_a_repository_of_its_own(team: Team) -> None:
    _pressure(team, 2)
    seen: dict[str, str] = {}

    def look(turn: TurnInput, deadline: Deadline) -> None:
        seen["git_dir"] = git(turn.worktree, "rev-parse", "--absolute-git-dir")
        seen["common"] = git(
            turn.worktree, "rev-parse", "--path-format=absolute", "--git-common-dir"
        )
        seen["refs"] = git(turn.worktree, "for-each-ref")
        Script(WRITE_LOG)(turn, deadline)

    assert run_cycle(team.bob.settings, INSIGHT, look, team.bob.state_dir).status == "landed"
    root_git = str((team.bob.path / ".git").resolve())
    assert seen["git_dir"] == seen["common"] != root_git
    assert not seen["git_dir"].startswith(str(team.bob.path.resolve()))
    assert "refs/heads/main" not in seen["refs"] and "refs/remotes" not in seen["refs"]


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


def _escaping_role(tmp_path: Path, marker: str, then: str, timeout: float) -> CommandRole:
    """A command role that leaves `sleep <marker>` in a new session holding its stdout."""
    flag = tmp_path / f"in-session-{marker}"
    script = (
        f"setsid sh -c 'echo $$ > {flag}; exec sleep {marker}' & "
        f"while [ ! -s {flag} ]; do sleep 0.01; done; {then}"
    )
    return CommandRole(
        CommandRoleSettings("insight", ("sh", "-c", script), timedelta(seconds=timeout))
    )


@pytest.mark.parametrize(
    ("then", "timeout"), [("echo started", 30.0), ("echo started; sleep 60", 1.0)]
)
def test_a_role_that_leaves_a_process_holding_stdout_cannot_hold_the_turn_or_the_lock(
    team: Team, tmp_path: Path, then: str, timeout: float
) -> None:
    _pressure(team, 2)
    marker = f"617.{int(timeout)}"
    head = git(team.bob.path, "rev-parse", "HEAD")
    started = time.monotonic()
    try:
        role = _escaping_role(tmp_path, marker, then, timeout)
        cycle = replace(INSIGHT, timeout=timeout)
        result = run_cycle(team.bob.settings, cycle, role, team.bob.state_dir)
        elapsed = time.monotonic() - started
        assert elapsed < timeout + PIPE_GRACE + 5, elapsed
        assert result.status == "failed", result.message
        assert {p.code for p in result.problems} == {"role-escaped"}
        assert git(team.bob.path, "rev-parse", "HEAD") == head
        # the root lock is free: the next turn runs at once and lands
        again = run_cycle(team.bob.settings, INSIGHT, Script(WRITE_LOG), team.bob.state_dir, wait=0)
        assert again.status == "landed", again.message
    finally:
        found = subprocess.run(
            ["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True, check=False
        )
        for pid in found.stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), 9)


def test_a_role_that_leaves_a_detached_process_in_its_repository_is_role_escaped(
    team: Team, tmp_path: Path
) -> None:
    """Out of its group, its session and its pipes, but still working in the role's
    repository (it could write the root later): found, killed, role-escaped."""
    _pressure(team, 2)
    marker = "619.2718"
    flag = tmp_path / "detached"
    script = (
        WRITE_LOG + f" && (setsid sh -c 'echo $$ > {flag}; exec sleep {marker}' "
        "</dev/null >/dev/null 2>&1 &) && "
        f"while [ ! -s {flag} ]; do sleep 0.01; done"
    )
    role = CommandRole(CommandRoleSettings("insight", ("sh", "-c", script), timedelta(seconds=30)))
    head = git(team.bob.path, "rev-parse", "HEAD")
    try:
        result = run_cycle(team.bob.settings, INSIGHT, role, team.bob.state_dir)
        assert result.status == "failed", result.message
        assert {p.code for p in result.problems} == {"role-escaped"}
        assert "left 1 process(es) running" in result.message
        assert git(team.bob.path, "rev-parse", "HEAD") == head
        pid = int(flag.read_text())
        wait_for(lambda: not Path(f"/proc/{pid}").exists() or _zombie(pid), 10, "the kill")
    finally:
        found = subprocess.run(
            ["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True, check=False
        )
        for pid_text in found.stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid_text), 9)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[-1][:1] == "Z"
    except FileNotFoundError:
        return True
