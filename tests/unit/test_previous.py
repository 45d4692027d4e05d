"""Unpacking with the previous import lends exactly the unchanged files and changes nothing
else: the tree, the bytes and the hashes equal those of a plain extraction."""

from __future__ import annotations

import hashlib
import os
import random
import tempfile
import zlib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.views.archive import ArchiveLimits, unpack, write_zip
from memsync.views.previous import Previous, sync_tree

NAMES = ["view.md", "recipe.toml", "dist/MEMORY.md", "dist/a.md", "dist/deep/b.md", "c.md"]
LIMITS = ArchiveLimits()
BIG = random.Random(0).randbytes(70_000)  # over 64 KiB, where the ratio cap starts
# Equal sizes with other bytes are the case a size check alone would get wrong.
BODIES = st.sampled_from([b"", b"a", b"b", b"same\n", b"sane\n", BIG, BIG[::-1]]) | st.binary(
    max_size=4
)


def tree(base: Path) -> dict[str, bytes]:
    return {
        p.relative_to(base).as_posix(): p.read_bytes()
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }


def load(base: Path, archive: bytes, files: dict[str, bytes]) -> Previous:
    (base / "old.zip").write_bytes(archive)
    previous = Previous.load(
        base / "old.zip",
        sha256=hashlib.sha256(archive).hexdigest(),
        files={p: hashlib.sha256(b).hexdigest() for p, b in files.items()},
        import_dir=base / "import",
        max_archive=LIMITS.max_archive,
        max_entries=LIMITS.max_entries,
    )
    assert previous is not None
    return previous


def imported(base: Path, files: dict[str, bytes]) -> Previous:
    """`files` packed as `base/pkg.zip`, imported at `base/import`, kept as the previous."""
    archive = write_zip(files)
    (base / "pkg.zip").write_bytes(archive)
    unpack(base / "pkg.zip", base / "import")
    return load(base, archive, files)


@given(
    old=st.dictionaries(st.sampled_from(NAMES), BODIES, min_size=1),
    new=st.dictionaries(st.sampled_from(NAMES), BODIES, min_size=1),
    keep=st.sets(st.sampled_from(NAMES)),
)
def test_unpacking_with_the_previous_import_equals_a_plain_extraction(
    old: dict[str, bytes], new: dict[str, bytes], keep: set[str]
) -> None:
    new = {**new, **{p: old[p] for p in keep if p in old}}
    old_zip, new_zip = write_zip(old), write_zip(new)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        (base / "new.zip").write_bytes(new_zip)
        unpack_old = base / "old-src.zip"
        unpack_old.write_bytes(old_zip)
        unpack(unpack_old, base / "import")
        previous = load(base, old_zip, old)
        plain = unpack(base / "new.zip", base / "plain")
        lent = unpack(base / "new.zip", base / "lent", previous=previous)
        assert (lent.contents, lent.hashes) == (plain.contents, plain.hashes)
        assert list(lent.contents) == list(plain.contents)
        assert tree(base / "lent") == tree(base / "plain") == new
        unchanged = {p for p in new if old.get(p) == new[p]}
        assert lent.linked == unchanged
        for path in unchanged:
            assert os.path.samefile(base / "lent" / path, base / "import" / path)


def test_a_previous_with_another_hash_lends_nothing(tmp_path: Path) -> None:
    files = {"view.md": b"# v\n", "dist/MEMORY.md": b"# m\n"}
    previous = imported(tmp_path, files)
    previous.sha256 = "0" * 64  # the kept package is not the trusted revision's
    lent = unpack(tmp_path / "pkg.zip", tmp_path / "out", previous=previous)
    assert lent.linked == frozenset()
    assert tree(tmp_path / "out") == files


def test_sync_tree_refuses_a_link_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "t" / "d").mkdir(parents=True)
    (tmp_path / "t" / "d" / "f").write_bytes(b"x")
    sync_tree(tmp_path / "t")
    (tmp_path / "t" / "d" / "l").symlink_to(tmp_path / "t" / "d" / "f")
    with pytest.raises(OSError):
        sync_tree(tmp_path / "t")
    sync_tree(tmp_path / "t", linked={"d/l"})  # a name `unpack` linked is not opened


def test_a_large_package_inflated_on_threads_keeps_every_byte_and_order(tmp_path: Path) -> None:
    rng = random.Random(1)
    files = {f"dist/MEMORY_{i:02d}.md": rng.randbytes(70_000) for i in range(20)}  # > 1 MiB
    files["view.md"] = b"# v\n"
    (tmp_path / "pkg.zip").write_bytes(write_zip(files))
    got = unpack(tmp_path / "pkg.zip", tmp_path / "out")
    assert got.contents == files and list(got.contents) == sorted(files)
    assert got.hashes == {p: hashlib.sha256(b).hexdigest() for p, b in files.items()}
    assert tree(tmp_path / "out") == files


_POLY = 0xEDB88320
_TABLE = [0] * 256
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ _POLY if _c & 1 else _c >> 1
    _TABLE[_n] = _c
_TOP = {t >> 24: n for n, t in enumerate(_TABLE)}


def forge(data: bytes, crc: int) -> bytes:
    """Four bytes that make `data` + them have CRC-32 `crc` (CRC-32 is linear)."""
    state, steps = crc ^ 0xFFFFFFFF, list[int]()
    for _ in range(4):
        index = _TOP[state >> 24]
        steps.insert(0, index)
        state = ((state ^ _TABLE[index]) << 8) & 0xFFFFFFFF
    state, out = zlib.crc32(data) ^ 0xFFFFFFFF, bytearray()
    for index in steps:
        out.append((state ^ index) & 0xFF)
        state = (state >> 8) ^ _TABLE[index]
    return bytes(out)


def test_a_crc_collision_is_not_taken_for_the_same_file(tmp_path: Path) -> None:
    for attempt in range(1000):  # the same CRC, size and compressed size; other bytes
        old = f"the first text {attempt}\n".encode()
        new = f"the other text {attempt}\n".encode()
        old, new = old + forge(old, 0x5EED), new + forge(new, 0x5EED)
        old_zip, new_zip = write_zip({"view.md": old}), write_zip({"view.md": new})
        if len(old_zip) == len(new_zip):
            break
    assert zlib.crc32(old) == zlib.crc32(new) and len(old_zip) == len(new_zip) and old != new
    (tmp_path / "old-src.zip").write_bytes(old_zip)
    unpack(tmp_path / "old-src.zip", tmp_path / "import")
    (tmp_path / "new.zip").write_bytes(new_zip)
    lent = unpack(
        tmp_path / "new.zip", tmp_path / "out", previous=load(tmp_path, old_zip, {"view.md": old})
    )
    assert lent.linked == frozenset()
    assert tree(tmp_path / "out") == {"view.md": new}


def test_a_fifo_in_the_import_is_inflated_not_waited_on(tmp_path: Path) -> None:
    files = {"view.md": b"# v\n", "dist/MEMORY.md": b"# m\n"}
    previous = imported(tmp_path, files)
    (tmp_path / "import" / "view.md").unlink()
    os.mkfifo(tmp_path / "import" / "view.md", 0o600)  # opening it to read would block
    lent = unpack(tmp_path / "pkg.zip", tmp_path / "out", previous=previous)
    assert lent.linked == frozenset({"dist/MEMORY.md"})
    assert tree(tmp_path / "out") == files


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_kept_package_that_is_not_a_regular_file_is_not_read(tmp_path: Path, kind: str) -> None:
    files = {"view.md": b"# v\n"}
    archive = write_zip(files)
    real = tmp_path / "real.zip"
    real.write_bytes(archive)
    kept = tmp_path / "old.zip"
    if kind == "fifo":
        os.mkfifo(kept, 0o600)
    else:
        kept.symlink_to(real)  # even to the right bytes: the kept package is never followed
    previous = Previous.load(
        kept,
        sha256=hashlib.sha256(archive).hexdigest(),
        files={p: hashlib.sha256(b).hexdigest() for p, b in files.items()},
        import_dir=tmp_path / "import",
        max_archive=LIMITS.max_archive,
        max_entries=LIMITS.max_entries,
    )
    assert previous is None


def test_a_linked_file_is_the_inode_that_was_read_with_exactly_two_names(tmp_path: Path) -> None:
    files = {"view.md": b"# v\n"}
    previous = imported(tmp_path, files)
    lent = unpack(tmp_path / "pkg.zip", tmp_path / "out", previous=previous)
    assert lent.linked == frozenset({"view.md"})
    made = (tmp_path / "out" / "view.md").stat()
    assert made.st_ino == (tmp_path / "import" / "view.md").stat().st_ino
    assert made.st_nlink == 2
