"""`sync.autocommit`: edits become one validated commit through the admission
transaction, without touching the work tree; invalid edits are kept and reported; a staged
version memsync did not commit (the index differs from both HEAD and the work tree) stops
it with the index untouched."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from memsync.roots.cycle import SyncOptions, sync_root
from tests.conftest import Team
from tests.helpers import commit, git, snapshot


def _sync(team: Team) -> object:
    settings = replace(team.bob.settings, autocommit=True)
    return sync_root(settings, team.bob.state_dir, SyncOptions())


def test_edits_are_committed_validated_and_pushed_with_the_bytes_untouched(team: Team) -> None:
    bob = team.bob.path
    (bob / "MEMORY.md").write_text("# User Context\n\nedited by an agent\n")
    (bob / "MEMORY_new.md").write_text("# New\n\na new detail file\n")
    (bob / "notes.txt").write_text("my own scratch file, never synchronized\n")
    before = {p: (bob / p).read_bytes() for p in ("MEMORY.md", "MEMORY_new.md", "notes.txt")}
    result = _sync(team)
    assert result.status == "pushed", result.message  # type: ignore[attr-defined]
    assert "autocommitted 2 file(s)" in result.message  # type: ignore[attr-defined]
    assert {p: (bob / p).read_bytes() for p in before} == before
    assert git(bob, "status", "--porcelain") == ""
    subject = git(team.upstream, "log", "-1", "--format=%s", "main")
    assert subject == "memsync: autocommit 2 file(s)"
    shipped = git(team.upstream, "show", "--name-only", "--format=", "main").split()
    assert sorted(shipped) == ["MEMORY.md", "MEMORY_new.md"]


def test_invalid_edits_are_kept_and_reported_dirty(team: Team) -> None:
    bob = team.bob.path
    head = git(bob, "rev-parse", "HEAD")
    (bob / "MEMORY_bad.md").write_bytes(b"# Bad\n\n\xff\xfe not utf-8\n")
    result = _sync(team)
    assert result.status == "dirty"  # type: ignore[attr-defined]
    assert [p.code for p in result.problems] == ["not-utf8"]  # type: ignore[attr-defined]
    assert git(bob, "rev-parse", "HEAD") == head
    assert (bob / "MEMORY_bad.md").read_bytes() == b"# Bad\n\n\xff\xfe not utf-8\n"
    assert git(bob, "rev-parse", "main") == head


def test_without_autocommit_edits_stay_dirty(team: Team) -> None:
    (team.bob.path / "MEMORY.md").write_text("# User Context\n\nedited\n")
    assert team.bob.sync().status == "dirty"


def _staged(root: Path, path: str) -> str:
    """The index's entry for `path` (`git ls-files -s`), empty when it has none."""
    return git(root, "ls-files", "-s", "--", path)


def test_a_staged_version_changed_again_in_the_work_tree_is_never_reset(team: Team) -> None:
    """The index and the work tree are the person's: version A staged, version B in the
    work tree. Committing B would drop A (it exists only in the index): nothing is
    committed, the index is not touched, the verdict says why."""
    bob = team.bob.path
    head = git(bob, "rev-parse", "HEAD")
    (bob / "MEMORY.md").write_text("# User Context\n\nversion A, staged\n")
    git(bob, "add", "MEMORY.md")
    staged = _staged(bob, "MEMORY.md")
    (bob / "MEMORY.md").write_text("# User Context\n\nversion B, in the work tree\n")
    (bob / "MEMORY_other.md").write_text("# Other\n\nan unrelated edit\n")
    index = (bob / ".git" / "index").read_bytes()
    result = _sync(team)
    assert result.status == "dirty", result.message  # type: ignore[attr-defined]
    assert "staged" in result.message and "MEMORY.md" in result.message  # type: ignore[attr-defined]
    assert result.files == ("MEMORY.md",)  # type: ignore[attr-defined]
    assert _staged(bob, "MEMORY.md") == staged
    assert git(bob, "show", ":MEMORY.md") == "# User Context\n\nversion A, staged"
    assert (bob / "MEMORY.md").read_text() == "# User Context\n\nversion B, in the work tree\n"
    assert (bob / ".git" / "index").read_bytes() == index
    assert git(bob, "rev-parse", "HEAD") == head
    assert git(team.upstream, "rev-parse", "main") == head


@pytest.mark.parametrize(
    "scene",
    ["new-file-staged-then-edited", "deletion-staged-then-file-back", "staged-then-deleted"],
)
def test_every_staged_version_of_its_own_stops_autocommit(team: Team, scene: str) -> None:
    bob = team.bob.path
    head = git(bob, "rev-parse", "HEAD")
    (bob / "PURSUITS.md").write_text("# Pursuits\n\nan ordinary unstaged edit\n")
    if scene == "new-file-staged-then-edited":
        path = "MEMORY_new.md"
        (bob / path).write_text("# New\n\nstaged\n")
        git(bob, "add", "-f", path)
        (bob / path).write_text("# New\n\nedited after staging\n")
    elif scene == "deletion-staged-then-file-back":
        path = "MEMORY.md"
        git(bob, "rm", "-q", "--cached", path)
    else:
        path = "MEMORY.md"
        (bob / path).write_text("# User Context\n\nstaged\n")
        git(bob, "add", path)
        (bob / path).unlink()
    before = snapshot(bob)
    result = _sync(team)
    assert result.status == "dirty", result.message  # type: ignore[attr-defined]
    assert result.files == (path,)  # type: ignore[attr-defined]
    assert snapshot(bob) == before
    assert git(bob, "rev-parse", "HEAD") == head


@pytest.mark.parametrize("scene", ["staged-equals-work-tree", "staged-deletion", "unstaged"])
def test_staged_edits_equal_to_the_work_tree_are_committed_and_stay_staged(
    team: Team, scene: str
) -> None:
    """When the index holds nothing of its own (each entry is HEAD's or the work tree's),
    autocommit commits the work tree and the index ends at that commit."""
    bob = team.bob.path
    (bob / "MEMORY_new.md").write_text("# New\n\nstaged as it is\n")
    if scene == "staged-equals-work-tree":
        git(bob, "add", "-f", "MEMORY_new.md")
    (bob / "PURSUITS.md").write_text("# Pursuits\n\nunstaged\n")
    if scene == "staged-deletion":
        commit(bob, {"MEMORY_old.md": "# Old\n"})
        git(bob, "rm", "-q", "MEMORY_old.md")
    result = _sync(team)
    assert result.status == "pushed", result.message  # type: ignore[attr-defined]
    assert git(bob, "status", "--porcelain") == ""
    assert git(bob, "show", ":MEMORY_new.md") == "# New\n\nstaged as it is"
    shipped = git(team.upstream, "show", "main:MEMORY_new.md")
    assert shipped == "# New\n\nstaged as it is"
    assert git(team.upstream, "ls-tree", "--name-only", "main", "MEMORY_old.md") == ""
