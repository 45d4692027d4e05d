"""Provenance: an item's introducing and last-changing commits, its author, signer and
memsync's admission record, from real repositories with real commits."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from memsync.config.sections import CommandRoleSettings
from memsync.cycles.roles import CommandRole
from memsync.cycles.runlog import RunLog
from memsync.cycles.turn import CycleSettings, run_cycle
from memsync.errors import UnsafeRepoConfig
from memsync.roots.layout import RootLayout
from memsync.roots.provenance import UNSIGNED, UnknownItem, item_provenance
from memsync.roots.revocation import revert_items
from memsync.transports.git import Git
from tests.conftest import Member, Team
from tests.helpers import commit, git, push, snapshot, write

BASE = (
    "# User Context {#user}\n\nFacts.\n\n"
    "- `tabs` prefers tabs → [dep:user]\n\n"
    "# Tools {#tools}\n\n- `shell` uses bash → []\n"
)


def commit_as(root: Path, who: str, files: dict[str, str | None], message: str = "edit") -> str:
    """A commit authored by `who` (the committer stays the test's)."""
    write(root, files)
    git(root, "add", "-A", "--", *files)
    git(root, "commit", "-q", f"--author={who.title()} <{who}@example.invalid>", "-m", message)
    return git(root, "rev-parse", "HEAD")


def _provenance(member: Member, item: str):  # type: ignore[no-untyped-def]
    git_box = Git(member.path)
    head = git(member.path, "rev-parse", "HEAD")
    return item_provenance(git_box, RootLayout.for_root(member.state_dir, member.name), head, item)


def test_introduced_and_last_changed_after_edits_and_a_move(team: Team) -> None:
    alice = team.alice.path
    first = commit_as(alice, "alice", {"MEMORY.md": BASE}, "alice: tabs")
    edited = commit_as(
        alice, "bob", {"MEMORY.md": BASE.replace("prefers tabs", "prefers tabs, width 4")}
    )
    found = _provenance(team.alice, "tabs")
    assert (found.file, found.line) == ("MEMORY.md", 5)
    assert found.introduced.commit == first
    assert found.introduced.author_name == "Alice"
    assert found.last_changed.commit == edited
    assert found.last_changed.author_name == "Bob"
    assert found.introduced.signer == UNSIGNED
    # moved into a detail file, and edited on the way: still introduced by the first commit
    moved_memory = (
        "# User Context {#user}\n\nFacts.\n\n## Style {F#style}\n\n"
        "# Tools {#tools}\n\n- `shell` uses bash → []\n"
    )
    moved = commit(
        alice,
        {
            "MEMORY.md": moved_memory,
            "MEMORY_style.md": "- `tabs` prefers tabs, width 8 → [dep:user]\n",
        },
        "move tabs",
    )
    found = _provenance(team.alice, "tabs")
    assert (found.file, found.line) == ("MEMORY_style.md", 1)
    assert found.introduced.commit == first
    assert found.last_changed.commit == moved
    # an untouched neighbour: introduced and last changed by the same commit
    shell = _provenance(team.alice, "shell")
    assert shell.introduced.commit == shell.last_changed.commit == first


def test_removed_then_added_again_is_introduced_by_the_readding(team: Team) -> None:
    alice = team.alice.path
    commit(alice, {"MEMORY.md": BASE})
    commit(alice, {"MEMORY.md": BASE.replace("- `tabs` prefers tabs → [dep:user]\n\n", "")})
    again = commit(alice, {"MEMORY.md": BASE})
    found = _provenance(team.alice, "tabs")
    assert found.introduced.commit == again == found.last_changed.commit


def test_an_item_a_sync_admitted_shows_its_journal_record(team: Team) -> None:
    bob = team.bob.path
    introduced = commit(bob, {"MEMORY.md": BASE}, "bob: tabs")
    push(bob)
    result = team.alice.sync()
    assert result.status == "synced", result.message
    found = _provenance(team.alice, "tabs")
    assert found.introduced.commit == introduced
    admission = found.introduced.admission
    assert admission is not None
    assert (admission.kind, admission.relation) == ("sync", "admitted")
    assert admission.operation_id == result.operation_id


def test_unknown_item_is_an_error(team: Team) -> None:
    commit(team.alice.path, {"MEMORY.md": BASE})
    with pytest.raises(UnknownItem):
        _provenance(team.alice, "nope")


def test_an_autocommit_shows_memsync_made_it(team: Team) -> None:
    alice = team.alice
    alice.settings = replace(alice.settings, autocommit=True)
    write(alice.path, {"MEMORY.md": BASE})
    result = alice.sync()
    assert result.status in ("pushed", "synced"), result.message
    found = _provenance(alice, "tabs")
    admission = found.introduced.admission
    assert admission is not None
    assert (admission.kind, admission.relation, admission.phase) == (
        "autocommit",
        "made",
        "committed",
    )


EDGED = (
    "# User Context {#user}\n\nFacts.\n\n"
    "- `tabs` prefers tabs → [dep:user]\n\n"
    "# Tools {#tools} → [rel:tabs]\n\n- `shell` uses bash → [dep:tabs, rel:user]\n"
)


def test_revert_removes_the_items_and_their_edges_through_the_gate(team: Team) -> None:
    alice = team.alice
    commit(alice.path, {"MEMORY.md": EDGED})
    head = git(alice.path, "rev-parse", "HEAD")
    done = revert_items(alice.settings, alice.state_dir, head, ["tabs"], "remove tabs")
    assert done.status == "landed", done.message
    assert done.removed == ("tabs",)
    assert git(alice.path, "rev-parse", "HEAD") == done.commit
    assert git(alice.path, "status", "--porcelain") == ""
    text = (alice.path / "MEMORY.md").read_text()
    assert "`tabs`" not in text
    assert "# Tools {#tools} → []\n" in text  # its edge to tabs went, the heading stayed
    assert "- `shell` uses bash → [rel:user]" in text
    # the commit says what it removed and which operation made it
    body = git(alice.path, "log", "-1", "--format=%B")
    assert body.startswith("revert: remove tabs") and "- `tabs`" in body
    shell = _provenance(alice, "shell")
    admission = shell.last_changed.admission
    assert admission is not None
    assert (admission.kind, admission.relation) == ("revert", "made")
    assert admission.operation_id == done.operation_id
    assert shell.introduced.admission is None  # a person's commit, made outside memsync
    # a person's commit that copies the operation's trailer is not memsync's
    forged = commit(
        alice.path,
        {"MEMORY.md": text + "- `later` more → []\n"},
        f"revert: not really\n\nMemsync-Operation: {done.operation_id}\n",
    )
    later = _provenance(alice, "later")
    assert later.introduced.commit == forged and later.introduced.admission is None


def test_revert_is_refused_by_the_gate_and_leaves_the_root_as_it_was(team: Team) -> None:
    alice = team.alice
    # committed past memsync: a dangling edge the gate refuses in any tree it admits
    commit(alice.path, {"MEMORY.md": EDGED + "- `odd` points nowhere → [dep:missing]\n"})
    before = snapshot(alice.path)
    done = revert_items(alice.settings, alice.state_dir, before.head, ["tabs"], "remove tabs")
    assert done.status == "refused", done.message
    assert "dangling-edge" in {p.code for p in done.problems}
    assert snapshot(alice.path) == before


def test_revert_from_a_head_that_moved_lands_nothing(team: Team) -> None:
    alice = team.alice
    listed = commit(alice.path, {"MEMORY.md": EDGED})
    commit(alice.path, {"MEMORY.md": EDGED + "- `more` another → [dep:user]\n"})
    before = snapshot(alice.path)
    done = revert_items(alice.settings, alice.state_dir, listed, ["tabs"], "remove tabs")
    assert done.status == "failed" and "list the items again" in done.message
    assert snapshot(alice.path) == before


def test_a_roots_config_cannot_hide_who_changed_a_line(team: Team) -> None:
    """`blame.ignoreRevsFile` in the root's config does not move the blame to an older
    commit (the box refuses such a config today; provenance also switches it off)."""
    alice = team.alice.path
    commit_as(alice, "alice", {"MEMORY.md": BASE})
    edited = commit_as(alice, "mallory", {"MEMORY.md": BASE.replace("tabs →", "tabs, always →")})
    (alice / ".git" / "skip-revs").write_text(f"{edited}\n")
    git(alice, "config", "blame.ignoreRevsFile", ".git/skip-revs")
    try:
        found = _provenance(team.alice, "tabs")
    except UnsafeRepoConfig:
        return  # the git box's guard refuses such a root outright: no answer, no lie
    assert found.last_changed.commit == edited
    assert found.last_changed.author_name == "Mallory"


PRUNED = (
    "# User Context\n\n# Auth {#auth}\n\n"
    "- `login` short tokens → []\n"
    "- `refresh` rotating tokens → [dep:login]\n"
)


def test_a_line_a_prune_changed_names_the_turn_its_role_and_executor(
    team: Team, tmp_path: Path
) -> None:
    bob = team.bob
    commit(bob.path, {"MEMORY.md": PRUNED})
    script = tmp_path / "pruner.sh"
    without = "# User Context\n\n# Auth {#auth}\n\n- `refresh` rotating tokens → []\n"
    script.write_text(
        "#!/bin/sh\nset -eu\ncat > /dev/null\n"
        f"printf '%s' '{without}' > MEMORY.md\ngit add MEMORY.md\n"
        "git -c user.name=pruner -c user.email=pruner@localhost commit -qm 'prune: login'\n"
    )
    script.chmod(0o755)
    role = CommandRole(
        CommandRoleSettings("pruner", (str(script),), timedelta(seconds=30)),
        runlog=RunLog.for_root(bob.state_dir, bob.name, "prune"),
    )
    prune = CycleSettings("prune", True, threshold=1)
    result = run_cycle(bob.settings, prune, role, bob.state_dir, force=True)
    assert result.status == "landed", result.message
    found = _provenance(bob, "refresh")
    assert found.last_changed.commit == result.commit
    admission = found.last_changed.admission
    assert admission is not None
    assert (admission.kind, admission.relation, admission.operation_id) == (
        "prune",
        "made",
        result.operation_id,
    )
    assert (admission.role, admission.executor) == ("pruner", "command")
    assert found.introduced.admission is None
