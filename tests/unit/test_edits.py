"""The local edits that block a publication (`roots.edits`): tracked changes, and untracked
files only when memsync synchronizes them (the path rules say so); the rules load only for
an untracked file (issue 18: a cold `status` of a tree without one never loads them)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.roots.edits import blocking_changes
from memsync.transports.workstate import StatusEntry
from memsync.validators.paths import check_name
from memsync.validators.policy import SyncPolicy

POLICY = SyncPolicy(max_file_size=1 << 20)
paths = st.sampled_from(
    ["MEMORY.md", "MEMORY_a.md", "notes.txt", ".runtime/x", "a/MEMORY_b.md", "b.md", "MEMORY_c.md"]
)
entries = st.lists(
    st.builds(StatusEntry, st.sampled_from([".M", "M.", "A.", "D.", "??", "UU", "MM"]), paths),
    max_size=8,
)


@given(entries)
def test_blocking_changes_are_tracked_changes_and_synchronized_untracked_files(
    listed: list[StatusEntry],
) -> None:
    want = {e.path for e in listed if not e.untracked or check_name(e.path, POLICY) is None}
    assert blocking_changes(iter(listed), POLICY) == tuple(sorted(want))


def test_an_untracked_file_memsync_ignores_does_not_block() -> None:
    listed = [StatusEntry("??", "notes.txt"), StatusEntry("??", "MEMORY_new.md")]
    assert blocking_changes(listed, POLICY) == ("MEMORY_new.md",)
    assert blocking_changes([StatusEntry(".M", "notes.txt")], POLICY) == ("notes.txt",)
