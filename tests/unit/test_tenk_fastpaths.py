"""The one-scan shortcuts over a big tree's paths decide what the per-path loops decide:
`count_dirs` of a tree whose leaves all lie at its top, and `queue_paths` of a tree with
no queue path (issue 18: a 10k-file sync pays for what changed, not for every path)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.transports.gitmemo import count_dirs
from memsync.validators.auxpaths import QUEUE_PREFIXES, queue_paths
from memsync.validators.tree import Entry, TreeView

COMPONENTS = ("a", "b.md", "update_queue", "update_records", "x", "update_queue.md", "é")
paths = st.lists(
    st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=3).map("/".join),
    max_size=12,
    unique=True,
)


def _dirs(listed: list[str]) -> dict[str, int]:
    dirs: dict[str, int] = {}
    for path in listed:
        parts = path.split("/")
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            dirs[prefix] = dirs.get(prefix, 0) + 1
    return dirs


@given(paths)
def test_count_dirs_counts_every_leaf_under_every_directory(listed: list[str]) -> None:
    assert count_dirs(listed) == _dirs(listed)
    assert count_dirs(dict.fromkeys(listed, Entry(0o100644, 1, "1" * 40))) == _dirs(listed)


@given(paths)
def test_queue_paths_are_the_sorted_paths_under_the_queue_prefixes(listed: list[str]) -> None:
    tree = TreeView(dict.fromkeys(listed, Entry(0o100644, 1, "1" * 40)))
    assert queue_paths(tree) == sorted(p for p in listed if p.startswith(QUEUE_PREFIXES))
