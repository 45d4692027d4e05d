"""Provenance: an item's introducing and last-changing commits, its author, signer and
memsync's admission record, from real repositories with real commits."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.roots.layout import RootLayout
from memsync.roots.provenance import UNSIGNED, UnknownItem, item_provenance
from memsync.transports.git import Git
from tests.conftest import Member, Team
from tests.helpers import commit, git, push, write

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
