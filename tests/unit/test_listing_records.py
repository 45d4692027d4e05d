"""Tree listing records never change what a listing says: a record is used only when its
entries hash to the id git gives the tree (`tree_id` equals git's `write-tree`, nested
directories and git's name order included), a fresh store reads back exactly the listing
saved (in full or as a delta of its full record, deltas composed), and a record that is
another tree's, corrupt, truncated, foreign, not private or missing its full record is
never used.
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from zlib import crc32

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.validators import listingstore
from memsync.validators.listingstore import FORMAT, ListingStore, tree_id
from memsync.validators.tree import (
    MODE_EXECUTABLE,
    MODE_FILE,
    MODE_GITLINK,
    MODE_SYMLINK,
    Entry,
    Listing,
)
from tests.conftest import PROCESS_EXAMPLES
from tests.helpers import GIT_ENV

# Names whose order git and a plain sort disagree on ("a" the directory sorts as "a/",
# after "a-b" and "a.b"), upper case, and names that are not ASCII.
NAMES = ("a", "a-b", "a.b", "a0", "b", "B", "é.md", "MEMORY.md", "x_y")
MODES = (MODE_FILE, MODE_EXECUTABLE, MODE_SYMLINK, MODE_GITLINK)
oids = st.binary(min_size=20, max_size=20).filter(any).map(bytes.hex)  # git refuses 0{40}
# A blob's size is its id's (as git's listing gives it): here a function of the id.
entries = st.builds(
    lambda m, o: Entry(m, None if m == MODE_GITLINK else int(o[:5], 16), o),
    st.sampled_from(MODES),
    oids,
)


@st.composite
def listings(draw: st.DrawFn) -> Listing:
    """A listing git could give: no path both a leaf and a directory."""
    paths = draw(
        st.lists(
            st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join),
            min_size=1,
            max_size=12,
            unique=True,
        )
    )
    leaves = [p for p in paths if not any(q.startswith(p + "/") for q in paths)]
    listing = Listing()
    listing.update({path: draw(entries) for path in leaves})
    return listing


def _git_tree(listing: Listing, work: Path) -> str:
    """The id `git write-tree` gives the tree of `listing` (objects need not exist)."""
    env = {**os.environ, **GIT_ENV, "GIT_INDEX_FILE": str(work / "index")}
    (work / "index").unlink(missing_ok=True)
    info = b"".join(
        b"%o %s\t%s\0" % (entry.mode, (entry.oid or "").encode(), path.encode())
        for path, entry in listing.items()
    )
    git = ["git", "-C", str(work)]
    subprocess.run([*git, "update-index", "-z", "--index-info"], input=info, env=env, check=True)
    done = subprocess.run(
        [*git, "write-tree", "--missing-ok"], env=env, check=True, text=True, capture_output=True
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def work() -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["git", "init", "-q", tmp], check=True, env={**os.environ, **GIT_ENV})
        yield Path(tmp)


@PROCESS_EXAMPLES
@given(listing=listings())
def test_a_listing_hashes_to_the_id_git_gives_its_tree(listing: Listing, work: Path) -> None:
    assert tree_id(listing, 40) == _git_tree(listing, work)


def test_git_orders_a_directory_as_its_name_and_a_slash(work: Path) -> None:
    listing = Listing()
    oid = "e69de29bb2d1d6434b8b29ae775ad8c2d48c5391"
    for path in ("a/b", "a-b", "a.b", "a0", "ab/c/d", "é/x", "B"):
        listing[path] = Entry(MODE_FILE, 0, oid)
    assert tree_id(listing, 40) == _git_tree(listing, work)
    reordered = Listing()
    reordered.update(reversed(listing.items()))  # the record's order does not matter
    assert tree_id(reordered, 40) == tree_id(listing, 40)


def test_a_listing_git_cannot_make_has_no_tree_id() -> None:
    oid = "e69de29bb2d1d6434b8b29ae775ad8c2d48c5391"
    both = Listing()
    both.update({"a": Entry(MODE_FILE, 0, oid), "a/b": Entry(MODE_FILE, 0, oid)})
    assert tree_id(both, 40) is None  # a file and a directory of one name
    for path in ("a//b", "a/", ""):
        odd = Listing()
        odd[path] = Entry(MODE_FILE, 0, oid)
        assert tree_id(odd, 40) is None
    short = Listing()
    short["a"] = Entry(MODE_FILE, 0, oid[:-2])
    assert tree_id(short, 40) is None
    assert tree_id(Listing([("a", Entry(MODE_FILE, 0, oid))]), 64) is None  # other format


@st.composite
def edits(draw: st.DrawFn, base: Listing) -> tuple[Listing, tuple[tuple[str, Entry | None], ...]]:
    """`base` changed as git's diff would change it: some leaves deleted, modified, added."""
    new = Listing()
    new.update(base)
    delta: list[tuple[str, Entry | None]] = []
    gone = draw(st.lists(st.sampled_from(sorted(base)), unique=True, max_size=3)) if base else []
    for path in gone:
        if draw(st.booleans()):
            del new[path]
            delta.append((path, None))
        else:
            new[path] = draw(entries)
            delta.append((path, new[path]))
    for name in draw(st.lists(st.sampled_from(NAMES), unique=True, max_size=2)):
        path = f"new/{name}"
        if path not in new:
            new[path] = draw(entries)
            delta.append((path, new[path]))
    return new, tuple(delta)


@given(data=st.data(), first=listings(), turns=st.integers(1, 4))
def test_a_fresh_store_reads_back_every_listing_saved(
    data: st.DataObject, first: Listing, turns: int
) -> None:
    """Process after process: each lists the tree it starts from from its record and
    records the next one as a delta; a fresh store reads every one back as it was."""
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        saved = {tree_id(first, 40): first}
        writer = ListingStore.open(directory)
        assert writer is not None
        writer.save(tree_id(first, 40) or "", first)
        current = first
        for _ in range(turns):
            reader = ListingStore.open(directory)  # the next process
            assert reader is not None
            base_oid = tree_id(current, 40)
            assert base_oid is not None
            loaded = reader.load(base_oid)
            assert loaded is not None and dict(loaded) == dict(current)
            current, delta = data.draw(edits(current))
            oid = tree_id(current, 40)
            assert oid is not None
            reader.save(oid, current, (base_oid, delta))
            saved[oid] = current
        fresh = ListingStore.open(directory)
        assert fresh is not None
        for oid, listing in saved.items():
            assert oid is not None
            found = fresh.load(oid)
            assert found is not None and dict(found) == dict(listing)
            assert found.duplicates == ()


def _store(tmp_path: Path) -> tuple[ListingStore, Listing, str]:
    listing = Listing()
    listing.update(
        {
            "MEMORY.md": Entry(MODE_FILE, 10, "1" * 40),
            "notes/a.md": Entry(MODE_FILE, 20, "2" * 40),
        }
    )
    oid = tree_id(listing, 40)
    assert oid is not None
    store = ListingStore.open(tmp_path / "listings")
    assert store is not None
    store.save(oid, listing)
    return store, listing, oid


def _fresh(tmp_path: Path) -> ListingStore:
    store = ListingStore.open(tmp_path / "listings")
    assert store is not None
    return store


def test_a_record_of_other_entries_is_never_used(tmp_path: Path) -> None:
    """A record that says it is tree T's, checksummed with the store's own key, but holds
    another listing (a bug, a hand edit, a record written under T's name): not used."""
    store, listing, oid = _store(tmp_path)
    path = store._path(oid)
    assert path is not None
    other = Listing()
    other.update(listing)
    other["notes/a.md"] = Entry(MODE_FILE, 20, "3" * 40)
    store._chains.clear()  # written as if it were tree `oid`'s listing
    store.save(oid, other)
    assert store.saves == 2 and path.exists()
    assert _fresh(tmp_path).load(oid) is None
    store._chains.clear()
    store.save(oid, listing)  # the very entries: used again
    assert _fresh(tmp_path).load(oid) == listing


def test_a_damaged_foreign_or_unprivate_record_is_a_miss(tmp_path: Path) -> None:
    store, listing, oid = _store(tmp_path)
    path = store._path(oid)
    assert path is not None and _fresh(tmp_path).load(oid) == listing
    data = path.read_bytes()
    flipped = data[:-9] + bytes([data[-9] ^ 1]) + data[-8:]  # within an object id
    for damaged in (data[:-1], flipped, data.replace(FORMAT, b"MSTL9", 1), b""):
        path.write_bytes(damaged)
        assert _fresh(tmp_path).load(oid) is None
    path.write_bytes(data)
    path.chmod(0o644)  # readable by others: not ours alone
    assert _fresh(tmp_path).load(oid) is None
    path.chmod(0o600)
    assert _fresh(tmp_path).load(oid) == listing
    other = tree_id(Listing([("x", Entry(MODE_FILE, 1, "4" * 40))]), 40)
    assert other is not None
    moved = store._path(other)
    assert moved is not None
    path.rename(moved)  # another tree's name: its body says which tree it is
    assert _fresh(tmp_path).load(other) is None


def test_a_delta_without_its_full_record_is_a_miss(tmp_path: Path) -> None:
    store, listing, oid = _store(tmp_path)
    new = Listing()
    new.update(listing)
    new["notes/b.md"] = Entry(MODE_FILE, 5, "5" * 40)
    new_oid = tree_id(new, 40)
    assert new_oid is not None
    store.save(new_oid, new, (oid, (("notes/b.md", new["notes/b.md"]),)))
    assert store.deltas == 1
    assert _fresh(tmp_path).load(new_oid) == new
    full = store._path(oid)
    assert full is not None
    full.unlink()
    assert _fresh(tmp_path).load(new_oid) is None


def test_a_listing_with_a_duplicate_entry_is_not_recorded(tmp_path: Path) -> None:
    store = ListingStore.open(tmp_path / "listings")
    assert store is not None
    listing = Listing([("a", Entry(MODE_FILE, 1, "1" * 40))], duplicates=["a"])
    store.save("6" * 40, listing)
    assert store.saves == 0


def test_records_are_bounded(tmp_path: Path) -> None:
    store = ListingStore.open(tmp_path / "listings")
    assert store is not None
    for number in range(listingstore.KEEP + 5):
        listing = Listing([(f"f{number}", Entry(MODE_FILE, 1, "1" * 40))])
        oid = tree_id(listing, 40)
        assert oid is not None
        store.save(oid, listing)
    assert len(list((tmp_path / "listings").iterdir())) <= listingstore.KEEP


def test_a_tree_the_root_comes_back_to_keeps_its_record(tmp_path: Path) -> None:
    """A revert: the root goes from tree A to B (recorded as a delta of A) and back to A in
    the next process. A's record stays its full listing (a delta of A over B's chain would
    name A as its own base and lose A and B alike)."""
    _, first, first_oid = _store(tmp_path)
    second = Listing()
    second.update({**first, "notes/a.md": Entry(MODE_FILE, 21, "3" * 40)})
    second_oid = tree_id(second, 40)
    assert second_oid is not None
    moving = _fresh(tmp_path)  # a process starts at A and moves to B
    assert moving.load(first_oid) is not None
    moving.save(second_oid, second, (first_oid, (("notes/a.md", second["notes/a.md"]),)))
    assert moving.deltas == 1
    back = _fresh(tmp_path)  # the next process starts at B and comes back to A
    assert back.load(second_oid) is not None
    back.save(first_oid, first, (second_oid, (("notes/a.md", first["notes/a.md"]),)))
    fresh = _fresh(tmp_path)
    for oid, listing in ((first_oid, first), (second_oid, second)):
        found = fresh.load(oid)
        assert found is not None and dict(found) == dict(listing)


def _rewrite(store: ListingStore, oid: str, edit: Callable[[bytes], bytes]) -> None:
    """Tree `oid`'s record with its body edited and checksummed again, as whoever can write
    the store could (the checksum finds damage, not intent)."""
    path = store._path(oid)
    assert path is not None
    data = path.read_bytes()
    body = edit(data[data.find(b"\n") + 1 :])
    head = b"%s %s %d %08x\n" % (FORMAT, store.version.hex().encode(), len(body), crc32(body))
    path.write_bytes(head + body)
    path.chmod(0o600)


def _set_size(number: int, size: int) -> Callable[[bytes], bytes]:
    def edit(body: bytes) -> bytes:
        cut = body.find(b"\n") + 1
        count = json.loads(body[:cut])["count"]
        at = cut + 8 * count + 8 * number
        return body[:at] + size.to_bytes(8, "little", signed=True) + body[at + 8 :]

    return edit


def test_a_record_whose_sizes_no_listing_has_is_a_miss(tmp_path: Path) -> None:
    """What the tree id does not cover, the record's own shape does: a blob has a size of 0
    or more, a submodule none (a blob's size made unknown would pass any size cap)."""
    store, listing, oid = _store(tmp_path)
    _rewrite(store, oid, _set_size(0, 11))
    assert dict(_fresh(tmp_path).load(oid) or {}) != dict(listing)  # (the edit is read)
    for size in (-1, -2):
        _rewrite(store, oid, _set_size(0, size))
        assert _fresh(tmp_path).load(oid) is None
    module = Listing()
    module.update({"lib": Entry(MODE_GITLINK, None, "5" * 40)})
    module_oid = tree_id(module, 40)
    assert module_oid is not None
    store.save(module_oid, module)
    assert _fresh(tmp_path).load(module_oid) == module
    _rewrite(store, module_oid, _set_size(0, 0))  # a submodule with a size
    assert _fresh(tmp_path).load(module_oid) is None


def test_a_delta_row_with_a_size_no_listing_has_is_a_miss(tmp_path: Path) -> None:
    store, listing, oid = _store(tmp_path)
    moving = _fresh(tmp_path)
    assert moving.load(oid) is not None
    changed = Entry(MODE_FILE, 30, "6" * 40)
    new = Listing()
    new.update({**listing, "notes/a.md": changed})
    new_oid = tree_id(new, 40)
    assert new_oid is not None
    moving.save(new_oid, new, (oid, (("notes/a.md", changed),)))
    assert moving.deltas == 1 and _fresh(tmp_path).load(new_oid) == new
    for forged in (b"null", b"-30"):
        _rewrite(
            store, new_oid, lambda body, forged=forged: body.replace(b",30,", b"," + forged + b",")
        )
        assert _fresh(tmp_path).load(new_oid) is None


def test_a_path_git_never_lists_has_no_tree_id() -> None:
    """ "/a" is not "a": no record naming it can pass for the tree that holds "a"."""
    entry = Entry(MODE_FILE, 1, "7" * 40)
    for path in ("/a", "/a/b", "x/../a"):
        assert tree_id(Listing([(path, entry)]), 40) != tree_id(Listing([("a", entry)]), 40)
    assert tree_id(Listing([("/a", entry), ("b/c", entry)]), 40) is None


def _lines_run(call: Callable[[], object], module: str) -> int:
    """How many lines of `module`'s code run during `call()` (a trace of line events)."""
    import sys  # noqa: PLC0415

    count = 0

    def trace(frame: object, event: str, _arg: object) -> Callable[..., object] | None:
        nonlocal count
        code = frame.f_code  # type: ignore[attr-defined]
        if not code.co_filename.endswith(module):
            return None
        if event == "line":
            count += 1
        return trace

    sys.settrace(trace)
    try:
        call()
    finally:
        sys.settrace(None)
    return count


@pytest.mark.parametrize("nested", [False, True])
def test_reading_a_record_runs_no_python_line_per_entry(tmp_path: Path, nested: bool) -> None:
    """Issue 18: a fresh process reads a 10k-entry tree's record on every one-file sync.
    Its check (rehashing every directory's git tree object) and decoding run at C level,
    column by column: the Python lines run do not grow with the entries (they grow with
    the directories), flat or nested."""

    def listing(count: int) -> Listing:
        names = [
            f"d{n % 4}/MEMORY_{n:05d}.md" if nested else f"MEMORY_{n:05d}.md" for n in range(count)
        ]
        return Listing((p, Entry(MODE_FILE, 3, f"{n + 1:040x}")) for n, p in enumerate(names))

    runs = []
    for count in (200, 2000):
        entries = listing(count)
        oid = tree_id(entries, 40)
        assert oid is not None
        ListingStore.open(tmp_path / str(count)).save(oid, entries)  # type: ignore[union-attr]
        fresh = ListingStore.open(tmp_path / str(count))
        assert fresh is not None
        runs.append(_lines_run(lambda: fresh.load(oid), "listingstore.py"))  # noqa: B023
        assert fresh.load(oid) == entries
    assert runs[1] < runs[0] + 50, runs
