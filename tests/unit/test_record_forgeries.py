"""Records that pass every check of their file (private, their store's head, length and
checksum: as a bug in their writer, or code that knows the format, would write them) but
do not say what their tree says are a miss, never a verdict of their own (review of issue
18's record formats).

A listing record is used when its entries hash to the tree's id; the id binds names,
modes and object ids, but a subtree named as a leaf (mode 040000 and the subtree's id)
hashes to the same id as the leaves below it, and a mode git's listing never gives
(100664: git lists every tree entry with its canonical mode) hashes to the id of a tree
written with it. Neither is a listing `git ls-tree -r` gives: a record is a listing only
when every leaf's mode is one git lists leaves with. A shape record's leaves must be the
listing's paths, each once.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from memsync.validators.collisions import FoldedTree
from memsync.validators.gate import SHAPES, TreeShape, validate_tree
from memsync.validators.listingstore import ListingStore, tree_id
from memsync.validators.shapestore import ShapeStore
from memsync.validators.tree import MODE_FILE, Entry, Listing, TreeView
from tests.unit.test_gate_incremental import POLICY, NoGraph, Told, reference
from tests.unit.test_shape_records import recording
from tests.unit.test_shape_records import tree_id as shape_tree_id

BLOB = "e69de29bb2d1d6434b8b29ae775ad8c2d48c5391"


def _listing(entries: dict[str, Entry]) -> Listing:
    listing = Listing()
    listing.update(entries)
    return listing


def _saved_then_loaded(oid: str, recorded: Listing, rows: object = None) -> Listing | None:
    with tempfile.TemporaryDirectory() as tmp:
        store = ListingStore.open(Path(tmp))
        assert store is not None
        store.save(oid, recorded)
        assert store.saves == 1
        fresh = ListingStore.open(Path(tmp))
        assert fresh is not None
        return fresh.load(oid)


def test_a_listing_naming_a_subtree_as_a_leaf_is_a_miss() -> None:
    """Tree {d/.git/config, e}: a record of {d (040000, d's tree id), e} hashes to its id
    but hides what is below d (and makes d a special file)."""
    real = _listing({"d/.git/config": Entry(MODE_FILE, 0, BLOB), "e": Entry(MODE_FILE, 0, BLOB)})
    below = tree_id(_listing({".git/config": Entry(MODE_FILE, 0, BLOB)}), 40)
    assert below is not None
    forged = _listing({"d": Entry(0o040000, 0, below), "e": Entry(MODE_FILE, 0, BLOB)})
    oid = tree_id(real, 40)
    assert oid is not None and tree_id(forged, 40) == oid  # the id cannot tell them apart
    assert _saved_then_loaded(oid, forged) is None
    assert _saved_then_loaded(oid, real) == real


@pytest.mark.parametrize("mode", [0o100664, 0o100600, 0o000000, 0o170000, 0o140000])
def test_a_listing_with_a_mode_git_never_lists_is_a_miss(mode: int) -> None:
    odd = _listing({"a.md": Entry(mode, 0, BLOB)})
    oid = tree_id(odd, 40)
    assert oid is not None
    assert _saved_then_loaded(oid, odd) is None


def test_a_delta_naming_a_subtree_as_a_leaf_is_a_miss() -> None:
    """The same through a delta: its full record is the real listing, the delta replaces
    the leaves below d with d itself."""
    base = _listing({"e": Entry(MODE_FILE, 0, BLOB)})
    real = _listing({"d/.git/config": Entry(MODE_FILE, 0, BLOB), "e": Entry(MODE_FILE, 0, BLOB)})
    below = tree_id(_listing({".git/config": Entry(MODE_FILE, 0, BLOB)}), 40)
    base_oid, oid = tree_id(base, 40), tree_id(real, 40)
    assert below is not None and base_oid is not None and oid is not None
    with tempfile.TemporaryDirectory() as tmp:
        store = ListingStore.open(Path(tmp))
        assert store is not None
        store.save(base_oid, base)
        store.save(oid, real, (base_oid, (("d", Entry(0o040000, 0, below)),)))
        assert store.deltas == 1
        fresh = ListingStore.open(Path(tmp))
        assert fresh is not None
        assert fresh.load(oid) is None


def test_a_shape_record_holding_one_leaf_twice_is_a_miss() -> None:
    """A record whose leaves are as many as the listing's paths, each one of them, but one
    twice and another never: its folded paths are not the listing's (here: no clash where
    MEMORY.md and memory.md collide). Not used: the verdict is the one from scratch."""
    files = {
        "memory.md": Entry(MODE_FILE, 1, data=b"x"),
        "MEMORY.md": Entry(MODE_FILE, 1, data=b"x"),
    }
    want = reference(TreeView(files), None)
    assert "case-collision" in {p.code for p in want}
    oid = shape_tree_id()
    folded = FoldedTree()
    folded._one = {  # (sorted, each prefix once: a table any check of its own passes)
        "memory.md": (("MEMORY.md", True), 1),
        "memory.mdx": (("MEMORY.md", True), 1),
    }
    with tempfile.TemporaryDirectory() as tmp, recording(Path(tmp)) as store:
        store.save(oid, POLICY, TreeShape(folded, TreeShape.of(files, POLICY).flagged), files)
        assert store.saves == 1
        SHAPES.clear()
        fresh = ShapeStore.open(Path(tmp))
        assert fresh is not None
        assert fresh.load(oid, POLICY, files) is None
        assert validate_tree(Told(files, oid), POLICY, NoGraph()).problems == want


@pytest.mark.parametrize("old", [b"MSTS1", b"MSTL1"])
def test_a_record_the_previous_version_wrote_is_a_miss(old: bytes) -> None:
    """A record left by the previous format (its head line) under this version's name."""
    files = {"MEMORY.md": Entry(MODE_FILE, 1, data=b"x")}
    listing = _listing({"MEMORY.md": Entry(MODE_FILE, 1, BLOB)})
    oid = tree_id(listing, 40)
    assert oid is not None
    with tempfile.TemporaryDirectory() as tmp:
        shapes, listings = ShapeStore.open(Path(tmp) / "s"), ListingStore.open(Path(tmp) / "l")
        assert shapes is not None and listings is not None
        shapes.save(oid, POLICY, TreeShape.of(files, POLICY), files)
        listings.save(oid, listing)
        for record in [*Path(tmp).glob("s/*.shape"), *Path(tmp).glob("l/*.listing")]:
            data = record.read_bytes()
            record.write_bytes(data.replace(data[:5], old, 1))
        assert ShapeStore.open(Path(tmp) / "s").load(oid, POLICY, files) is None  # type: ignore[union-attr]
        assert ListingStore.open(Path(tmp) / "l").load(oid) is None  # type: ignore[union-attr]
