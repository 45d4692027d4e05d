"""The prefetch: a cycle fetches the branch the previous cycle fetched while git status runs;
a wrong guess is dropped, and no fetch outlives its cycle."""

from __future__ import annotations

import json
import threading

from tests.conftest import Team
from tests.helpers import commit, git, is_ancestor, push, write


def _fetch_branch(state_dir_file: object) -> object:
    return json.loads(state_dir_file.read_text()).get("fetch_branch")  # type: ignore[attr-defined]


def test_the_fetched_branch_is_remembered_and_prefetched(team: Team) -> None:
    bob = team.bob
    assert bob.sync().status == "current"
    state = bob.state_dir / "roots" / bob.name / "state.json"
    assert _fetch_branch(state) == "main"

    commit(team.alice.path, {"MEMORY_a.md": "# A\n"}, "alice")
    assert team.alice.sync().status == "pushed"
    got = bob.sync()  # fetched beside the status this time
    assert got.status == "synced", got.message
    assert git(bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
    assert (bob.path / "MEMORY_a.md").read_text() == "# A\n"


def test_a_wrong_guess_is_dropped_and_the_right_branch_fetched(team: Team) -> None:
    bob = team.bob
    assert bob.sync().status == "current"  # remembers `main`
    # The upstream grows a branch `other` one commit ahead; bob's branch now tracks it.
    alice = team.alice.path
    git(alice, "checkout", "-q", "-b", "other")
    ahead = commit(alice, {"MEMORY_other.md": "# Other\n"}, "on other")
    push(alice, "HEAD:refs/heads/other")
    git(bob.path, "fetch", "-q", "origin")
    git(bob.path, "branch", "-q", "--set-upstream-to=origin/other")
    # `main` moves too: a cycle that took the prefetched `main` would publish this instead.
    git(alice, "checkout", "-q", "main")
    commit(alice, {"MEMORY_main.md": "# Main\n"}, "on main")
    push(alice)
    git(alice, "checkout", "-q", "other")
    again = commit(alice, {"MEMORY_other2.md": "# Other 2\n"}, "on other again")
    push(alice, "HEAD:refs/heads/other")

    got = bob.sync(no_push=True)
    assert got.status == "synced", got.message
    assert git(bob.path, "rev-parse", "HEAD") == again
    assert is_ancestor(bob.path, ahead, "HEAD")
    assert not (bob.path / "MEMORY_main.md").exists()
    state = bob.state_dir / "roots" / bob.name / "state.json"
    assert _fetch_branch(state) == "other"


def test_an_early_verdict_waits_for_the_prefetch(team: Team) -> None:
    bob = team.bob
    assert bob.sync().status == "current"
    write(bob.path, {"MEMORY.md": "# User Context\n\nunsaved edit\n"})
    got = bob.sync()
    assert got.status == "dirty", got.message
    alive = [t for t in threading.enumerate() if t.name == "memsync-prefetch"]
    assert alive == []
