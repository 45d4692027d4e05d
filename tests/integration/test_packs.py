"""Fetches keep their packs (git checks every object memsync receives) and the box turns
git's automatic gc off, so the sync cycle folds them itself once there are many."""

from __future__ import annotations

from pathlib import Path

from memsync.roots import packs
from tests.conftest import Team
from tests.helpers import commit, git


def pack_count(root: Path) -> int:
    return len(list((root / ".git" / "objects" / "pack").glob("*.pack")))


def test_the_packs_fetches_leave_are_folded_and_nothing_is_lost(team: Team) -> None:
    alice, bob = team.alice, team.bob
    heads = []
    for n in range(packs.PACK_LIMIT + 3):
        commit(alice.path, {f"MEMORY_n{n}.md": f"# Note {n}\n"}, f"alice {n}")
        assert alice.sync().status == "pushed"
        got = bob.sync()
        assert got.status == "synced", got.message
        heads.append(got.head)
        assert pack_count(bob.path) <= packs.PACK_LIMIT + 1
    assert pack_count(bob.path) < packs.PACK_LIMIT  # folded at least once
    git(bob.path, "fsck", "--strict", "--no-dangling")
    assert git(bob.path, "rev-parse", "HEAD") == heads[-1]
    for head in heads:  # every commit it ever published is still there
        git(bob.path, "cat-file", "-e", f"{head}^{{commit}}")
    assert bob.sync().status == "current"


def test_a_quiet_store_is_left_alone(team: Team, tmp_path: Path) -> None:
    objects = packs.objects_dir(team.bob.path / ".git")
    assert not packs.crowded(objects)
    before = sorted(p.name for p in (objects / "pack").iterdir())
    assert team.bob.sync().status == "current"
    assert sorted(p.name for p in (objects / "pack").iterdir()) == before


def test_what_a_killed_repack_leaves_does_not_crowd_the_store(team: Team) -> None:
    """A repack killed midway (a container stopped under a fold behind `sync-now`) leaves
    its temporary packs: they are not packs a fold merges, so they never start one."""
    objects = packs.objects_dir(team.bob.path / ".git")
    for n in range(packs.PACK_LIMIT + 1):
        (objects / "pack" / f".tmp-{1000 + n}-pack-{n:040x}.pack").write_bytes(b"PACK")
        (objects / "pack" / f"tmp_pack_{n:06d}").write_bytes(b"PACK")
    assert not packs.crowded(objects)
