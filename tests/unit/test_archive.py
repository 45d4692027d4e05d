"""Package archives: deterministic writing, and every hostile archive refused with nothing left.

Hostile archives are assembled byte by byte with `Raw` and `assemble` (a tiny ZIP writer
whose every field can be forged), so each test names exactly the lie it tells.
"""

from __future__ import annotations

import hashlib
import io
import os
import struct
import unicodedata
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.errors import MemsyncError
from memsync.views.archive import ArchiveError, ArchiveLimits, extract_zip, scan_zip, write_zip

MiB = 1024 * 1024
REG = 0o100644 << 16


@dataclass(frozen=True)
class Raw:
    """One entry; `None` fields are computed honestly, anything else is forged."""

    name: str | bytes
    data: bytes = b"hello\n"
    method: int = 8
    flags: int = 0x0800
    attr: int = REG
    made: int = (3 << 8) | 20
    need: int = 20
    crc: int | None = None
    csize: int | None = None
    usize: int | None = None
    payload: bytes | None = None  # the stored (compressed) bytes
    local_name: bytes | None = None
    local_flags: int | None = None
    local_method: int | None = None
    local_sizes: tuple[int, int, int] | None = None  # crc, csize, usize in the local header
    extra: bytes = b""
    offset: int | None = None  # forged local header offset in the central record
    descriptor: bytes = b""  # written after the data
    write_local: bool = True  # False: only a central record (its offset points elsewhere)


CENTRAL = "<IHHHHHHIIIHHHHHII"


def local_header(
    need: int, flags: int, method: int, sizes: tuple[int, int, int], name: bytes, extra: bytes
) -> bytes:
    """A local file header (crc, compressed and uncompressed size in `sizes`), name, extra."""
    head = struct.pack("<IHHHHH", 0x04034B50, need, flags, method, 0, 33)
    return head + struct.pack("<IIIHH", *sizes, len(name), len(extra)) + name + extra


def _raw_name(entry: Raw) -> bytes:
    return entry.name.encode("utf-8") if isinstance(entry.name, str) else entry.name


def _payload(entry: Raw) -> bytes:
    if entry.payload is not None:
        return entry.payload
    if entry.method == 8:
        packer = zlib.compressobj(6, zlib.DEFLATED, -15)
        return packer.compress(entry.data) + packer.flush()
    return entry.data


def assemble(
    entries: list[Raw],
    *,
    prefix: bytes = b"",
    before_cd: bytes = b"",
    after_cd: bytes = b"",
    comment: bytes = b"",
    count: int | None = None,
    disk: int = 0,
    absolute: bool = False,
) -> bytes:
    """A ZIP of `entries`; offsets count from the end of `prefix` unless `absolute`."""
    body = bytearray(prefix)
    base = 0 if absolute else len(prefix)
    central = bytearray()
    for entry in entries:
        name = _raw_name(entry)
        payload = _payload(entry)
        crc = zlib.crc32(entry.data) if entry.crc is None else entry.crc
        csize = len(payload) if entry.csize is None else entry.csize
        usize = len(entry.data) if entry.usize is None else entry.usize
        local_name = name if entry.local_name is None else entry.local_name
        flags = entry.flags if entry.local_flags is None else entry.local_flags
        method = entry.method if entry.local_method is None else entry.local_method
        sizes = (crc, csize, usize) if entry.local_sizes is None else entry.local_sizes
        offset = len(body) - base if entry.offset is None else entry.offset
        if entry.write_local:
            body += local_header(entry.need, flags, method, sizes, local_name, entry.extra)
            body += payload + entry.descriptor
        fields = (entry.made, entry.need, entry.flags, entry.method, 0, 33, crc, csize, usize)
        lengths = (len(name), len(entry.extra), 0)
        central += struct.pack(CENTRAL, 0x02014B50, *fields, *lengths, 0, 0, entry.attr, offset)
        central += name + entry.extra
    body += before_cd
    n = len(entries) if count is None else count
    cd_offset = len(body) - base
    cd_size = len(central) + len(after_cd)
    end = struct.pack("<IHHHHIIH", 0x06054B50, disk, 0, n, n, cd_size, cd_offset, len(comment))
    return bytes(body + central + after_cd + end + comment)


def one(name: str | bytes = "a.md", **fields: object) -> bytes:
    return assemble([Raw(name, **fields)])  # type: ignore[arg-type]


def refused(tmp_path: Path, archive: bytes, limits: ArchiveLimits | None = None) -> ArchiveError:
    """Assert the archive is refused, every problem is archive-invalid (or too-large, a
    file over the per-file cap), nothing is left."""
    source = tmp_path / "pkg.zip"
    source.write_bytes(archive)
    dest = tmp_path / "out"
    with pytest.raises(ArchiveError) as caught:
        extract_zip(source, dest, limits)
    assert not dest.exists()
    assert sorted(os.listdir(tmp_path)) == ["pkg.zip"]
    problems = caught.value.problems
    assert problems
    assert {p.code for p in problems} <= {"archive-invalid", "too-large"}
    assert scan_zip(source, limits) == list(problems)
    return caught.value


def _nfd(text: str) -> str:
    return unicodedata.normalize("NFD", text)


BOMB = b"\0" * MiB
# (case id, archive, printable path expected on a problem (or None), words in that message)
CASES: list[tuple[str, Callable[[], bytes], str | None, str]] = [
    ("ratio bomb", lambda: one(data=BOMB), "a.md", "ratio"),
    ("513 entries", lambda: assemble([Raw(f"f{i}.md") for i in range(513)]), None, "513 entries"),
    ("file over 1 MiB", lambda: one(data=b"x" * (MiB + 1), method=0), "a.md", "per-file cap"),
    (
        "declared total",
        lambda: assemble([Raw(f"{i}.md", data=b"x" * MiB, method=0) for i in range(11)]),
        None,
        "zip bomb",
    ),
    ("usize too small", lambda: one(data=b"x" * 100, usize=50), "a.md", "more than its declared"),
    ("usize too big", lambda: one(data=b"x" * 100, usize=150), "a.md", "sizes that lie"),
    ("stored size lie", lambda: one(method=0, usize=3), "a.md", "STORED"),
    ("crc mismatch", lambda: one(crc=0x1234), "a.md", "CRC"),
    ("corrupt deflate", lambda: one(payload=b"\xff" * 8), "a.md", "DEFLATE"),
    (
        "truncated deflate",
        lambda: one(payload=_payload(Raw("a", data=b"ab" * 999))[:-3], data=b"ab" * 999),
        "a.md",
        "ends early",
    ),
    ("bytes after deflate", lambda: one(payload=_payload(Raw("a")) + b"junk"), "a.md", "after"),
    ("name mismatch", lambda: one(local_name=b"b.md"), "a.md", "local and central disagree"),
    ("flags mismatch", lambda: one(local_flags=0), "a.md", "local and central disagree"),
    ("method mismatch", lambda: one(local_method=0), "a.md", "local and central disagree"),
    ("local sizes lie", lambda: one(local_sizes=(0, 1, 2)), "a.md", "sizes that lie"),
    ("overlap", lambda: assemble([Raw("a.md"), Raw("b.md", offset=0)]), "b.md", "overlaps"),
    ("past the end", lambda: one(csize=200), "a.md", "past the archive end"),
    ("runs into cd", lambda: one(csize=len(_payload(Raw("a"))) + 10), "a.md", "central directory"),
    (
        "gap",
        lambda: assemble([Raw("a.md"), Raw("b.md")], before_cd=b"PK\x05\x06" + b"\0" * 18),
        None,
        "belong to no entry",
    ),
    ("leading stub", lambda: assemble([Raw("a.md")], prefix=b"MZ" * 10), None, "hidden data"),
    (
        "leading stub, absolute offsets",
        lambda: assemble([Raw("a.md")], prefix=b"MZ" * 10, absolute=True),
        "a.md",
        "stub",
    ),
    ("trailing junk", lambda: one() + b"junk", None, "trailing bytes"),
    ("archive comment", lambda: assemble([Raw("a.md")], comment=b"hi"), None, "comment"),
    ("junk in cd", lambda: assemble([Raw("a.md")], after_cd=b"x" * 8), None, "no record"),
    ("count too high", lambda: assemble([Raw("a.md")], count=2), None, "too short for 2"),
    ("count too low", lambda: assemble([Raw("a.md"), Raw("b.md")], count=1), None, "no record"),
    ("multi-disk", lambda: assemble([Raw("a.md")], disk=1), None, "several disks"),
    ("zip64 marker", lambda: one(usize=0xFFFFFFFF), "a.md", "ZIP64"),
    ("zip64 extra", lambda: one(extra=b"\x01\x00\x00\x00"), "a.md", "ZIP64"),
    ("unicode path extra", lambda: one(extra=b"up\x01\x00\x00"), "a.md", "second name"),
    ("malformed extra", lambda: one(extra=b"\x0a\x00\x09\x00"), "a.md", "malformed"),
    ("not a zip", lambda: b"hello world, not a zip at all", None, "ZIP"),
    ("symlink", lambda: one(attr=0o120777 << 16, data=b"/etc/passwd"), "a.md", "symbolic link"),
    ("pkware unix link", lambda: one(extra=b"\x0d\x00\x00\x00"), "a.md", "hardlink"),
    ("fifo", lambda: one(attr=0o010644 << 16, data=b""), "a.md", "special file"),
    ("reparse point", lambda: one(attr=0x400, made=20), "a.md", "reparse point"),
    ("executable", lambda: one(attr=0o100755 << 16), "a.md", "executable"),
    ("setuid", lambda: one(attr=0o104644 << 16), "a.md", "setuid"),
    ("dir mode, file name", lambda: one(attr=0o040755 << 16), "a.md", "directory"),
    ("dir with content", lambda: one("d/", attr=0o040755 << 16), "d/", "with 6 bytes of content"),
    ("encrypted", lambda: one(flags=0x0801), "a.md", "encrypted"),
    ("strong encryption bit", lambda: one(flags=0x0840), "a.md", "flag bits"),
    ("method 99", lambda: one(method=99, payload=b"xxxx"), "a.md", "method 99"),
    ("method 12 bzip2", lambda: one(method=12, payload=b"xxxx"), "a.md", "method 12"),
    ("version 4.5", lambda: one(need=45), "a.md", "version 4.5"),
    ("parent", lambda: one("../x"), "../x", "'..'"),
    ("inner parent", lambda: one("a/../../x"), "a/../../x", "'..'"),
    ("absolute", lambda: one("/abs"), "/abs", "absolute"),
    ("backslash", lambda: one("a\\b"), "a\\\\b", "backslash"),
    ("drive letter", lambda: one("C:x"), "C:x", "drive letter"),
    ("dotgit upper", lambda: one(".GIT/config"), ".GIT/config", "treat as '.git'"),
    ("dotgit short name", lambda: one("git~1/x"), "git~1/x", "treat as '.git'"),
    ("dotgit hfs", lambda: one(".gi\u200ct/config"), ".gi\\u200ct/config", "treat as '.git'"),
    ("reserved", lambda: one("CON.md"), "CON.md", "reserved"),
    ("reserved in dir", lambda: one("dist/lpt1"), "dist/lpt1", "reserved"),
    ("trailing dot", lambda: one("a.md."), "a.md.", "dot"),
    ("empty name", lambda: one(""), "", "empty"),
    ("duplicate", lambda: assemble([Raw("a.md"), Raw("a.md")]), "a.md", "more than once"),
    ("case collision", lambda: assemble([Raw("A.md"), Raw("a.md")]), "a.md", "collides"),
    ("dir case collision", lambda: assemble([Raw("D/x.md"), Raw("d/y.md")]), "d/y.md", "collides"),
    ("file vs dir", lambda: assemble([Raw("d"), Raw("d/x.md")]), "d", "collides"),
    (
        "dir entry vs file case",
        lambda: assemble([Raw("A/", data=b"", attr=0o40755 << 16), Raw("a/x.md")]),
        "A/",
        "collides",
    ),
    (
        "nfc nfd",
        lambda: assemble([Raw("\u00e9.md"), Raw(_nfd("\u00e9.md"))]),
        "\u00e9.md",
        "collides",
    ),
    ("nfd alone", lambda: one(_nfd("\u00e9.md")), _nfd("\u00e9.md"), "NFC"),
    ("control char", lambda: one("a\x1b[2J.md"), "a\\x1b[2J.md", "control"),
    ("nul", lambda: one(b"a\x00.md"), "a\\x00.md", "control"),
    ("invalid utf-8", lambda: one(b"a\xff.md"), "a\\udcff.md", "UTF-8"),
    ("non-ascii without flag", lambda: one("\u00e9.md", flags=0), "\u00e9.md", "UTF-8 flag"),
    ("cp437 without flag", lambda: one(b"\x82.md", flags=0), "\\udc82.md", "UTF-8 flag"),
    ("too long", lambda: one("a" * 256), "a" * 256, "byte"),
    ("too deep", lambda: one("a/b/c/d/e.md"), "a/b/c/d/e.md", "levels deep"),
]


@pytest.mark.parametrize(
    ("archive", "path", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_hostile_archive_is_refused_and_leaves_nothing(
    tmp_path: Path, archive: Callable[[], bytes], path: str | None, words: str
) -> None:
    error = refused(tmp_path, archive())
    matching = [p for p in error.problems if p.path == path and words in p.message]
    assert matching, [p.message for p in error.problems]


def test_a_file_over_the_per_file_cap_is_too_large_unless_the_cap_is_raised(
    tmp_path: Path,
) -> None:
    """The per-file cap (1 MiB) is `too-large` naming the file; it alone may be raised, to
    the package total and no further."""
    archive = one("dist/big.md", data=os.urandom(2 * MiB), method=0)
    error = refused(tmp_path, archive)
    assert [(p.code, p.path) for p in error.problems] == [("too-large", "dist/big.md")]
    assert "max_file_size" in error.problems[0].message
    assert scan_zip(tmp_path / "pkg.zip", ArchiveLimits(max_file=2 * MiB)) == []
    with pytest.raises(ValueError, match="max_file"):
        ArchiveLimits(max_file=10 * MiB + 1)
    assert ArchiveLimits(max_file=10 * MiB).max_file == 10 * MiB
    with pytest.raises(ArchiveError) as caught:
        write_zip({"dist/big.md": b"x" * (MiB + 1)})
    assert [(p.code, p.path) for p in caught.value.problems] == [("too-large", "dist/big.md")]


def test_an_entry_hidden_inside_another_is_refused(tmp_path: Path) -> None:
    """The overlapping-file construction: b's local header lies inside a's stored data."""
    inner = b"payload\n"
    sizes = (zlib.crc32(inner), len(inner), len(inner))
    header = local_header(20, 0x800, 0, sizes, b"b.md", b"")
    outer = Raw("a.md", method=0, data=b"pad!" + header + inner)
    hidden = Raw("b.md", method=0, data=inner, offset=30 + 4 + 4, write_local=False)
    error = refused(tmp_path, assemble([outer, hidden]))
    assert [p.path for p in error.problems] == ["b.md"]
    assert "overlaps entry 'a.md'" in error.problems[0].message


def test_inflation_stops_at_the_declared_size(tmp_path: Path) -> None:
    """A 64 MiB stream declared as 1000 bytes is cut off after 1001 bytes, not inflated."""
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    payload = b"".join(packer.compress(b"\0" * MiB) for _ in range(64)) + packer.flush()
    archive = one(data=b"\0" * 1000, payload=payload)
    error = refused(tmp_path, archive)
    assert "more than its declared 1000 bytes" in error.problems[0].message


def test_a_failed_write_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "pkg.zip"
    source.write_bytes(write_zip(PACKAGE))
    calls: list[int] = []

    def failing_fsync(fd: int) -> None:
        calls.append(fd)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space"):
        extract_zip(source, tmp_path / "out")
    assert sorted(os.listdir(tmp_path)) == ["pkg.zip"]


def test_a_descriptor_that_lies_is_refused(tmp_path: Path) -> None:
    data = b"described\n"
    payload = _payload(Raw("a", data=data))
    honest = struct.pack("<4sIII", b"PK\x07\x08", zlib.crc32(data), len(payload), len(data))
    entry = Raw("a.md", data=data, flags=0x0808, local_sizes=(0, 0, 0), descriptor=honest)
    source = tmp_path / "ok.zip"
    source.write_bytes(assemble([entry]))
    assert scan_zip(source) == []
    unsigned = replace(entry, descriptor=honest[4:])
    source.write_bytes(assemble([unsigned, Raw("b.md")]))
    assert scan_zip(source) == []
    source.unlink()
    lying = replace(entry, descriptor=honest[:-4] + struct.pack("<I", 999))
    error = refused(tmp_path, assemble([lying]))
    assert any("data descriptor" in p.message for p in error.problems)


def test_problem_paths_are_printable_and_messages_name_the_entry(tmp_path: Path) -> None:
    error = refused(tmp_path, assemble([Raw(b"\x1b]0;pwned\x07.md")]))
    assert error.problems[0].path == "\\x1b]0;pwned\\x07.md"
    assert all("\x1b" not in p.message for p in error.problems)
    assert isinstance(error, MemsyncError)


def test_limits_can_only_be_lowered(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="max_entries"):
        ArchiveLimits(max_entries=513)
    with pytest.raises(ValueError, match="max_file"):
        ArchiveLimits(max_file=0)
    with pytest.raises(ValueError, match="max_total"):
        ArchiveLimits(max_total=10 * MiB + 1)
    small = ArchiveLimits(max_entries=2, max_file=10, max_depth=1, max_name_bytes=8)
    assert (
        "3 entries"
        in refused(tmp_path, assemble([Raw(f"{i}") for i in range(3)]), small).problems[0].message
    )
    (tmp_path / "pkg.zip").unlink()
    assert refused(tmp_path, one("d/a"), small).problems[0].path == "d/a"
    (tmp_path / "pkg.zip").unlink()
    assert refused(tmp_path, one("abcdefghi"), small).problems[0].path == "abcdefghi"


def test_an_oversized_archive_file_is_not_read(tmp_path: Path) -> None:
    limits = ArchiveLimits(max_total=1024, max_entries=1)
    error = refused(tmp_path, one(data=b"x") + b"\0" * limits.max_archive, limits)
    assert "more than a package" in error.problems[0].message


PACKAGE = {
    "view.md": b"# Auth view\n",
    "recipe.toml": b'version = 1\nview_id = "auth"\nkind = "file"\n',
    "rightmemory-shared-view.toml": b'version = 2\nview_id = "auth"\nkind = "file"\n',
    "dist/MEMORY.md": "# Memory \u2014 caf\u00e9\n".encode() * 50,
    "dist/manifest.toml": b'version = 2\nview_id = "auth"\n',
}


@pytest.mark.parametrize(("file_mode", "dir_mode"), [(0o600, 0o700), (0o644, 0o755)])
def test_a_good_package_extracts_to_exactly_its_files(
    tmp_path: Path, file_mode: int, dir_mode: int
) -> None:
    source = tmp_path / "pkg.zip"
    source.write_bytes(write_zip(PACKAGE))
    dest = tmp_path / "out"
    old = os.umask(0o077 if file_mode == 0o600 else 0o022)
    try:
        hashes = extract_zip(source, dest, file_mode=file_mode)
    finally:
        os.umask(old)
    assert hashes == {n: hashlib.sha256(d).hexdigest() for n, d in PACKAGE.items()}
    found = {p.relative_to(dest).as_posix(): p for p in dest.rglob("*")}
    assert sorted(found) == sorted([*PACKAGE, "dist"])
    assert dest.stat().st_mode & 0o7777 == 0o700
    assert found["dist"].stat().st_mode & 0o7777 == dir_mode
    for name, data in PACKAGE.items():
        assert found[name].read_bytes() == data
        assert not found[name].is_symlink()
        assert found[name].stat().st_mode & 0o7777 == file_mode


def test_extraction_never_reuses_an_existing_destination(tmp_path: Path) -> None:
    source = tmp_path / "pkg.zip"
    source.write_bytes(write_zip(PACKAGE))
    (tmp_path / "out").mkdir()
    with pytest.raises(FileExistsError):
        extract_zip(source, tmp_path / "out")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(FileExistsError):
        extract_zip(source, tmp_path / "link")
    assert not (tmp_path / "elsewhere").exists()


def test_archives_from_other_honest_writers_are_accepted(tmp_path: Path) -> None:
    """Python's zipfile, seekable (sizes in the header) and streamed (data descriptors)."""

    class Stream(io.RawIOBase):
        def __init__(self) -> None:
            self.buffer = bytearray()

        def writable(self) -> bool:
            return True

        def write(self, data: object) -> int:
            chunk = bytes(data)  # type: ignore[call-overload]
            self.buffer += chunk
            return len(chunk)

    seekable, streamed = io.BytesIO(), Stream()
    for target in (seekable, streamed):
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("a.md", "alpha\n")
            archive.writestr("dist/", "")
            archive.writestr(zipfile.ZipInfo("dist/b.md"), "beta\n")
            with archive.open("c.md", "w") as handle:
                handle.write(b"gamma\n")
    for index, blob in enumerate((seekable.getvalue(), bytes(streamed.buffer))):
        source = tmp_path / f"{index}.zip"
        source.write_bytes(blob)
        hashes = extract_zip(source, tmp_path / f"out{index}")
        assert sorted(hashes) == ["a.md", "c.md", "dist/b.md"]


def test_write_zip_shape_and_interop() -> None:
    blob = write_zip({"b.md": b"bee", "a/\u00e9.md": b"", "c.md": b"x" * 5000})
    with zipfile.ZipFile(io.BytesIO(blob)) as archive:
        assert archive.testzip() is None
        infos = archive.infolist()
        assert [i.filename for i in infos] == ["a/\u00e9.md", "b.md", "c.md"]
        for info in infos:
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
            assert info.create_system == 3
            assert info.external_attr == 0o100644 << 16
            assert info.compress_type == zipfile.ZIP_DEFLATED
            assert info.flag_bits == 0x800
            assert info.extra == b""
            assert info.comment == b""
        assert archive.comment == b""
        assert archive.read("c.md") == b"x" * 5000


def test_write_zip_refuses_what_extraction_would_refuse() -> None:
    for files in (
        {"../x": b""},
        {"A.md": b"", "a.md": b""},
        {"x": b"x" * (MiB + 1)},
        {"\ud800.md": b""},
        {"\udcff.md": b""},
        {"n" * 70000: b""},
        {"run.sh": b"#!/bin/sh\n", ".git/hooks/post-checkout": b""},
    ):
        with pytest.raises(ArchiveError):
            write_zip(files)
    with pytest.raises(ArchiveError):
        write_zip({f"{i}": b"" for i in range(3)}, ArchiveLimits(max_entries=2))


_COMPONENT = st.from_regex(r"d[0-9a-f]{0,4}", fullmatch=True)
_LEAF = st.from_regex(r"f[0-9a-f_-]{0,6}(\.md|\.toml)?", fullmatch=True)
_PATH = st.builds(
    lambda dirs, leaf: "/".join([*dirs, leaf]), st.lists(_COMPONENT, max_size=2), _LEAF
)
_FILES = st.dictionaries(_PATH, st.binary(max_size=3000), max_size=12)


@given(_FILES)
def test_write_zip_is_deterministic(files: dict[str, bytes]) -> None:
    reordered = dict(sorted(files.items(), reverse=True))
    assert write_zip(files) == write_zip(reordered)


@given(files=_FILES)
def test_extract_of_write_zip_round_trips(
    tmp_path_factory: pytest.TempPathFactory, files: dict[str, bytes]
) -> None:
    base = tmp_path_factory.mktemp("rt")
    source = base / "pkg.zip"
    source.write_bytes(write_zip(files))
    hashes = extract_zip(source, base / "out", durable=False)
    assert hashes == {n: hashlib.sha256(d).hexdigest() for n, d in files.items()}
    for name, data in files.items():
        assert (base / "out" / name).read_bytes() == data


_GOOD = write_zip({"view.md": b"# v\n" * 40, "dist/MEMORY.md": b"# M\n\nsome text\n" * 30})
_GOOD_HASHES = {
    "view.md": hashlib.sha256(b"# v\n" * 40).hexdigest(),
    "dist/MEMORY.md": hashlib.sha256(b"# M\n\nsome text\n" * 30).hexdigest(),
}


@given(st.integers(0, len(_GOOD) - 1), st.integers(1, 255))
def test_a_corrupted_byte_is_refused_or_harmless(
    tmp_path_factory: pytest.TempPathFactory, index: int, flip: int
) -> None:
    base = tmp_path_factory.mktemp("flip")
    blob = bytearray(_GOOD)
    blob[index] ^= flip
    source = base / "pkg.zip"
    source.write_bytes(bytes(blob))
    try:
        hashes = extract_zip(source, base / "out", durable=False)
    except ArchiveError:
        assert not (base / "out").exists()
    else:
        assert hashes == _GOOD_HASHES


@given(st.integers(0, len(_GOOD) - 1))
def test_every_truncation_is_refused(cut: int) -> None:
    from memsync.views.archive import inspect_bytes  # noqa: PLC0415

    problems, contents = inspect_bytes(_GOOD[:cut], ArchiveLimits())
    assert problems
    assert contents == {}
