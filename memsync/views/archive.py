"""Package archives: written deterministically, checked completely, extracted safely.

`write_zip` makes the only archive shape memsync produces: entries sorted by name, no
directory entries, a fixed 1980-01-01 timestamp, Unix mode 100644, DEFLATE at a fixed
level, UTF-8 names, no extra fields or comments; the same files give the same bytes.

`scan_zip` and `extract_zip` accept any well-formed ZIP that a package could be, and refuse
everything SECURITY.md lists (each refusal is an `archive-invalid` problem, a file over
the per-file cap `too-large`):

- format and layout (`zipscan.py`): not a ZIP, archive comment or trailing bytes, leading
  bytes, gaps, overlapping entries or entries running into the central directory, a
  central directory with junk, ZIP64 (marker values, locator, extra field), multi-disk,
  encryption (flag bit 0, strong-encryption bits or headers, AES), methods other than
  STORED and DEFLATED, version needed above 2.0, unknown flag bits, local and central
  headers that disagree (name, flags, method, CRC and sizes unless a data descriptor
  carries them, which must then agree), malformed extra fields, extra fields that give a
  second name or a link target (Info-ZIP Unicode path, PKWARE Unix);
- names: invalid UTF-8, non-ASCII without the UTF-8 flag, and every `unsafe-path` and
  `dotgit-path` rule of `validators/paths.py` (absolute, `..`, empty or `.` segments,
  backslash, drive letters and other Windows-forbidden characters, control characters,
  not NFC, Windows-reserved names, trailing dot or space, `.git` in any spelling,
  over-long names), deeper than `max_depth` components, duplicates, and collisions once
  case and Unicode normalisation are ignored (a file clashing with a directory included);
- kinds and modes: symlinks, hardlinks (PKWARE Unix extra), special files, Windows
  reparse points and devices, setuid/setgid/sticky bits, executable files, directory
  flags that contradict the name, directory entries with content;
- bombs: more than `max_entries` entries, a declared total over `max_total`, an entry
  inflating more than `max_ratio` times (entries up to 64 KiB are exempt), an archive
  file larger than packages within the limits can be;
- size: a file over `max_file` is `too-large` (the one cap a consumer may raise, per view,
  up to `MAX_FILE_CEILING`);
- content (checked once everything above passed): more or fewer bytes than declared
  (inflation is capped at the declared size), truncated, corrupt or over-long DEFLATE
  data, CRC mismatch.

Empty directory entries are accepted and ignored: extraction creates exactly the
directories that file names need, so the extracted tree is exactly the returned mapping.

`unpack` is the extraction `views pull` uses: it returns the bytes with their hashes,
leaves the fsyncs to the caller (`previous.sync_tree`, run while the package is
validated), and takes the members whose compressed stream the previous import's package
held from that import instead of inflating them (`previous.py` says when that is exact).
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import stat
import zlib
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import cast

from memsync.errors import ProblemError, require
from memsync.validators.collisions import case_collisions
from memsync.validators.paths import check_name_fully, printable
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem
from memsync.views.previous import Previous, sync_tree
from memsync.views.zipscan import (
    CENTRAL,
    CENTRAL_SIG,
    DEFLATED,
    EOCD,
    EOCD_SIG,
    FLAG_UTF8,
    LOCAL,
    LOCAL_SIG,
    MAX_VERSION,
    Member,
    inflate,
    problem,
    read_archive,
)

MiB = 1024 * 1024
COMPRESS_LEVEL = 9
_DOS_DATE_1980_01_01 = (1 << 5) | 1  # DOS date: years since 1980, month, day; time 00:00:00
_UNIX = 3
_FILE_ATTR = 0o100644 << 16
_RATIO_FLOOR = 64 * 1024  # smaller entries cannot amplify much, whatever their ratio
_DOS_DIRECTORY = 0x10
_DOS_DEVICE = 0x40
_DOS_REPARSE_POINT = 0x400
_DRIVE = re.compile(r"[A-Za-z]:")
_OPEN_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_WORKERS = min(4, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1)
_PARALLEL_FROM = MiB  # below this, starting threads costs more than it saves
_OPEN_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


MAX_FILE_CEILING = 10 * MiB  # `views.<name>.max_file_size` and `--max-file-size` go up to this


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps on one package archive; each may be lowered, never raised (ValueError), but
    the per-file cap, which may be raised up to `MAX_FILE_CEILING` (the package total)."""

    max_entries: int = 512
    max_total: int = 10 * MiB
    max_file: int = MiB
    max_ratio: int = 200
    max_depth: int = 4
    max_name_bytes: int = 255

    def __post_init__(self) -> None:
        for spec in fields(self):
            value = getattr(self, spec.name)
            ceiling = MAX_FILE_CEILING if spec.name == "max_file" else cast(int, spec.default)
            if type(value) is not int or not 1 <= value <= ceiling:
                raise ValueError(f"{spec.name} must be an integer from 1 to {ceiling}")

    @property
    def max_archive(self) -> int:
        """The largest archive file read at all: the total with slack for headers."""
        return 2 * self.max_total + self.max_entries * 1024 + 1024


class ArchiveError(ProblemError):
    """A package archive was refused; `problems` are `archive-invalid` (or `too-large`
    for a file over the per-file cap), one per finding."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        super().__init__("the package archive was refused", problems)


def too_large(name: str, size: int, cap: int) -> Problem:
    """A `too-large` problem: one file of a package over the per-file cap."""
    shown = printable(name)
    return Problem(
        "too-large",
        shown,
        None,
        f"'{shown}' is {size} bytes, over the {cap}-byte per-file cap of view packages "
        "(a consumer raises it with views.<name>.max_file_size, a builder with "
        "--max-file-size)",
    )


def write_zip(files: Mapping[str, bytes], limits: ArchiveLimits | None = None) -> bytes:
    """The deterministic archive of `files` (relative POSIX path -> bytes).

    Raises ArchiveError when the result would be refused by `scan_zip`, so memsync never
    publishes a package its consumers reject.
    """
    limits = limits or ArchiveLimits()
    problems = _unpackable(files, limits)
    if problems:
        raise ArchiveError(problems)
    body = bytearray()
    directory = bytearray()
    for name in sorted(files):
        data = files[name]
        raw = name.encode("utf-8", "surrogatepass")  # a lone surrogate is then refused
        packer = zlib.compressobj(COMPRESS_LEVEL, zlib.DEFLATED, -zlib.MAX_WBITS)
        packed = packer.compress(data) + packer.flush()
        crc = zlib.crc32(data)
        common = (FLAG_UTF8, DEFLATED, 0, _DOS_DATE_1980_01_01, crc, len(packed), len(data))
        made = (_UNIX << 8) | MAX_VERSION
        # name, extra, comment lengths; disk, internal and external attributes; offset
        tail = (len(raw), 0, 0, 0, 0, _FILE_ATTR, len(body))
        directory += CENTRAL.pack(CENTRAL_SIG, made, MAX_VERSION, *common, *tail) + raw
        body += LOCAL.pack(LOCAL_SIG, MAX_VERSION, *common, len(raw), 0) + raw + packed
    count = len(files)
    end = EOCD.pack(EOCD_SIG, 0, 0, count, count, len(directory), len(body), 0)
    archive = bytes(body + directory + end)
    problems, _ = inspect_bytes(archive, limits)
    if problems:
        raise ArchiveError(problems)
    return archive


def _unpackable(files: Mapping[str, bytes], limits: ArchiveLimits) -> list[Problem]:
    """What would stop `files` from fitting the ZIP fields at all (checked before packing)."""
    problems: list[Problem] = []
    if len(files) > limits.max_entries:
        problems.append(problem(None, f"would have {len(files)} entries, over the cap"))
    for name, data in files.items():
        if len(data) > limits.max_file:
            problems.append(too_large(name, len(data), limits.max_file))
        if len(name.encode("utf-8", "surrogatepass")) > limits.max_name_bytes:
            problems.append(problem(name, "has a name over the byte cap"))
    return problems


def scan_zip(path: Path, limits: ArchiveLimits | None = None) -> list[Problem]:
    """Every problem of the archive at `path`; empty when `extract_zip` would accept it."""
    return _load(path, limits or ArchiveLimits())[0]


def extract_zip(
    path: Path,
    dest: Path,
    limits: ArchiveLimits | None = None,
    *,
    file_mode: int = 0o600,
    durable: bool = True,
) -> dict[str, str]:
    """Extract the archive at `path` into the new directory `dest` (0700).

    Returns relative path -> sha256 hex of the bytes written. Every check runs before
    anything is written. `dest` must not exist (FileExistsError) but its parent must. Files
    are created with O_EXCL | O_NOFOLLOW and mode `file_mode` (0600 or 0644), directories
    0700 (0755 with 0644 files). On ArchiveError or any OSError nothing is left at `dest`.
    """
    unpacked = unpack(path, dest, limits, file_mode=file_mode)
    if durable:
        try:
            sync_tree(dest)
        except BaseException:
            shutil.rmtree(dest, ignore_errors=True)
            raise
    return unpacked.hashes


@dataclass(frozen=True)
class Unpacked:
    """What `unpack` wrote: each file's bytes and SHA-256 hex (in path order, as a tree
    walk lists them) and the files linked from the previous import."""

    contents: dict[str, bytes]
    hashes: dict[str, str]
    linked: frozenset[str] = frozenset()


def unpack(
    path: Path,
    dest: Path,
    limits: ArchiveLimits | None = None,
    *,
    file_mode: int = 0o600,
    previous: Previous | None = None,
) -> Unpacked:
    """`extract_zip` without the fsyncs (`previous.sync_tree` makes the tree durable),
    returning the bytes too. A member whose compressed stream `previous` holds is not
    inflated: the previous import's file is linked when it still holds those bytes."""
    if file_mode not in (0o600, 0o644):
        raise ValueError("file_mode must be 0o600 or 0o644")
    limits = limits or ArchiveLimits()
    data, problems = _read(path, limits)
    members: list[Member] = []
    if not problems:
        members, problems = _checked_members(data, limits)
    if problems:
        raise ArchiveError(problems)
    files = [m for m in members if not m.is_dir]
    known = {m.name: h for m in files if previous and (h := previous.same(data, m))}
    fresh = [m for m in members if m.name not in known]
    contents, problems, hashes = _inflated(data, fresh, digest=True)
    if problems:
        raise ArchiveError(problems)
    dest.mkdir(mode=0o700)
    try:
        _write_tree(dest, data, files, (contents, hashes), known, file_mode, previous)
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    order = sorted(contents, key=lambda name: name.split("/"))
    return Unpacked(
        {n: contents[n] for n in order},
        {n: hashes[n] for n in order},
        frozenset(previous.linked) if previous else frozenset(),
    )


def _load(path: Path, limits: ArchiveLimits) -> tuple[list[Problem], dict[str, bytes]]:
    data, problems = _read(path, limits)
    return (problems, {}) if problems else inspect_bytes(data, limits)


def _read(path: Path, limits: ArchiveLimits) -> tuple[bytes, list[Problem]]:
    with path.open("rb") as handle:
        data = handle.read(limits.max_archive + 1)
    if len(data) > limits.max_archive:
        why = f"is over {limits.max_archive} bytes, more than a package within the limits"
        return b"", [problem(None, why)]
    return data, []


def inspect_bytes(data: bytes, limits: ArchiveLimits) -> tuple[list[Problem], dict[str, bytes]]:
    """(problems, file contents by name) for the archive `data`; contents only when clean."""
    members, problems = _checked_members(data, limits)
    if problems:
        return problems, {}
    contents, problems, _ = _inflated(data, members)
    return problems, ({} if problems else contents)


def _checked_members(data: bytes, limits: ArchiveLimits) -> tuple[list[Member], list[Problem]]:
    """The entries and every problem short of their content (format, names, kinds, caps)."""
    members, problems = read_archive(data, limits.max_entries)
    for member in members:
        problems += [problem(member.name, why) for why in _entry_reasons(member, limits)]
        if not member.is_dir and member.size > limits.max_file:
            problems.append(too_large(member.name, member.size, limits.max_file))
    problems += _duplicates(members) + _collisions(members)
    total = sum(m.size for m in members)
    if total > limits.max_total:
        why = f"declares {total} uncompressed bytes, over the {limits.max_total}-byte cap"
        problems.append(problem(None, why + " (a zip bomb)"))
    return members, list(dict.fromkeys(problems))


def _inflated(
    data: bytes, members: Sequence[Member], *, digest: bool = False
) -> tuple[dict[str, bytes], list[Problem], dict[str, str]]:
    """Each member's content, every problem of it checked (directory entries too: they
    must hold an empty stream), and with `digest` each file's SHA-256 hex; only files are
    returned. Large archives are inflated on several threads (zlib and hashlib run
    without the GIL); the results keep the members' order."""
    contents: dict[str, bytes] = {}
    problems: list[Problem] = []
    work = functools.partial(_inflate_one, data, digest)
    workers = min(_WORKERS, len(members))
    if workers > 1 and sum(m.size for m in members) >= _PARALLEL_FROM:
        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(work, members))
    else:
        results = [work(member) for member in members]
    hashes: dict[str, str] = {}
    for member, (out, bad, sha) in zip(members, results, strict=True):
        if bad is not None:
            problems.append(problem(member.name, bad))
        elif not member.is_dir:
            contents[member.name] = out
            hashes[member.name] = sha
    return contents, problems, hashes


def _inflate_one(data: bytes, digest: bool, member: Member) -> tuple[bytes, str | None, str]:
    out, bad = inflate(data, member)
    return out, bad, hashlib.sha256(out).hexdigest() if digest and bad is None else ""


def _entry_reasons(member: Member, limits: ArchiveLimits) -> list[str]:
    reasons = _name_reasons(member, limits) + _mode_reasons(member)
    if member.is_dir and member.size:
        reasons.append(f"is a directory entry with {member.size} bytes of content")
    if member.size > _RATIO_FLOOR and member.size > limits.max_ratio * max(member.compressed, 1):
        reasons.append(
            f"inflates {member.compressed} bytes to {member.size}, over the "
            f"{limits.max_ratio}:1 compression ratio cap (a zip bomb)"
        )
    return reasons


@functools.lru_cache(maxsize=8)
def _name_policy(max_name_bytes: int) -> SyncPolicy:
    """The path rules with every name allowed: the package layout check comes later."""
    return SyncPolicy(
        max_path_bytes=max_name_bytes,
        max_component_bytes=max_name_bytes,
        allowed_globs=(),
        allowed_regexes=(r"[\s\S]+",),
        legacy_files=(),
    )


def _name_reasons(member: Member, limits: ArchiveLimits) -> list[str]:
    reasons: list[str] = []
    if not member.flags & FLAG_UTF8 and not member.raw_name.isascii():
        reasons.append(
            "has a non-ASCII name without the UTF-8 flag (legacy code-page names read "
            "differently in every tool)"
        )
    path = member.name[:-1] if member.is_dir else member.name
    found = check_name_fully(path, _name_policy(limits.max_name_bytes))
    if found is not None and found.code == "dotgit-path":
        reasons.append(found.message.removeprefix(f"'{found.path}' "))
    elif found is not None and _DRIVE.match(path):
        reasons.append(
            "has an unsafe name: it starts with a drive letter (a Windows absolute path)"
        )
    elif found is not None:
        why = found.message.removeprefix(f"unsafe path '{found.path}': ")
        reasons.append(f"has an unsafe name: {why}")
    depth = path.count("/") + 1
    if depth > limits.max_depth:
        reasons.append(f"is nested {depth} levels deep, over the {limits.max_depth}-level cap")
    return reasons


def _mode_reasons(member: Member) -> list[str]:
    reasons: list[str] = []
    dos = member.external_attr & 0xFFFF
    mode = member.external_attr >> 16
    if dos & _DOS_REPARSE_POINT:
        reasons.append("is a Windows reparse point (a symlink or junction)")
    if dos & _DOS_DEVICE:
        reasons.append("is marked as a device (a special file)")
    if dos & _DOS_DIRECTORY and not member.is_dir:
        reasons.append("is marked as a directory but its name does not end with '/'")
    if not mode:
        return reasons
    kind = stat.S_IFMT(mode)
    shown = f"mode {mode:06o}"
    if kind == stat.S_IFLNK:
        reasons.append(f"is a symbolic link ({shown}); a link can point outside the package")
    elif kind == stat.S_IFDIR and not member.is_dir:
        reasons.append(f"is a directory ({shown}) but its name does not end with '/'")
    elif kind == stat.S_IFREG and member.is_dir:
        reasons.append(f"is a regular file ({shown}) but its name ends with '/'")
    elif kind not in (0, stat.S_IFREG, stat.S_IFDIR):
        reasons.append(f"is a special file, device, FIFO or socket ({shown})")
    if mode & 0o7000:
        reasons.append(f"has the setuid, setgid or sticky bit ({shown})")
    if mode & 0o111 and kind in (0, stat.S_IFREG) and not member.is_dir:
        reasons.append(f"is executable ({shown}); package files must not be")
    return reasons


def _duplicates(members: list[Member]) -> list[Problem]:
    seen: set[str] = set()
    problems: list[Problem] = []
    for member in members:
        key = member.name.rstrip("/")
        if key in seen:
            why = "appears more than once (duplicate names: tools disagree on which copy wins)"
            problems.append(problem(member.name, why))
        seen.add(key)
    return problems


def _collisions(members: list[Member]) -> list[Problem]:
    """Case and normalisation collisions; a directory entry stands for a file inside it."""
    probe = "/\x00"  # NUL never survives the name rules, so it names no real entry
    paths = [m.name[:-1] + probe if m.is_dir else m.name for m in members]
    # `printable` is injective, so a problem's printable path leads back to one entry
    names = {printable(p): m.name for p, m in zip(paths, members, strict=True)}
    problems: list[Problem] = []
    for found in case_collisions(paths):
        shown = require(found.path, "the path of a case collision")
        why = found.message.removeprefix(f"'{shown}' ").replace(printable(probe), "/")
        problems.append(problem(names[shown], why))
    return problems


def _write_tree(
    dest: Path,
    data: bytes,
    files: Sequence[Member],
    inflated: tuple[dict[str, bytes], dict[str, str]],
    known: Mapping[str, str],
    file_mode: int,
    previous: Previous | None,
) -> None:
    """Write the files under `dest` through directory fds, never following a link: a
    `known` member is linked from `previous` (else inflated now), the rest are written
    from `inflated` (bytes, SHA-256 hex), which gets every file's."""
    contents, hashes = inflated
    dir_mode = 0o755 if file_mode == 0o644 else 0o700
    dirs = {"": os.open(dest, _OPEN_DIR)}
    try:
        os.fchmod(dirs[""], 0o700)
        for member in files:
            name = member.name
            parent, _, leaf = name.rpartition("/")
            dir_fd = _directory(dirs, parent, dir_mode)
            want = known.get(name)
            if want is not None and previous is not None:
                linked = previous.link(name, want, member.size, dir_fd, file_mode)
                if linked is not None:
                    contents[name], hashes[name] = linked, want
                    continue
                out, bad, hashes[name] = _inflate_one(data, True, member)
                if bad is not None:
                    raise ArchiveError([problem(name, bad)])
                contents[name] = out
            _write_file(dir_fd, leaf, contents[name], file_mode)
    finally:
        for fd in dirs.values():
            os.close(fd)


def _write_file(dir_fd: int, leaf: str, body: bytes, file_mode: int) -> None:
    fd = os.open(leaf, _OPEN_NEW, file_mode, dir_fd=dir_fd)
    try:
        os.fchmod(fd, file_mode)
        view = memoryview(body)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)


def _directory(dirs: dict[str, int], path: str, mode: int) -> int:
    """The fd of directory `path` under the root, created (by us, 0700/0755) if missing."""
    if path in dirs:
        return dirs[path]
    parent, _, leaf = path.rpartition("/")
    parent_fd = _directory(dirs, parent, mode)
    os.mkdir(leaf, mode, dir_fd=parent_fd)
    fd = os.open(leaf, _OPEN_DIR, dir_fd=parent_fd)
    dirs[path] = fd
    os.fchmod(fd, mode)
    return fd
