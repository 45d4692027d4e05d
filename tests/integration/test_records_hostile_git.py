"""Listing and shape records against the real git binary, for names that fold together
(sharp s and ss, the Kelvin sign and k, dotless and dotted i, NFC and NFD, an ignorable
code point), hold a newline or a byte that is not UTF-8, or are long: process after
process, each reading the records the last one left, the gate decides on a tree exactly
what it decides from git's own listing with no record at all (review of issue 18)."""

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
from memsync.validators.shapestore import ShapeStore
from memsync.validators.tree import TreeView
from tests.conftest import PROCESS_EXAMPLES
from tests.helpers import git
from tests.integration.test_git_trees import full_listing, make_commit, well_formed

NAMES = [
    "MEMORY.md",
    "memory.md",
    "\u00df.md",  # sharp s: folds to "ss"
    "ss.md",
    "\u212a",  # the Kelvin sign: folds to "k"
    "k",
    "\u0131",  # dotless i
    "I",
    "\u0130",  # dotted capital I
    "\u00e9.md",
    "e\u0301.md",
    "a\u200c",  # an HFS+-ignorable: folds to "a"
    "a",
    "a\nb",
    "\udcff.md",  # the byte 0xff, as git's paths decode it
    "x" * 200,
]
MODES = ["100644", "100644", "100644", "100755", "120000"]
files = st.dictionaries(
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join),
    st.tuples(st.sampled_from(MODES), st.sampled_from([b"# one\n", b"two\n", b"\xff"])),
    max_size=10,
)


@PROCESS_EXAMPLES
@given(st.lists(files, min_size=2, max_size=4))
def test_fresh_processes_over_records_of_hostile_names_decide_as_without_records(
    trees: list[dict[str, tuple[str, bytes]]],
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        git(Path(tmp), "init", "-q", "-b", "main", str(repo))
        commits: list[str] = []
        for tree in trees:
            commits.append(make_commit(repo, well_formed(tree), commits[-1] if commits else None))
        policy, graph = SyncPolicy(), default_graph_validator()
        for turn, (old, new) in enumerate(itertools.pairwise(commits)):
            gitmemo.forget()
            SHAPES.clear()
            plain = TreeView(full_listing(repo, new), GitBlobs(Git(repo)))
            want = validate_tree(plain, policy, graph)  # no record, no kept shape
            gitmemo.forget()  # a fresh process over the records the last one left
            SHAPES.clear()
            listings = ListingStore.open(Path(tmp) / "listings")
            shapes = ShapeStore.open(Path(tmp) / "shapes")
            assert listings is not None and shapes is not None
            listingstore.RECORDS, SHAPES.records = listings, shapes
            try:
                box = Git(repo)
                assert (
                    validate_tree(box.tree_view(old), policy, graph).problems
                    == validate_tree(
                        TreeView(full_listing(repo, old), GitBlobs(Git(repo))), policy, graph
                    ).problems
                )
                assert validate_tree(box.tree_view(new), policy, graph) == want
                if turn:  # the start tree's listing and shape: the last process's records
                    assert listings.loads >= 1 and shapes.loads >= 1
            finally:
                listingstore.RECORDS, SHAPES.records = None, None
                SHAPES.clear()
