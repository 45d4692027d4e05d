"""Listing and shape records against the real git binary, for names that fold together
(sharp s and ss, the Kelvin sign and k, dotless and dotted i, NFC and NFD, an ignorable
code point), hold a newline or a byte that is not UTF-8, or are long: process after
process, each reading the records the last one left, the gate decides on a tree exactly
what it decides from git's own listing with no record at all (review of issue 18)."""

from __future__ import annotations

import itertools
import os
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
from tests.integration.test_git_trees import full_listing, well_formed

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


def _commit(repo: Path, tree: dict[str, tuple[str, bytes]], parent: str | None) -> str:
    """A commit of `tree` (paths NUL-separated: a newline is part of a name)."""
    index = repo.parent / "scratch-index"
    index.unlink(missing_ok=True)
    contents = sorted({data for _mode, data in tree.values()})
    scratch = [repo.parent / f"scratch-blob-{i}" for i in range(len(contents))]
    for file, data in zip(scratch, contents, strict=True):
        file.write_bytes(data)
    oids: dict[bytes, str] = {}
    if contents:
        blob_oids = git(repo, "hash-object", "-w", "--no-filters", "--", *map(str, scratch))
        oids = dict(zip(contents, blob_oids.split(), strict=True))
    info = b"".join(
        b"%s %s\t%s\0"
        % (mode.encode(), oids[data].encode(), path.encode("utf-8", "surrogateescape"))
        for path, (mode, data) in tree.items()
    )
    saved = dict(os.environ)
    os.environ["GIT_INDEX_FILE"] = str(index)
    try:
        if info:
            git(repo, "update-index", "-z", "--add", "--index-info", input=info)
        written = git(repo, "write-tree")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return git(repo, "commit-tree", written, "-m", "t", *(["-p", parent] if parent else []))


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
            commits.append(_commit(repo, well_formed(tree), commits[-1] if commits else None))
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
