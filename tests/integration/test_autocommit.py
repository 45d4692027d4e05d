"""`sync.autocommit`: edits become one validated commit through the admission
transaction, without touching the work tree; invalid edits are kept and reported."""

from __future__ import annotations

from dataclasses import replace

from memsync.roots.cycle import SyncOptions, sync_root
from tests.conftest import Team
from tests.helpers import git


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
