"""The ZIP byte format, read with `struct` and trusting nothing (pure functions on bytes).

Owns the layout rules: the end-of-central-directory record must be the last 22 bytes
(no archive comment, no trailing bytes), the central directory must end right where that
record starts, and every byte before it must belong to exactly one entry (local header,
name, extra field, compressed data and optional data descriptor), laid end to end from
offset 0. So there is no leading stub, gap, overlap or junk where a second directory or
a second copy of a file could hide, and every reader finds the same entries.

Also owns the format features memsync accepts: PKZIP 2.0 (version needed at most 20),
STORED and DEFLATED only, no encryption, no ZIP64, no multi-disk, no extra field that
gives an entry a second name, size or link target, and local headers that agree with the
central directory. The package policy (names, modes, caps) lives in `archive.py`.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, replace

from memsync.validators.paths import printable
from memsync.validators.problems import Problem

CODE = "archive-invalid"

STORED = 0
DEFLATED = 8
FLAG_ENCRYPTED = 0x0001
FLAG_DESCRIPTOR = 0x0008
FLAG_UTF8 = 0x0800
# Bits 1-2 only tune DEFLATE; every other bit (strong encryption, patched data, masked
# headers, reserved) changes how the entry must be read, so it is refused.
_ALLOWED_FLAGS = FLAG_ENCRYPTED | 0x0006 | FLAG_DESCRIPTOR | FLAG_UTF8
MAX_VERSION = 20  # PKZIP 2.0: STORED and DEFLATED, nothing newer (ZIP64 is 4.5)

EOCD = struct.Struct("<IHHHHIIH")
CENTRAL = struct.Struct("<IHHHHHHIIIHHHHHII")
LOCAL = struct.Struct("<IHHHHHIIIHH")
_DESCRIPTOR = struct.Struct("<III")
EOCD_SIG = 0x06054B50
CENTRAL_SIG = 0x02014B50
LOCAL_SIG = 0x04034B50
_DESCRIPTOR_SIG = b"PK\x07\x08"
_ZIP64_LOCATOR_SIG = b"PK\x06\x07"
_ZIP64_LOCATOR_SIZE = 20
_U16 = 0xFFFF
_U32 = 0xFFFFFFFF

# Extra fields refused: each can make two readers see different entries.
_BAD_EXTRAS = {
    0x0001: "a ZIP64 extra field (sizes and offsets that override the headers)",
    0x000D: "a PKWARE Unix extra field (it can carry a symlink or hardlink target)",
    0x0017: "a strong-encryption header",
    0x7075: "an Info-ZIP Unicode path field (a second name some tools use instead)",
    0x9901: "a WinZip AES encryption field",
    0x756E: "an ASi Unix extra field (it can carry a mode and a symlink target)",
}


@dataclass(frozen=True)
class Member:
    """One central directory record, plus where its local header says the data lies."""

    index: int
    raw_name: bytes
    version_made: int
    flags: int
    method: int
    crc: int
    compressed: int
    size: int
    external_attr: int
    offset: int
    data_start: int = -1  # -1 until the local header has been read and found usable
    end: int = -1  # end of the data and of its data descriptor, if any

    @property
    def name(self) -> str:
        """The name as UTF-8; a byte that is not UTF-8 becomes a lone surrogate."""
        return self.raw_name.decode("utf-8", "surrogateescape")

    @property
    def is_dir(self) -> bool:
        return self.raw_name.endswith(b"/")


def problem(name: str | None, reason: str) -> Problem:
    """An `archive-invalid` problem about one entry (by printable name) or the archive."""
    if name is None:
        return Problem(CODE, None, None, f"the archive {reason}")
    shown = printable(name)
    return Problem(CODE, shown, None, f"archive entry '{shown}' {reason}")


def read_archive(data: bytes, max_entries: int) -> tuple[list[Member], list[Problem]]:
    """Every entry of the archive `data` and every format or layout problem found.

    An archive whose end record or central directory cannot be trusted yields no entries.
    """
    problems: list[Problem] = []
    end = _end_record(data, max_entries, problems)
    if end is None:
        return [], problems
    count, cd_start = end
    members = _central_directory(data, count, cd_start, len(data) - EOCD.size, problems)
    if members is None:
        return [], problems
    members = [_local_header(data, m, problems) for m in members]
    _check_layout(members, cd_start, problems)
    return members, problems


def _end_record(data: bytes, max_entries: int, problems: list[Problem]) -> tuple[int, int] | None:
    """(entry count, central directory offset), or None after reporting why not."""
    tail = len(data) - EOCD.size
    if tail < 0:
        problems.append(problem(None, f"is {len(data)} bytes, too short to be a ZIP archive"))
        return None
    sig, disk, cd_disk, on_disk, count, cd_size, cd_start, comment = EOCD.unpack_from(data, tail)
    why = None
    if sig != EOCD_SIG:
        why = (
            "does not end with an end-of-central-directory record: it is not a ZIP, or it "
            "has an archive comment or trailing bytes, where a second directory could hide"
        )
    elif comment:
        why = f"declares a {comment}-byte archive comment past its end"
    elif data[tail - _ZIP64_LOCATOR_SIZE : tail - _ZIP64_LOCATOR_SIZE + 4] == _ZIP64_LOCATOR_SIG:
        why = "is a ZIP64 archive (it has a ZIP64 end-of-directory locator)"
    elif _U16 in (count, on_disk) or _U32 in (cd_size, cd_start):
        why = "uses ZIP64 marker values in its end record"
    elif disk or cd_disk or on_disk != count:
        why = "spans several disks (a multi-disk archive)"
    elif count > max_entries:
        why = f"has {count} entries, over the {max_entries}-entry cap (an entry-count bomb)"
    elif cd_start + cd_size > tail:
        why = "has a central directory that overlaps its end record"
    elif cd_start + cd_size < tail:
        gap = tail - cd_start - cd_size
        why = f"has {gap} bytes between its central directory and end record (hidden data)"
    if why is not None:
        problems.append(problem(None, why))
        return None
    return count, cd_start


def _central_directory(
    data: bytes, count: int, start: int, stop: int, problems: list[Problem]
) -> list[Member] | None:
    members: list[Member] = []
    pos = start
    for index in range(count):
        if pos + CENTRAL.size > stop:
            problems.append(problem(None, f"has a central directory too short for {count} entries"))
            return None
        fields = CENTRAL.unpack_from(data, pos)
        sig, made, need, flags, method, _time, _date, crc, csize, usize = fields[:10]
        name_len, extra_len, comment_len, disk, _internal, attr, offset = fields[10:]
        name_end = pos + CENTRAL.size + name_len
        record_end = name_end + extra_len + comment_len
        if sig != CENTRAL_SIG or record_end > stop:
            problems.append(problem(None, f"has a corrupt central directory record #{index}"))
            return None
        member = Member(
            index,
            data[pos + CENTRAL.size : name_end],
            made,
            flags,
            method,
            crc,
            csize,
            usize,
            attr,
            offset,
        )
        reasons = _feature_reasons(member, need)
        if disk:
            reasons.append("lives on another disk (a multi-disk archive)")
        if _U32 in (csize, usize, offset):
            reasons.append("uses ZIP64 marker values in its central directory record")
        extra = _extra_reason(data[name_end : name_end + extra_len], "central directory")
        if extra is not None:
            reasons.append(extra)
        problems += [problem(member.name, why) for why in reasons]
        members.append(member)
        pos = record_end
    if pos != stop:
        why = f"has {stop - pos} bytes in its central directory that belong to no record"
        problems.append(problem(None, why + " (hidden data)"))
        return None
    return members


def _feature_reasons(member: Member, need: int) -> list[str]:
    reasons: list[str] = []
    if member.flags & FLAG_ENCRYPTED:
        reasons.append("is encrypted (flag bit 0); an encrypted entry cannot be checked")
    unknown = member.flags & ~_ALLOWED_FLAGS & _U16
    if unknown:
        reasons.append(
            f"sets flag bits 0x{unknown:04x} (strong encryption, masked headers, patched "
            "data or reserved), which change how it must be read"
        )
    if member.method not in (STORED, DEFLATED):
        reasons.append(
            f"uses compression method {member.method}; only STORED (0) and DEFLATED (8) are "
            "accepted (an unknown method, or AES encryption as method 99)"
        )
    elif member.method == STORED and member.compressed != member.size:
        reasons.append(
            f"is STORED but declares {member.compressed} stored and {member.size} "
            "uncompressed bytes (sizes that lie)"
        )
    if need > MAX_VERSION:
        reasons.append(
            f"needs ZIP version {need / 10:.1f}; only 2.0 features are accepted (no ZIP64, "
            "strong encryption or newer compression)"
        )
    return reasons


def _extra_reason(block: bytes, where: str) -> str | None:
    pos = 0
    while pos + 4 <= len(block):
        ident, size = struct.unpack_from("<HH", block, pos)
        if ident in _BAD_EXTRAS:
            return f"carries {_BAD_EXTRAS[ident]} in its {where} header"
        pos += 4 + size
    if pos != len(block):
        return f"has a malformed extra field in its {where} header"
    return None


def _local_header(data: bytes, member: Member, problems: list[Problem]) -> Member:
    """`member` with its data range, after comparing its local header with the directory."""
    pos = member.offset
    if pos + LOCAL.size > len(data) or LOCAL.unpack_from(data, pos)[0] != LOCAL_SIG:
        why = f"points at offset {pos}, where there is no local header"
        problems.append(problem(member.name, why))
        return member
    _sig, need, flags, method, _time, _date, crc, csize, usize, name_len, extra_len = (
        LOCAL.unpack_from(data, pos)
    )
    name_end = pos + LOCAL.size + name_len
    data_start = name_end + extra_len
    if data_start + member.compressed > len(data):
        problems.append(problem(member.name, "has a local header or data past the archive end"))
        return member
    reasons: list[str] = []
    local_name = data[pos + LOCAL.size : name_end]
    if local_name != member.raw_name:
        shown = printable(local_name.decode("utf-8", "surrogateescape"))
        reasons.append(f"is named '{shown}' in its local header (local and central disagree)")
    if flags != member.flags:
        reasons.append(
            f"has flags 0x{flags:04x} in its local header but 0x{member.flags:04x} in the "
            "central directory (local and central disagree)"
        )
    if method != member.method:
        reasons.append(
            f"has compression method {method} in its local header but {member.method} in "
            "the central directory (local and central disagree)"
        )
    if need > MAX_VERSION:
        reasons.append(f"needs ZIP version {need / 10:.1f} in its local header")
    local = (crc, csize, usize)
    central = (member.crc, member.compressed, member.size)
    if local != central and not (flags & FLAG_DESCRIPTOR and local == (0, 0, 0)):
        reasons.append(
            f"declares CRC/sizes {_triple(local)} in its local header but {_triple(central)} "
            "in the central directory (sizes that lie)"
        )
    extra = _extra_reason(data[name_end:data_start], "local")
    if extra is not None:
        reasons.append(extra)
    end = data_start + member.compressed
    if member.flags & FLAG_DESCRIPTOR:
        end = _descriptor_end(data, end, central, reasons)
    problems += [problem(member.name, why) for why in reasons]
    return replace(member, data_start=data_start, end=end)


def _triple(values: tuple[int, int, int]) -> str:
    return f"{values[0]:08x}/{values[1]}/{values[2]}"


def _descriptor_end(
    data: bytes, pos: int, central: tuple[int, int, int], reasons: list[str]
) -> int:
    """The end of the data descriptor at `pos` (with or without its signature)."""
    signed = data[pos : pos + 4] == _DESCRIPTOR_SIG and pos + 16 <= len(data)
    if signed and _DESCRIPTOR.unpack_from(data, pos + 4) == central:
        return pos + 16
    if pos + 12 <= len(data) and _DESCRIPTOR.unpack_from(data, pos) == central:
        return pos + 12
    reasons.append("has a data descriptor that is missing or disagrees with the directory")
    return pos


def _check_layout(members: list[Member], cd_start: int, problems: list[Problem]) -> None:
    """Every byte before the central directory belongs to exactly one entry, in order."""
    cursor = 0
    previous: Member | None = None
    for member in sorted((m for m in members if m.end >= 0), key=lambda m: (m.offset, m.index)):
        if member.offset < cursor and previous is not None:
            why = (
                f"overlaps entry '{printable(previous.name)}' (overlapping entries: one "
                "byte range read as two files)"
            )
            problems.append(problem(member.name, why))
        elif member.offset > cursor:
            gap = member.offset - cursor
            why = f"is preceded by {gap} bytes that belong to no entry (a stub or hidden data)"
            problems.append(problem(member.name, why))
        cursor = max(cursor, member.end)
        previous = member
    if cursor > cd_start and previous is not None:
        problems.append(problem(previous.name, "runs into the central directory (overlap)"))
    elif cursor < cd_start:
        gap = cd_start - cursor
        why = f"has {gap} bytes before its central directory that belong to no entry"
        problems.append(problem(None, why + " (hidden data)"))


def inflate(data: bytes, member: Member) -> tuple[bytes, str | None]:
    """The entry's bytes, read with a hard cap at its declared size, and why they are bad.

    Refused: more bytes than declared, fewer, a stream that ends early or before its
    compressed size is used up (hidden bytes), corrupt DEFLATE data, and a CRC mismatch.
    """
    view = memoryview(data)[member.data_start : member.data_start + member.compressed]
    if member.method == STORED:
        out = bytes(view)
    else:
        inflater = zlib.decompressobj(-zlib.MAX_WBITS)
        try:
            out = inflater.decompress(view, member.size + 1)
            while len(out) <= member.size and not inflater.eof:
                tail = inflater.unconsumed_tail
                more = inflater.decompress(tail, 1)
                if not more and len(inflater.unconsumed_tail) == len(tail):
                    break
                out += more
        except zlib.error as exc:
            return b"", f"has corrupt DEFLATE data ({exc})"
        if len(out) > member.size:
            return b"", f"inflates to more than its declared {member.size} bytes (sizes that lie)"
        if not inflater.eof:
            return b"", "has DEFLATE data that ends early (truncated or sizes that lie)"
        if inflater.unused_data:
            extra = len(inflater.unused_data)
            return b"", f"has {extra} bytes after its DEFLATE stream (hidden data)"
    if len(out) != member.size:
        return b"", (f"holds {len(out)} bytes but declares {member.size} (sizes that lie)")
    crc = zlib.crc32(out)
    if crc != member.crc:
        return b"", f"has CRC {crc:08x} but declares {member.crc:08x} (corrupt or tampered)"
    return out, None
