"""What a sync makes durable, and in which order: the `prepared` record (file and directory)
before the branch moves; the `running` record and a sync's key file lazily (their loss
after a power cut changes no decision); a candidate ref whose running record was lost is
swept by the next cycle."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from memsync.roots.layout import CANDIDATE_REFS
from tests.conftest import Team
from tests.helpers import commit, git


class Watch:
    """Every fsync this process makes: (path, what `head()` answered at that moment)."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []
        self.head: Callable[[], str] = lambda: ""


@pytest.fixture
def fsyncs(monkeypatch: pytest.MonkeyPatch) -> Watch:
    watch = Watch()
    real = os.fsync

    def watching(fd: int) -> None:
        watch.seen.append((os.readlink(f"/proc/self/fd/{fd}"), watch.head()))
        real(fd)

    monkeypatch.setattr(os, "fsync", watching)
    return watch


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_prepared_is_durable_before_the_branch_moves(team: Team, fsyncs: Watch) -> None:
    bob = team.bob
    assert bob.sync().status == "current"
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"}, "alice")
    assert team.alice.sync().status == "pushed"
    before = git(bob.path, "rev-parse", "HEAD")
    fsyncs.head = lambda: git(bob.path, "rev-parse", "refs/heads/main")
    got = bob.sync()
    fsynced = fsyncs.seen
    assert got.status == "synced", got.message
    journal_dir = bob.state_dir / "roots" / bob.name / "journal"
    # write_json fsyncs its temp file (`.<name>.<random>.tmp`) before renaming it
    open_record = str(journal_dir / "open" / f".{got.operation_id}.json.")
    # The open record was fsynced once (prepared, not running), with its directory, while
    # the branch still held the start commit.
    assert [head for path, head in fsynced if path.startswith(open_record)] == [before]
    assert before in [head for path, head in fsynced if path == str(journal_dir / "open")]
    # The settled record is durable; a sync's key file (nobody asks `done` for it) is not.
    settled = str(journal_dir / f".{got.operation_id}.json.")
    assert [p for p, _ in fsynced if p.startswith(settled)]
    assert not [p for p, _ in fsynced if p.startswith(str(journal_dir / "keys"))]
    assert list((journal_dir / "keys").iterdir())  # but it is written


def test_a_candidate_ref_without_a_record_is_swept(team: Team) -> None:
    """As after a power cut that kept a candidate ref but lost its `running` record."""
    bob = team.bob
    assert bob.sync().status == "current"
    head = git(bob.path, "rev-parse", "HEAD")
    stray = f"{CANDIDATE_REFS}20260101T000000-sync-000000000000"
    git(bob.path, "update-ref", stray, head)
    assert bob.sync().status == "current"
    assert git(bob.path, "for-each-ref", "--format=%(refname)", CANDIDATE_REFS) == ""
