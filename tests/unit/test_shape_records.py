"""Tree shape records never change the gate's verdict: a fresh process (no shape in memory)
that reads the recorded shape of the tree it starts from, derives the next tree's from it
or reads that tree's own, gives exactly the verdict computed from scratch (every problem,
in order), for `validate_tree` and `validate_changes`; and a record that is corrupt,
truncated, foreign, not private, or another tree's cannot make a refused tree pass.
"""

from __future__ import annotations

import itertools
import json
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.transports.gittree import GitListing
from memsync.validators import shapestore
from memsync.validators.gate import SHAPES, validate_changes, validate_tree
from memsync.validators.shapestore import ShapeStore
from memsync.validators.tree import MODE_EXECUTABLE, MODE_FILE, Change, Entry, TreeView
from tests.unit.test_gate_incremental import (
    POLICY,
    NoGraph,
    Told,
    diff,
    edited,
    paths,
    reference,
    trees,
)

_IDS = itertools.count(1)


def tree_id() -> str:
    return f"{next(_IDS):040x}"


@contextmanager
def recording(directory: Path) -> Iterator[ShapeStore]:
    """Shape records in `directory`, as a CLI process has them (`cache.open_records`)."""
    store = ShapeStore.open(directory)
    assert store is not None
    SHAPES.clear()
    SHAPES.records = store
    try:
        yield store
    finally:
        SHAPES.records = None
        SHAPES.clear()


@given(
    data=st.data(),
    base=trees,
    content=st.one_of(st.none(), st.lists(paths, max_size=6)),
)
def test_fresh_processes_over_shape_records_equal_full_passes(
    data: st.DataObject, base: dict[str, Entry], content: list[str] | None
) -> None:
    new = edited(data, base)
    with tempfile.TemporaryDirectory() as tmp, recording(Path(tmp)) as store:
        base_oid, new_oid = tree_id(), tree_id()
        validate_tree(Told(base, base_oid), POLICY, NoGraph())  # a first process records
        SHAPES.clear()  # the next process: the base's shape from its record (as the series
        # check asks for the parent's tree), then the new tree's derived from it
        assert validate_tree(Told(base, base_oid), POLICY, NoGraph()).problems == reference(
            TreeView(base), None
        )
        assert store.loads == 1
        told = Told(new, new_oid, base_oid, diff(base, new))
        got = validate_tree(told, POLICY, NoGraph(), content_paths=content)
        assert got.problems == reference(TreeView(new), content)
        assert store.loads == 1
        SHAPES.clear()  # another: the new tree's own record
        again = validate_tree(Told(new, new_oid), POLICY, NoGraph())
        assert again.problems == reference(TreeView(new), None)
        assert store.loads == 2


@given(data=st.data(), base=trees)
def test_the_series_check_over_shape_records_equals_the_one_from_paths(
    data: st.DataObject, base: dict[str, Entry]
) -> None:
    """`validate_changes` looks a commit's parent tree up (`trees`): its shape comes from
    the record, and the commit's clashes are the same as from the parent's bare paths."""
    new = edited(data, base)
    changes = [
        Change("c1", path, entry, parents=("p1",), created=path not in base)
        for path, entry in diff(base, new)
    ]
    want = validate_changes(changes, NoBlobs(), POLICY, trees=lambda _c: set(base))
    with tempfile.TemporaryDirectory() as tmp, recording(Path(tmp)):
        listing = GitListing(base, tree_oid=tree_id())
        validate_tree(TreeView(base), POLICY, NoGraph())  # nothing recorded without an id
        for _ in range(2):  # recorded by the first process, read by the second
            SHAPES.clear()
            got = validate_changes(changes, NoBlobs(), POLICY, trees=lambda _c: listing)
            assert got.problems == want.problems


class NoBlobs:
    def read_many(self, oids: object) -> dict[str, bytes]:
        raise AssertionError("every changed entry carries its bytes")


GOOD = {
    "MEMORY.md": Entry(MODE_FILE, 4, data=b"# M\n"),
    "PURSUITS.md": Entry(MODE_FILE, 4, data=b"# P\n"),
}
BAD = {**GOOD, "PURSUITS.md": Entry(MODE_EXECUTABLE, 4, data=b"# P\n")}  # same paths


def shapes(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.shape"))


def test_another_trees_record_under_this_trees_id_is_not_used(tmp_path: Path) -> None:
    good, bad = tree_id(), tree_id()
    with recording(tmp_path) as store:
        assert validate_tree(Told(GOOD, good), POLICY, NoGraph()).ok
        (record,) = shapes(tmp_path)
        forged = tmp_path / record.name.replace(good, bad)
        forged.write_bytes(record.read_bytes())
        forged.chmod(0o600)
        SHAPES.clear()
        verdict = validate_tree(Told(BAD, bad), POLICY, NoGraph())
        assert [p.code for p in verdict.problems] == ["executable"]
        assert store.loads == 0


@pytest.mark.parametrize("damage", ["truncate", "flip-head", "edit-body", "mode", "version"])
def test_a_damaged_record_is_ignored(tmp_path: Path, damage: str) -> None:
    bad = tree_id()
    with recording(tmp_path) as store:
        assert [p.code for p in validate_tree(Told(BAD, bad), POLICY, NoGraph()).problems] == [
            "executable"
        ]
        (record,) = shapes(tmp_path)
        data = record.read_bytes()
        head = data.index(b"\n") + 1
        if damage == "truncate":
            record.write_bytes(data[:-3])
        elif damage == "flip-head":
            record.write_bytes(data[:30] + bytes([data[30] ^ 1]) + data[31:])
        elif damage == "edit-body":  # the problem dropped, the checksum left as it was
            body = json.loads(data[head:])
            body["flagged"] = []
            edited_body = json.dumps(body, separators=(",", ":")).encode()
            fields = data[: head - 1].split(b" ")
            fields[2] = b"%d" % len(edited_body)
            record.write_bytes(b" ".join(fields) + b"\n" + edited_body)
        elif damage == "mode":
            record.chmod(0o644)
        else:
            version = shapestore.version_digest().hex().encode()
            record.write_bytes(data.replace(version, b"f" * 32, 1))
        SHAPES.clear()
        verdict = validate_tree(Told(BAD, bad), POLICY, NoGraph())
        assert [p.code for p in verdict.problems] == ["executable"]
        assert store.loads == 0


def test_a_record_is_read_by_a_fresh_process_and_records_are_private_and_pruned(
    tmp_path: Path,
) -> None:
    with recording(tmp_path) as store:
        oids = []
        for n in range(shapestore.KEEP + 3):
            oids.append(tree_id())
            files = {**GOOD, f"MEMORY_{n}.md": Entry(MODE_FILE, 1, data=b"x")}
            validate_tree(Told(files, oids[-1]), POLICY, NoGraph())
        kept = shapes(tmp_path)
        assert len(kept) == shapestore.KEEP
        assert all(p.stat().st_mode & 0o777 == 0o600 for p in kept)
        assert tmp_path.stat().st_mode & 0o777 == 0o700
        SHAPES.clear()
        assert validate_tree(Told(files, oids[-1]), POLICY, NoGraph()).ok
        assert store.loads == 1
