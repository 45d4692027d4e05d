"""The status memo's rule: a quiet daemon cycle reuses the last status only when the watcher
vouches, heard nothing since, and every file git reads besides the work tree is unchanged."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from memsync.config.schema import Sync
from memsync.roots.statusmemo import MAX_AGE, Marks, Seen, branch_ref, marks, may_reuse
from memsync.transports.workstate import WorkState
from tests.kit import git

STATE = WorkState("main", "a" * 40, "origin/main", 0, 0, ())
stamps = st.one_of(st.none(), st.tuples(st.integers(0, 9), st.integers(0, 9), st.integers(0, 9)))
files = st.tuples(*(stamps,) * 6)
tokens = st.one_of(st.none(), st.tuples(st.integers(1, 3), st.integers(0, 3)))
refs = st.sampled_from([None, "refs/heads/main", "refs/heads/other"])


@given(tokens, refs, files, tokens, refs, files, st.floats(-5, 2 * MAX_AGE))
def test_a_status_is_reused_only_when_every_mark_is_the_same_and_young(
    watch: object,
    ref: str | None,
    before: tuple[object, ...],
    watch_now: object,
    ref_now: str | None,
    now: tuple[object, ...],
    age: float,
) -> None:
    last = Seen(Marks(watch, ref, before), STATE, 100.0)  # type: ignore[arg-type]
    current = Marks(watch_now, ref_now, now)  # type: ignore[arg-type]
    reused = may_reuse(last, current, 100.0 + age)
    same = watch == watch_now and ref == ref_now and before == now
    age = (100.0 + age) - 100.0  # the age the clock can show (a tiny one rounds away)
    assert reused == (same and watch is not None and ref is not None and 0 <= age <= MAX_AGE)


@given(tokens, refs, files)
def test_nothing_remembered_is_never_reused(
    watch: object, ref: str | None, now: tuple[object, ...]
) -> None:
    assert not may_reuse(None, Marks(watch, ref, now), 0.0)  # type: ignore[arg-type]


def test_marks_change_with_every_file_git_reads_besides_the_work_tree(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "MEMORY.md").write_text("# M\n")
    git(tmp_path, "add", "MEMORY.md")
    git(tmp_path, "commit", "-q", "-m", "one")
    git_dir = tmp_path / ".git"
    assert branch_ref(git_dir) == "refs/heads/main"
    first = marks(git_dir, ("w", 1))
    assert marks(git_dir, ("w", 1)) == first  # nothing changed, nothing differs
    assert marks(git_dir, ("w", 2)) != first  # the watcher heard something
    changes = (
        lambda: git(tmp_path, "update-index", "--chmod=+x", "MEMORY.md"),  # the index
        lambda: git(tmp_path, "commit", "-q", "--allow-empty", "-m", "two"),  # the branch ref
        lambda: git(tmp_path, "pack-refs", "--all"),  # packed-refs (and the loose ref goes)
        lambda: git(tmp_path, "config", "status.showUntrackedFiles", "no"),  # config
        lambda: (git_dir / "info" / "exclude").write_text("*.md\n"),  # info/exclude
        lambda: git(tmp_path, "checkout", "-q", "-b", "other"),  # HEAD
    )
    for change in changes:
        before = marks(git_dir, ("w", 1))
        change()
        assert marks(git_dir, ("w", 1)) != before, change
    git(tmp_path, "checkout", "-q", "--detach")
    assert branch_ref(git_dir) is None
    assert not may_reuse(Seen(marks(git_dir, 1), STATE, 0.0), marks(git_dir, 1), 0.0)


def test_a_default_poll_can_reuse_the_status_taken_a_poll_before() -> None:
    # The default interval, at its longest jitter (a tenth), and a few polls more: the
    # poll of a quiet watched root is the fetch alone, not a fetch and a status.
    longest = Sync().interval.total_seconds() * 1.1
    assert 4 * longest <= MAX_AGE
