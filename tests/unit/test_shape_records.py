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
from array import array
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from zlib import crc32

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.transports.gittree import GitListing
from memsync.validators import shapestore
from memsync.validators.gate import (
    SHAPES,
    TreeShape,
    tree_shape,
    validate_changes,
    validate_tree,
)
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


@given(
    data=st.data(),
    base=trees,
    content=st.one_of(st.none(), st.lists(paths, max_size=6)),
    fits=st.booleans(),
)
def test_a_fresh_process_derives_the_candidates_shape_from_its_bases_record(
    data: st.DataObject, base: dict[str, Entry], content: list[str] | None, fits: bool
) -> None:
    """The candidate's view names its base's listing (`base_entries`, as the git box's do):
    a process that never validated the base (its history check needed no tree) reads the
    base's record, checked against that listing, and derives the candidate's shape from it;
    a record that does not fit that listing is not used. Verdicts as computed from scratch."""
    new = edited(data, base)
    with tempfile.TemporaryDirectory() as tmp, recording(Path(tmp)) as store:
        base_oid, new_oid = tree_id(), tree_id()
        validate_tree(Told(base, base_oid), POLICY, NoGraph())  # a first process records
        SHAPES.clear()  # the next process
        listed = base if fits else {**base, "MEMORY_other.md": Entry(MODE_FILE, 1)}
        told = Told(new, new_oid, base_oid, diff(base, new), base_entries=listed)
        got = validate_tree(told, POLICY, NoGraph(), content_paths=content)
        assert got.problems == reference(TreeView(new), content)
        assert (store.loads, store.deltas) == ((1, 1) if fits else (0, 0))


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


def parts(data: bytes) -> tuple[int, dict[str, object], bytes]:
    """A record's head line's length, its JSON line, and the binary columns after it."""
    head = data.index(b"\n") + 1
    end = data.index(b"\n", head)
    return head, json.loads(data[head:end]), data[end + 1 :]


def same_modes(body: dict[str, object], tail: bytes) -> bytes:
    """A full record's columns with every path's mode 100644 (the first column)."""
    count = body["count"]
    assert isinstance(count, int)
    return array("q", [MODE_FILE] * count).tobytes() + tail[8 * count :]


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


@pytest.mark.parametrize(
    "damage", ["truncate", "flip-head", "edit-body", "resealed-mode", "mode", "version"]
)
def test_a_damaged_record_is_ignored(tmp_path: Path, damage: str) -> None:
    bad = tree_id()
    with recording(tmp_path) as store:
        assert [p.code for p in validate_tree(Told(BAD, bad), POLICY, NoGraph()).problems] == [
            "executable"
        ]
        (record,) = shapes(tmp_path)
        data = record.read_bytes()
        head, body, tail = parts(data)
        if damage == "truncate":
            record.write_bytes(data[:-3])
        elif damage == "flip-head":
            record.write_bytes(data[:30] + bytes([data[30] ^ 1]) + data[31:])
        elif damage == "edit-body":  # the problem dropped, the checksum left as it was
            body["flagged"] = []
            edited_body = json.dumps(body, separators=(",", ":")).encode() + b"\n" + tail
            fields = data[: head - 1].split(b" ")
            fields[2] = b"%d" % len(edited_body)
            record.write_bytes(b" ".join(fields) + b"\n" + edited_body)
        elif damage == "resealed-mode":  # the record says the file is mode 100644
            body["flagged"] = []
            reseal(record, body, same_modes(body, tail))
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


def same_shape(got: TreeShape, files: dict[str, Entry]) -> None:
    """`got` is the shape computed from every entry of `files` (flagged paths, folded
    paths, clashes)."""
    full = TreeShape.of(files, POLICY)
    assert dict(got.flagged) == dict(full.flagged)
    assert got.folded._one == full.folded._one
    assert got.folded._many == full.folded._many


@given(
    data=st.data(),
    base=trees,
    steps=st.integers(1, 4),
    content=st.one_of(st.none(), st.lists(paths, max_size=6)),
)
def test_a_series_of_fresh_processes_over_delta_records_equals_full_passes(
    data: st.DataObject, base: dict[str, Entry], steps: int, content: list[str] | None
) -> None:
    """Each process reads the record of the tree it starts from (full, or a delta) and
    records the next tree as a delta; every verdict, and every recorded tree's shape read
    by a fresh process, is the one computed from scratch."""
    series = [(base, tree_id())]
    with tempfile.TemporaryDirectory() as tmp, recording(Path(tmp)) as store:
        validate_tree(Told(base, series[0][1]), POLICY, NoGraph())  # a first process
        for _ in range(steps):
            old, old_oid = series[-1]
            new, new_oid = edited(data, old), tree_id()
            SHAPES.clear()  # the next process
            assert validate_tree(Told(old, old_oid), POLICY, NoGraph()).problems == reference(
                TreeView(old), None
            )
            told = Told(new, new_oid, old_oid, diff(old, new))
            got = validate_tree(told, POLICY, NoGraph(), content_paths=content)
            assert got.problems == reference(TreeView(new), content)
            series.append((new, new_oid))
        assert store.deltas == steps  # saving cost the change
        assert len(shapes(Path(tmp))) == steps + 1
        for files, oid in series:
            SHAPES.clear()
            loads = store.loads
            same_shape(tree_shape(Told(files, oid), files, POLICY), files)
            assert store.loads == loads + 1


@given(data=st.data(), base=trees)
def test_a_delta_past_its_bound_is_written_in_full(
    data: st.DataObject, base: dict[str, Entry]
) -> None:
    series = [(base, tree_id())]
    with tempfile.TemporaryDirectory() as tmp, recording(Path(tmp)) as store:
        original, shapestore.DELTA_MAX = shapestore.DELTA_MAX, 3
        try:
            validate_tree(Told(base, series[0][1]), POLICY, NoGraph())
            for _ in range(4):
                old, old_oid = series[-1]
                new, new_oid = edited(data, old), tree_id()
                SHAPES.clear()
                validate_tree(Told(old, old_oid), POLICY, NoGraph())
                told = Told(new, new_oid, old_oid, diff(old, new))
                assert validate_tree(told, POLICY, NoGraph()).problems == reference(
                    TreeView(new), None
                )
                series.append((new, new_oid))
        finally:
            shapestore.DELTA_MAX = original
        for path in shapes(Path(tmp)):
            body = parts(path.read_bytes())[1]
            assert len(body.get("delta", ())) <= 3  # type: ignore[arg-type]
        for files, oid in series:
            SHAPES.clear()
            same_shape(tree_shape(Told(files, oid), files, POLICY), files)
        assert store.saves == 5


def reseal(record: Path, body: dict[str, object], tail: bytes = b"") -> None:
    """Write `body` (and a full record's columns `tail`) into `record` with a valid head and
    checksum (as only code that knows the format would): what is left to catch it is the
    record's own shape and the check against the listing."""
    data = json.dumps(body, separators=(",", ":")).encode() + b"\n" + tail
    version = shapestore.version_digest().hex().encode()
    head = b"%s %s %d %08x\n" % (shapestore.FORMAT, version, len(data), crc32(data))
    record.write_bytes(head + data)


@pytest.mark.parametrize(
    "damage", ["full-gone", "full-foreign", "truncate", "edit-body", "resealed-mode", "renamed"]
)
def test_a_damaged_delta_record_is_ignored(tmp_path: Path, damage: str) -> None:
    """A refused tree recorded as a delta of a good one stays refused whatever happens to
    the delta or to the full record it names."""
    good, bad, other = tree_id(), tree_id(), tree_id()
    with recording(tmp_path) as store:
        assert validate_tree(Told(GOOD, good), POLICY, NoGraph()).ok
        told = Told(BAD, bad, good, diff(GOOD, BAD))
        assert [p.code for p in validate_tree(told, POLICY, NoGraph()).problems] == ["executable"]
        assert store.deltas == 1
        full, delta = (next(tmp_path.glob(f"*-{oid}.shape")) for oid in (good, bad))
        data = delta.read_bytes()
        _head, body, _tail = parts(data)
        assert body["base"] == good
        if damage == "full-gone":
            full.unlink()
        elif damage == "full-foreign":  # another tree's full record under the base's name
            validate_tree(Told(BAD, other), POLICY, NoGraph())
            full.write_bytes(next(tmp_path.glob(f"*-{other}.shape")).read_bytes())
        elif damage == "truncate":
            delta.write_bytes(data[:-3])
        elif damage == "edit-body":  # the change dropped, the checksum left as it was
            delta.write_bytes(data.replace(b'"delta":[', b'"delta":[["x.md"],', 1))
        elif damage == "resealed-mode":  # the delta says the file is mode 100644
            body["delta"] = [[p, MODE_FILE, 4] for p, *_ in body["delta"]]  # type: ignore[attr-defined]
            reseal(delta, body)
        else:  # the delta copied under another tree's id
            delta.rename(tmp_path / delta.name.replace(bad, other))
            reseal(tmp_path / delta.name.replace(bad, other), {**body, "tree": bad})
        SHAPES.clear()
        loads = store.loads
        verdict = validate_tree(Told(BAD, bad if damage != "renamed" else other), POLICY, NoGraph())
        assert [p.code for p in verdict.problems] == ["executable"]
        assert store.loads == loads


@given(data=st.data(), base=trees, fits=st.booleans(), delta=st.booleans())
def test_a_record_read_ahead_gives_what_reading_it_then_gives(
    data: st.DataObject, base: dict[str, Entry], fits: bool, delta: bool
) -> None:
    """`read_ahead` reads a record (full, or a delta and its full one) and checks it in
    itself before the listing is at hand; the `load` that follows checks it against the
    listing: the same shape as a `load` alone, or none when the listing is not the one the
    record was made from. The files are not read again (they may be gone by then)."""
    new = edited(data, base)
    with tempfile.TemporaryDirectory() as tmp, recording(Path(tmp)):
        base_oid, new_oid = tree_id(), tree_id()
        validate_tree(Told(base, base_oid), POLICY, NoGraph())
        validate_tree(Told(new, new_oid, base_oid, diff(base, new)), POLICY, NoGraph())
        oid, files = (new_oid, new) if delta else (base_oid, base)
        listed = files if fits else {**files, "MEMORY_other.md": Entry(MODE_FILE, 1)}
        fresh = ShapeStore.open(Path(tmp))
        assert fresh is not None
        want = fresh.load(oid, POLICY, listed)
        fresh.read_ahead(oid, POLICY)
        for record in shapes(Path(tmp)):
            record.unlink()
        got = fresh.load(oid, POLICY, listed)
        assert (got is None) == (want is None) == (not fits)
        if got is not None:
            same_shape(got, files)
        assert fresh.load(oid, POLICY, listed) is None  # read ahead once, for one load
        fresh.read_ahead(oid, POLICY)
        fresh.read_ahead(base_oid if delta else new_oid, POLICY)  # one kept at a time
        assert len(fresh._ahead) == 1


@pytest.mark.parametrize("damage", ["edit-body", "resealed-mode", "version"])
def test_a_damaged_record_read_ahead_is_ignored(tmp_path: Path, damage: str) -> None:
    bad = tree_id()
    with recording(tmp_path) as store:
        validate_tree(Told(BAD, bad), POLICY, NoGraph())
        (record,) = shapes(tmp_path)
        data = record.read_bytes()
        head, body, tail = parts(data)
        if damage == "edit-body":  # the problem dropped, the checksum left as it was
            body["flagged"] = []
            edited_body = json.dumps(body, separators=(",", ":")).encode() + b"\n" + tail
            record.write_bytes(data[:head] + edited_body)
        elif damage == "resealed-mode":  # only the check against the listing catches it
            body["flagged"] = []
            reseal(record, body, same_modes(body, tail))
        else:
            version = shapestore.version_digest().hex().encode()
            record.write_bytes(data.replace(version, b"f" * 32, 1))
        SHAPES.clear()
        store.read_ahead(bad, POLICY)
        verdict = validate_tree(Told(BAD, bad), POLICY, NoGraph())
        assert [p.code for p in verdict.problems] == ["executable"]
        assert store.loads == 0


@pytest.mark.parametrize("wrong", ["text", 0, {}, None, [[]]])
def test_a_resealed_record_with_a_field_of_the_wrong_type_is_ignored(
    tmp_path: Path, wrong: object
) -> None:
    """A record that passes its checksum (as only code that knows the format could write)
    but holds a field of another JSON type is not shaped like a shape: read ahead or read,
    it is ignored, never an exception, and the tree's verdict is computed from its entries."""
    bad = tree_id()
    with recording(tmp_path):
        validate_tree(Told(BAD, bad), POLICY, NoGraph())
        (record,) = shapes(tmp_path)
        data = record.read_bytes()
        fields = sorted(parts(data)[1])
    for field in fields:
        with recording(tmp_path) as store:
            _head, body, tail = parts(data)
            body[field] = wrong
            reseal(record, body, tail)
            record.chmod(0o600)
            SHAPES.clear()
            store.read_ahead(bad, POLICY)
            assert store.load(bad, POLICY, BAD) is None, field
            verdict = validate_tree(Told(BAD, bad), POLICY, NoGraph())
            assert [p.code for p in verdict.problems] == ["executable"], field


@pytest.mark.parametrize("damage", ["flag", "short", "long", "count", "key-twice", "size"])
def test_a_resealed_record_with_damaged_columns_is_ignored(tmp_path: Path, damage: str) -> None:
    """A full record's binary columns that pass the checksum (resealed, as only code that
    knows the format could) but are not a shape's (a leaf flag neither 0 nor 1, columns
    shorter or longer than the JSON line says, a folded prefix held at no path, a prefix
    twice, a size below none) are not used: read ahead or read."""
    bad = tree_id()
    files = {**BAD, "MEMORY_a.md": Entry(MODE_FILE, 1, data=b"x")}
    with recording(tmp_path) as store:
        validate_tree(Told(files, bad), POLICY, NoGraph())
        (record,) = shapes(tmp_path)
        _head, body, tail = parts(record.read_bytes())
        count, ones = body["count"], body["ones"]
        assert isinstance(count, int) and isinstance(ones, int) and ones == count == 3
        flags = 8 * (2 * count + ones)
        texts = body["texts"]
        assert isinstance(texts, list)
        if damage == "flag":
            tail = tail[:flags] + b"\2" + tail[flags + 1 :]
        elif damage == "short":
            tail = tail[:-1]
        elif damage == "long":
            tail += b"\0"
        elif damage == "count":  # a prefix's count of 0 paths
            tail = tail[: 16 * count] + bytes(8) + tail[16 * count + 8 :]
        elif damage == "key-twice":  # one folded prefix twice
            at = flags + ones + texts[0]
            keys = tail[at : at + texts[1]].split(b"\0")
            keys[-1] = keys[-2]
            tail = tail[:at] + b"\0".join(keys) + tail[at + texts[1] :]
            texts[1] = len(b"\0".join(keys))
        else:
            tail = tail[: 8 * count] + array("q", [-2]).tobytes() + tail[8 * count + 8 :]
        reseal(record, body, tail)
        SHAPES.clear()
        store.read_ahead(bad, POLICY)
        assert store.load(bad, POLICY, files) is None
        verdict = validate_tree(Told(files, bad), POLICY, NoGraph())
        assert [p.code for p in verdict.problems] == ["executable"]
        assert store.loads == 0


def test_a_record_of_many_paths_is_read_without_a_json_parse_or_a_map_of_each_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh process reads the shape record of a 2,000-path tree (issue 18: 10k files)
    with one small JSON line parsed, the paths' columns split whole: what it parses as JSON
    does not grow with the tree (a record of every path in JSON was ~80 bytes a path); and
    checks a one-path change against it without a map of every path's prefixes."""
    files = {f"MEMORY_{n:05d}.md": Entry(MODE_FILE, 1 + n % 7, data=b"x") for n in range(2000)}
    files["PURSUITS.md"] = Entry(MODE_EXECUTABLE, 4, data=b"# P\n")
    oid = tree_id()
    with recording(tmp_path):
        want = validate_tree(Told(files, oid), POLICY, NoGraph()).problems
    parsed: list[int] = []
    loads = json.loads

    def counted(text: str | bytes, **kw: object) -> object:
        parsed.append(len(text))
        return loads(text, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(json, "loads", counted)
    with recording(tmp_path) as store:
        store.read_ahead(oid, POLICY)
        assert validate_tree(Told(files, oid), POLICY, NoGraph()).problems == want
        assert store.loads == 1
        # A one-path change derived from it keeps the record's columns as they are: no map
        # of the 2,000 paths' folded prefixes is built (only the changed one's).
        new = {**files, "MEMORY_00007.md": Entry(MODE_FILE, 2, data=b"xy")}
        told = Told(new, tree_id(), oid, diff(files, new))
        assert validate_tree(told, POLICY, NoGraph()).problems == want
        folded = tree_shape(told, new, POLICY).folded
        assert folded._base is not None and len(folded._over) <= 1, len(folded._over)
    assert parsed and max(parsed) < 1024, parsed
