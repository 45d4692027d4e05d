"""The index's stat data (`roots/indexstat.py`) with the real git: a cycle leaves an index
that was written by a publication, a clone or a person fresh once it has been quiet, never
touches an index it already refreshed, steps aside from a person's `index.lock`, and never
changes staged content."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

from memsync.roots import indexstat
from memsync.roots.layout import RootLayout
from memsync.transports.git import Git
from tests.conftest import Team
from tests.helpers import commit, git


def rereads(root: Path) -> list[str]:
    """The tracked files `git status` would have to read again: their stat data does not
    match the index's, or they are racily clean (not older than the index itself)."""
    index_mtime = int((root / ".git" / "index").stat().st_mtime)
    found: list[str] = []
    lines = git(root, "ls-files", "--debug").splitlines()
    for at, line in enumerate(lines):
        if line.startswith(" "):
            continue
        values = dict(re.findall(r"(\w+): (\d+)", " ".join(lines[at + 1 : at + 6])))
        st = (root / line).lstat()
        recorded = (int(values["ctime"]), int(values["mtime"]), int(values["ino"]))
        if recorded != (int(st.st_ctime), int(st.st_mtime), st.st_ino) or (
            int(values["size"]) != st.st_size or int(st.st_mtime) >= index_mtime
        ):
            found.append(line)
    return found


def age(root: Path, seconds: float = 10.0) -> None:
    """Make every tracked file and the index `seconds` old, as if written back then (the
    files' ctime moves to now: their stat data no longer matches the index's)."""
    then = time.time() - seconds
    for name in git(root, "ls-files", "-z").split("\0"):
        if name:
            os.utime(root / name, (then, then))
    os.utime(root / ".git" / "index", (then, then))


def stamp(root: Path) -> indexstat.Stamp | None:
    return indexstat.stamp(root / ".git" / "index")


def layout_of(team: Team) -> RootLayout:
    return RootLayout.for_root(team.bob.state_dir, team.bob.name)


def test_after_a_publication_a_cycle_leaves_the_index_fresh_and_then_never_writes_it(
    team: Team,
) -> None:
    commit(team.alice.path, {f"MEMORY_{i}.md": f"# Note {i}\n" for i in range(20)})
    assert team.alice.sync().status == "pushed"
    assert team.bob.sync().status == "synced"  # a publication: index and files written
    age(team.bob.path)  # quiet for longer than QUIET
    assert rereads(team.bob.path)  # every file would be hashed again by each status
    assert team.bob.sync().status == "current"
    assert rereads(team.bob.path) == []
    refreshed = stamp(team.bob.path)
    for path in (team.bob.path / "MEMORY.md", team.bob.path / "PURSUITS.md"):
        path.touch()  # stat data changes, content does not: nothing is due
    assert team.bob.sync().status == "current"
    assert stamp(team.bob.path) == refreshed


def test_a_young_index_is_left_for_a_later_cycle(team: Team) -> None:
    os.utime(team.bob.path / ".git" / "index")  # just written: files may share its second
    before = stamp(team.bob.path)
    assert team.bob.sync().status == "current"
    assert stamp(team.bob.path) == before
    assert not indexstat.record_file(layout_of(team)).exists()


def test_a_persons_index_lock_is_respected_and_the_refresh_comes_later(team: Team) -> None:
    age(team.bob.path)
    lock = team.bob.path / ".git" / "index.lock"
    lock.write_bytes(b"a person's git is writing the index\n")
    before = stamp(team.bob.path)
    started = time.monotonic()
    assert team.bob.sync().status == "current"  # no error
    assert time.monotonic() - started < 30  # and no waiting for the lock
    assert lock.read_bytes() == b"a person's git is writing the index\n"  # not removed
    assert stamp(team.bob.path) == before and rereads(team.bob.path)  # skipped
    lock.unlink()  # the person's git finished
    assert team.bob.sync().status == "current"
    assert rereads(team.bob.path) == []


def test_a_dirty_root_keeps_its_index_and_the_refresh_never_changes_staged_content(
    team: Team,
) -> None:
    memory = team.bob.path / "MEMORY.md"
    memory.write_text(memory.read_text() + "\n- staged line\n")
    git(team.bob.path, "add", "-f", "MEMORY.md")
    memory.write_text(memory.read_text() + "- unstaged line\n")
    staged, unstaged = git(team.bob.path, "diff", "--cached"), git(team.bob.path, "diff")
    entries, text = git(team.bob.path, "ls-files", "-s"), memory.read_text()
    age(team.bob.path)
    index = (team.bob.path / ".git" / "index").read_bytes()
    assert team.bob.sync().status == "dirty"  # a cycle that did not end well writes nothing
    assert (team.bob.path / ".git" / "index").read_bytes() == index
    assert indexstat.refresh_when_due(Git(team.bob.path), layout_of(team))  # the refresh itself
    assert (team.bob.path / ".git" / "index").read_bytes() != index
    assert git(team.bob.path, "ls-files", "-s") == entries
    assert git(team.bob.path, "diff", "--cached") == staged
    assert git(team.bob.path, "diff") == unstaged and memory.read_text() == text
    assert rereads(team.bob.path) == ["MEMORY.md"]  # only the edited file is read again


def test_due_is_a_pure_rule() -> None:
    old = (1, 2, 10**9)
    now = old[2] + int(indexstat.QUIET * 1e9)
    assert indexstat.due(old, None, now)
    assert not indexstat.due(old, old, now)  # already left fresh by memsync
    assert not indexstat.due(old, None, now - 1)  # not quiet long enough
    assert not indexstat.due(None, None, now)  # no index
