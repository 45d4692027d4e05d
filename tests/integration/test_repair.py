"""The repair role for sync against real git: a bare upstream, two roots, and small shell
scripts as `command` agents that settle (or fail to settle) a conflicting merge."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from memsync.config.sections import CommandRoleSettings, OpenAIRoleSettings, RoleSettings
from tests.conftest import Member, Team
from tests.helpers import commit, git, snapshot
from tests.integration.test_sync import leftovers

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "examples" / "agents" / "repair-merge.sh"
ALICE_MEMORY = "# User Context\n\nAlice prefers tabs.\n"
BOB_MEMORY = "# User Context\n\nBob prefers spaces.\n"
COMMIT = "git commit -q --no-edit"


class Agent:
    """A `command` role that is a shell script; every run appends a line to `runs.log`."""

    def __init__(self, tmp_path: Path, body: str, name: str = "fixer") -> None:
        self.log = tmp_path / f"{name}-runs.log"
        script = tmp_path / f"{name}.sh"
        script.write_text(f'#!/bin/sh\necho "$MEMSYNC_OPERATION_ID" >> "{self.log}"\n{body}\n')
        self.role = CommandRoleSettings(name, ("/bin/sh", str(script)), timedelta(seconds=60))

    @property
    def runs(self) -> int:
        return len(self.log.read_text().splitlines()) if self.log.exists() else 0


def with_role(member: Member, role: RoleSettings | None, **overrides: object) -> Member:
    settings = replace(
        member.settings,
        repair_role=role.name if role else None,
        repair=role,
        **overrides,  # type: ignore[arg-type]
    )
    return replace(member, settings=settings)


def conflict(team: Team) -> tuple[str, str]:
    """Alice and Bob edit the same line of MEMORY.md; Alice's edit is upstream."""
    commit(team.alice.path, {"MEMORY.md": ALICE_MEMORY}, "alice: tabs")
    assert team.alice.sync().status == "pushed"
    local = commit(team.bob.path, {"MEMORY.md": BOB_MEMORY}, "bob: spaces")
    return local, git(team.upstream, "rev-parse", "main")


def unchanged(team: Team, bob: Member, result_status: str, before: object, upstream: str) -> None:
    assert result_status == "conflict"
    assert snapshot(bob.path) == before
    assert git(team.upstream, "rev-parse", "main") == upstream
    assert leftovers(bob) == []


def test_the_repair_role_settles_a_conflict_once_and_it_is_pushed(
    team: Team, tmp_path: Path
) -> None:
    agent = Agent(tmp_path, f'exec /bin/sh "{EXAMPLE}"')
    bob = with_role(team.bob, agent.role)
    local, upstream = conflict(team)

    result = bob.sync()
    assert result.status == "pushed", result.message
    assert "repair role fixer settled it" in result.message
    head = git(bob.path, "rev-parse", "HEAD")
    assert git(bob.path, "rev-list", "--parents", "-n1", head).split()[1:] == [local, upstream]
    assert f"Memsync-Operation: {result.operation_id}" in git(bob.path, "log", "-1", "--format=%B")
    text = (bob.path / "MEMORY.md").read_text()
    assert "Alice prefers tabs." in text and "Bob prefers spaces." in text and "<<<" not in text
    assert git(team.upstream, "rev-parse", "main") == head
    assert git(bob.path, "status", "--porcelain") == ""
    assert leftovers(bob) == [] and agent.runs == 1

    assert bob.sync().status == "current"
    assert team.alice.sync().status == "synced"
    assert (team.alice.path / "MEMORY.md").read_text() == text
    assert agent.runs == 1


def test_the_same_conflict_never_runs_the_model_twice(team: Team, tmp_path: Path) -> None:
    agent = Agent(tmp_path, f'exec /bin/sh "{EXAMPLE}"')
    bob = with_role(team.bob, agent.role)
    local, upstream = conflict(team)
    first = bob.sync(no_push=True)
    assert first.status == "synced", first.message
    repaired = git(bob.path, "rev-parse", "HEAD")

    git(bob.path, "reset", "-q", "--hard", local)  # the very same conflict, once more
    again = bob.sync(no_push=True)
    assert again.status == "synced", again.message
    assert "published again" in again.message
    assert git(bob.path, "rev-parse", "HEAD") == repaired
    assert agent.runs == 1
    assert git(team.upstream, "rev-parse", "main") == upstream  # no_push


def test_a_repair_that_changes_nothing_is_not_asked_again(team: Team, tmp_path: Path) -> None:
    agent = Agent(tmp_path, "git merge --abort")
    bob = with_role(team.bob, agent.role)
    _local, upstream = conflict(team)
    before = snapshot(bob.path)
    first = bob.sync()
    unchanged(team, bob, first.status, before, upstream)
    assert "changed nothing" in first.message
    second = bob.sync()
    unchanged(team, bob, second.status, before, upstream)
    assert "not run again" in second.message
    assert agent.runs == 1


def test_a_repair_writing_outside_the_synchronized_paths_is_refused(
    team: Team, tmp_path: Path
) -> None:
    body = (
        f"printf '{ALICE_MEMORY}' > MEMORY.md && mkdir -p notes && echo x > notes/x.md && "
        f"git add -f MEMORY.md notes/x.md && {COMMIT}"
    )
    agent = Agent(tmp_path, body)
    bob = with_role(team.bob, agent.role)
    _local, upstream = conflict(team)
    before = snapshot(bob.path)
    result = bob.sync()
    unchanged(team, bob, result.status, before, upstream)
    assert [p.code for p in result.problems] == ["grant-violation"]
    assert result.problems[0].path == "notes/x.md"
    assert agent.runs == 1


@pytest.mark.parametrize("write", ["branch", "config"])
def test_a_repair_role_that_writes_the_root_is_role_escaped(
    team: Team, tmp_path: Path, write: str
) -> None:
    """The repair role merges and works in a repository of its own; one that writes the
    root's branch or config anyway is `role-escaped` and the root is put back exactly."""
    root_git = team.bob.path / ".git"
    attack = {
        "branch": f'git --git-dir "{root_git}" fetch -q "$PWD" HEAD'
        f' && git --git-dir "{root_git}" update-ref refs/heads/main FETCH_HEAD',
        "config": f'printf "[core]\\n\\thooksPath = /tmp\\n" >> "{root_git}/config"',
    }[write]
    agent = Agent(tmp_path, f'/bin/sh "{EXAMPLE}" && {attack}')
    bob = with_role(team.bob, agent.role)
    _local, upstream = conflict(team)
    before = snapshot(bob.path)
    config = (root_git / "config").read_bytes()
    result = bob.sync()
    unchanged(team, bob, result.status, before, upstream)
    assert "role-escaped" in {p.code for p in result.problems}, result.message
    assert (root_git / "config").read_bytes() == config
    assert agent.runs == 1


def test_a_repair_whose_merge_is_invalid_is_refused(team: Team, tmp_path: Path) -> None:
    broken = "# User Context {#user}\\n\\n- `tabs` prefers tabs → [dep:gone]\\n"
    agent = Agent(tmp_path, f"printf '{broken}' > MEMORY.md && git add MEMORY.md && {COMMIT}")
    bob = with_role(team.bob, agent.role)
    _local, upstream = conflict(team)
    before = snapshot(bob.path)
    result = bob.sync()
    unchanged(team, bob, result.status, before, upstream)
    assert "dangling-edge" in {p.code for p in result.problems}
    assert "attempt 1 of 3" in result.message


def test_a_repair_that_leaves_the_merge_unfinished_fails(team: Team, tmp_path: Path) -> None:
    agent = Agent(tmp_path, f"printf '{ALICE_MEMORY}' > MEMORY.md")
    bob = with_role(team.bob, agent.role)
    _local, upstream = conflict(team)
    before = snapshot(bob.path)
    result = bob.sync()
    unchanged(team, bob, result.status, before, upstream)
    assert "uncommitted-changes" in {p.code for p in result.problems}


def test_a_failing_repair_backs_off_and_stops_at_its_bound(team: Team, tmp_path: Path) -> None:
    agent = Agent(tmp_path, "echo 'no model today' >&2; exit 3")
    bob = with_role(team.bob, agent.role, repair_attempts=2, repair_backoff=timedelta(0))
    _local, upstream = conflict(team)
    before = snapshot(bob.path)

    first = bob.sync()
    unchanged(team, bob, first.status, before, upstream)
    assert "attempt 1 of 2" in first.message and "no model today" in first.message
    second = bob.sync()
    unchanged(team, bob, second.status, before, upstream)
    assert "attempt 2 of 2" in second.message and "not run again" in second.message
    third = bob.sync()
    unchanged(team, bob, third.status, before, upstream)
    assert "failed 2 time(s)" in third.message
    assert second.operation_id and second.operation_id in third.message
    assert agent.runs == 2

    ledger = bob.state_dir / "roots" / "bob" / "repair.json"
    assert ledger.stat().st_mode & 0o777 == 0o600
    assert [entry["count"] for entry in json.loads(ledger.read_text()).values()] == [2]


def test_a_failed_repair_waits_for_its_backoff(team: Team, tmp_path: Path) -> None:
    agent = Agent(tmp_path, "exit 3")
    bob = with_role(team.bob, agent.role, repair_backoff=timedelta(hours=1))
    _local, upstream = conflict(team)
    before = snapshot(bob.path)
    assert bob.sync().status == "conflict"
    waiting = bob.sync()
    unchanged(team, bob, waiting.status, before, upstream)
    assert "tried again after" in waiting.message
    assert agent.runs == 1

    # A changed role is a different repair: it gets its own attempts at once.
    other = Agent(tmp_path, f'exec /bin/sh "{EXAMPLE}"', name="other")
    assert with_role(team.bob, other.role).sync().status == "pushed"
    assert other.runs == 1 and agent.runs == 1


def test_without_a_repair_role_a_conflict_waits_for_a_person(team: Team) -> None:
    _local, upstream = conflict(team)
    before = snapshot(team.bob.path)
    result = team.bob.sync()
    unchanged(team, team.bob, result.status, before, upstream)
    assert "repair" not in result.message
    assert not (team.bob.state_dir / "roots" / "bob" / "repair.json").exists()


def test_a_clean_valid_merge_never_runs_the_repair_role(team: Team, tmp_path: Path) -> None:
    agent = Agent(tmp_path, f'exec /bin/sh "{EXAMPLE}"')
    bob = with_role(team.bob, agent.role)
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    commit(bob.path, {"MEMORY_b.md": "# B\n"})
    result = bob.sync()
    assert result.status == "pushed", result.message
    assert "repair" not in result.message
    assert agent.runs == 0


def test_a_clean_merge_that_is_invalid_is_repaired_on_top_of_the_merge(
    team: Team, tmp_path: Path
) -> None:
    # Both sides add the id `same`: each side is valid, the merge is not (duplicate-id).
    rename = (
        "sed 's/{#same}/{#same-pursuit}/' PURSUITS.md > p.tmp && mv p.tmp PURSUITS.md && "
        "git add PURSUITS.md && git commit -q -m 'repair: rename the pursuit id same'"
    )
    agent = Agent(tmp_path, rename)
    bob = with_role(team.bob, agent.role)
    commit(team.alice.path, {"MEMORY_a.md": "# A\n", "MEMORY.md": "# Notes\n\n- `same` a → []\n"})
    assert team.alice.sync().status == "pushed"
    local = commit(bob.path, {"PURSUITS.md": "# Pursuits\n\n## Same {#same}\n\n## Focus\n"})
    upstream = git(team.upstream, "rev-parse", "main")

    result = bob.sync()
    assert result.status == "pushed", result.message
    head = git(bob.path, "rev-parse", "HEAD")
    merge = git(bob.path, "rev-parse", "HEAD^")
    assert git(bob.path, "rev-list", "--parents", "-n1", merge).split()[1:] == [local, upstream]
    body = git(bob.path, "log", "-1", "--format=%B")
    assert body.startswith("repair: rename the pursuit id same")
    assert f"Memsync-Operation: {result.operation_id}" in body
    assert "{#same-pursuit}" in (bob.path / "PURSUITS.md").read_text()
    assert git(team.upstream, "rev-parse", "main") == head
    assert leftovers(bob) == [] and agent.runs == 1


def test_an_openai_repair_role_says_it_cannot_repair(team: Team, tmp_path: Path) -> None:
    role = OpenAIRoleSettings(
        "chatty", "http://127.0.0.1:9/v1", "m", None, timeout=timedelta(seconds=5)
    )
    bob = with_role(team.bob, role)
    _local, upstream = conflict(team)
    before = snapshot(bob.path)
    result = bob.sync()
    unchanged(team, bob, result.status, before, upstream)
    assert "executor: command" in result.message


def test_a_dry_run_does_not_run_the_repair_role(team: Team, tmp_path: Path) -> None:
    agent = Agent(tmp_path, f'exec /bin/sh "{EXAMPLE}"')
    bob = with_role(team.bob, agent.role)
    conflict(team)
    before = snapshot(bob.path)
    result = bob.sync(dry_run=True)
    assert result.status == "conflict" and "not run" in result.message
    assert snapshot(bob.path) == before and agent.runs == 0


WRONG_PARENTS = {
    "drops the upstream": (
        f"git merge --abort && printf '{BOB_MEMORY}Mine only.\\n' > MEMORY.md && "
        "git commit -qam 'keep only mine'"
    ),
    # An octopus would carry an unvalidated history (say, a forged `prune:` commit) along.
    "brings a third parent": (
        f"printf '{ALICE_MEMORY}' > MEMORY.md && git add MEMORY.md && "
        "extra=$(git commit-tree -m 'prune: checkpoint' $(git mktree </dev/null)) && "
        "tree=$(git write-tree) && "
        "top=$(git commit-tree -p HEAD -p MERGE_HEAD -p $extra -m 'repair' $tree) && "
        "git merge --abort && git reset -q --hard $top"
    ),
}


@pytest.mark.parametrize("body", WRONG_PARENTS.values(), ids=WRONG_PARENTS.keys())
def test_a_repair_with_other_parents_than_head_and_upstream_is_refused(
    team: Team, tmp_path: Path, body: str
) -> None:
    agent = Agent(tmp_path, body)
    bob = with_role(team.bob, agent.role)
    _local, upstream = conflict(team)
    before = snapshot(bob.path)
    result = bob.sync()
    unchanged(team, bob, result.status, before, upstream)
    assert "parents are the local head and the upstream commit" in result.message


def test_a_repair_of_two_commits_is_refused(team: Team, tmp_path: Path) -> None:
    body = (
        f"printf '{ALICE_MEMORY}' > MEMORY.md && git add MEMORY.md && {COMMIT} && "
        "printf '# B\\n' > MEMORY_b.md && git add -f MEMORY_b.md && git commit -qm more"
    )
    agent = Agent(tmp_path, body)
    bob = with_role(team.bob, agent.role)
    _local, upstream = conflict(team)
    before = snapshot(bob.path)
    result = bob.sync()
    unchanged(team, bob, result.status, before, upstream)
    assert [p.code for p in result.problems] == ["too-many-commits"]


def test_the_role_is_told_the_conflict_and_the_same_conflict_gives_the_same_prompt(
    team: Team, tmp_path: Path
) -> None:
    saved = tmp_path / "prompts"
    saved.mkdir()
    agent = Agent(tmp_path, f'cat > "{saved}/$MEMSYNC_OPERATION_ID.md"; exit 3')
    bob = with_role(team.bob, agent.role, repair_backoff=timedelta(0))
    conflict(team)
    assert bob.sync().status == "conflict"
    assert bob.sync().status == "conflict"
    prompts = [p.read_text() for p in sorted(saved.iterdir())]
    assert len(prompts) == 2 and prompts[0] == prompts[1]  # the prompt is part of the key
    prompt = prompts[0]
    assert "MEMORY.md" in prompt and "conflict markers" in prompt
    assert "git commit --no-edit" in prompt and "exactly one commit" in prompt
    assert "insight_logs/*.md" in prompt  # what it may change: the synchronized paths
    assert str(bob.state_dir) not in prompt and str(bob.path) not in prompt
