"""Listing records against the real git binary: process after process, each listing the
tree it starts from from the record the last one left (or by git, on a miss) and deriving
the next tree's from it, lists exactly what `ls-tree` lists, and the gate decides on it
exactly what it decides on git's own listing, for random trees (nested directories,
executables, links, submodules, names git orders apart from a plain sort)."""

from __future__ import annotations

import itertools
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from memsync.transports import gitmemo
from memsync.transports.git import Git, GitBlobs
from memsync.validators import listingstore
from memsync.validators.gate import SHAPES, validate_tree
from memsync.validators.listingstore import ListingStore
from memsync.validators.policy import SyncPolicy
from memsync.validators.rightmemory import default_graph_validator
from memsync.validators.tree import TreeView
from tests.conftest import PROCESS_EXAMPLES
from tests.helpers import git
from tests.integration.test_git_trees import files, full_listing, make_commit, well_formed


@PROCESS_EXAMPLES
@given(st.lists(files, min_size=2, max_size=4))
def test_fresh_processes_over_listing_records_list_what_git_lists(
    trees: list[dict[str, tuple[str, bytes]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        git(Path(tmp), "init", "-q", "-b", "main", str(repo))
        commits: list[str] = []
        for tree in trees:
            commits.append(make_commit(repo, well_formed(tree), commits[-1] if commits else None))
        policy, graph = SyncPolicy(), default_graph_validator()
        loads = 0
        for turn, (old, new) in enumerate(itertools.pairwise(commits)):
            gitmemo.forget()  # a fresh process: nothing kept in memory
            SHAPES.clear()
            store = ListingStore.open(Path(tmp) / "listings")
            assert store is not None
            listingstore.RECORDS = store
            try:
                box = Git(repo)
                start = box.ls_tree(old)  # from the last process's record (after the first)
                assert dict(start) == dict(full_listing(repo, old))
                listing = box.ls_tree(new)  # derived from it, and recorded
                assert dict(listing) == dict(full_listing(repo, new))
                plain = TreeView(full_listing(repo, new), GitBlobs(Git(repo)))
                view = box.tree_view(new)
                assert validate_tree(view, policy, graph) == validate_tree(plain, policy, graph)
            finally:
                listingstore.RECORDS = None
            loads += store.loads
            assert turn == 0 or store.loads == 1, "the start tree was not read from its record"
        assert loads == len(commits) - 2
