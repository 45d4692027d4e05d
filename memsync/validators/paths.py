"""Path, entry and byte rules for every synchronized file (pure functions).

Paths are `str` decoded from Git's bytes with `errors="surrogateescape"`, so a lone
surrogate means the name was not UTF-8. Every Problem's `path` is the printable form of
the path (see `printable`), so a hostile name never reaches a terminal or a log raw.

The `.git` rules follow Git's own `is_ntfs_dotgit` (path.c) and `is_hfs_dotgit` (utf8.c).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem
from memsync.validators.tree import (
    MODE_EXECUTABLE,
    MODE_FILE,
    MODE_GITLINK,
    MODE_SYMLINK,
    Entry,
)

# Code points HFS+ ignores when comparing names (Git's next_hfs_char).
HFS_IGNORABLES = frozenset(
    [*range(0x200C, 0x2010), *range(0x202A, 0x202F), *range(0x206A, 0x2070), 0xFEFF]
)

_WINDOWS_RESERVED = frozenset(
    ["CON", "CONIN$", "CONOUT$", "PRN", "AUX", "NUL"]
    + [f"{dev}{n}" for dev in ("COM", "LPT") for n in "123456789\u00b9\u00b2\u00b3"]
)
_WINDOWS_FORBIDDEN = frozenset('<>:"|?*')
_ASCII_UPPER = str.maketrans("abcdefghijklmnopqrstuvwxyz", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")

# The common case, decided by two regexes: ASCII components that start with a letter, digit
# or underscore (so no `.git`, `..` or `git~1`), no trailing dot, no Windows device name.
_PLAIN = re.compile(r"(?:[A-Za-z0-9_][A-Za-z0-9_.-]*/)*[A-Za-z0-9_][A-Za-z0-9_.-]*")
_PLAIN_RISK = re.compile(
    r"\./|\.$|(?:^|/)(?:con|prn|aux|nul|com[1-9]|lpt[1-9])(?:[./]|$)", re.IGNORECASE
)


def printable(path: str) -> str:
    """`path` with backslashes, control, format and surrogate characters escaped like ascii().

    The mapping is injective, so two different paths never print the same.
    """
    out: list[str] = []
    for char in path:
        if char == "\\":
            out.append("\\\\")
        elif char.isprintable():
            out.append(char)
        else:
            out.append(ascii(char)[1:-1])
    return "".join(out)


def is_ntfs_dotgit(component: str) -> bool:
    """`.git` or its 8.3 short name `git~1`, any case, then dots/spaces, an ADS or the end."""
    lowered = component.translate(str.maketrans("GIT", "git"))
    if lowered.startswith(".git"):
        rest = component[4:]
    elif lowered.startswith("git~1"):
        rest = component[5:]
    else:
        return False
    for char in rest:
        if char in ":\\/":
            return True
        if char not in ". ":
            return False
    return True


def is_hfs_dotgit(component: str) -> bool:
    """`.git` in any ASCII case once the code points HFS+ ignores are removed."""
    stripped = "".join(c for c in component if ord(c) not in HFS_IGNORABLES)
    return stripped.isascii() and stripped.lower() == ".git"


def is_dotgit(component: str) -> bool:
    """Git's NTFS or HFS+ `.git` test; a backslash separates components on Windows."""
    return any(is_ntfs_dotgit(part) or is_hfs_dotgit(part) for part in component.split("\\"))


def _unsafe(path: str, why: str) -> Problem:
    shown = printable(path)
    return Problem("unsafe-path", shown, None, f"unsafe path '{shown}': {why}")


def _structural(path: str) -> str | None:
    """Reasons that make the path meaningless as a relative path; checked before `.git`."""
    if not path:
        return "the path is empty"
    if any(0xD800 <= ord(c) <= 0xDFFF for c in path):
        return "the name is not valid UTF-8"
    if any(unicodedata.category(c) == "Cc" for c in path):
        return "it contains a control character (NUL, DEL, C0 or C1)"
    if path.startswith("/"):
        return "it is absolute"
    if path.endswith("/"):
        return "it ends with a slash"
    for segment in path.split("/"):
        if segment in ("", ".", ".."):
            return f"it has an empty, '.' or '..' segment ({segment!r})"
    return None


def _portable(path: str, policy: SyncPolicy) -> str | None:
    """Reasons that break the path on some file system Git checks out to."""
    if "\\" in path:
        return "it contains a backslash"
    if not unicodedata.is_normalized("NFC", path):
        return "it is not in Unicode NFC form"
    size = len(path.encode("utf-8"))
    if size > policy.max_path_bytes:
        return f"it is {size} bytes long, over the {policy.max_path_bytes}-byte cap"
    for component in path.split("/"):
        size = len(component.encode("utf-8"))
        if size > policy.max_component_bytes:
            cap = policy.max_component_bytes
            return f"a component is {size} bytes long, over the {cap}-byte cap"
        stem = component.split(".", 1)[0].split(":", 1)[0].rstrip(" ")
        if stem.translate(_ASCII_UPPER) in _WINDOWS_RESERVED:
            return f"'{printable(component)}' is a reserved device name on Windows"
        if component.endswith((".", " ")):
            return f"'{printable(component)}' ends with a dot or a space"
        bad = sorted(set(component) & _WINDOWS_FORBIDDEN)
        if bad:
            return f"'{printable(component)}' contains {''.join(bad)!r}, which Windows forbids"
    return None


def _is_plain(path: str, policy: SyncPolicy) -> bool:
    """True when no unsafe-path or dotgit-path rule can apply (checked without splitting)."""
    if _PLAIN.fullmatch(path) is None or _PLAIN_RISK.search(path) is not None:
        return False
    if len(path) > policy.max_component_bytes:
        return len(path) <= policy.max_path_bytes and all(
            len(c) <= policy.max_component_bytes for c in path.split("/")
        )
    return True


def _allowlist(path: str, policy: SyncPolicy) -> Problem | None:
    if policy.is_legacy(path):
        shown = printable(path)
        message = f"'{shown}' is a legacy reference file; it stays local and is never synchronized"
        return Problem("legacy-reference", shown, None, message)
    if not policy.allows(path):
        shown = printable(path)
        message = f"'{shown}' is outside the synchronized memory files (the sync allowlist)"
        return Problem("path-not-allowed", shown, None, message)
    return None


@functools.lru_cache(maxsize=1 << 16)
def check_name(path: str, policy: SyncPolicy) -> Problem | None:
    """The first name rule `path` breaks, or None when it may be synchronized.

    Pure, so cached: a daemon re-validating a large root sees the same names every cycle.
    """
    if _is_plain(path, policy):
        return _allowlist(path, policy)
    return check_name_fully(path, policy)


def check_name_fully(path: str, policy: SyncPolicy) -> Problem | None:
    """`check_name` without the fast path (the reference the fast path is tested against)."""
    why = _structural(path)
    if why is not None:
        return _unsafe(path, why)
    shown = printable(path)
    for component in path.split("/"):
        if is_dotgit(component):
            message = (
                f"'{shown}' has the component '{printable(component)}', which some file "
                "systems treat as '.git', Git's own repository metadata"
            )
            return Problem("dotgit-path", shown, None, message)
    why = _portable(path, policy)
    if why is not None:
        return _unsafe(path, why)
    return _allowlist(path, policy)


def check_entry(path: str, entry: Entry, policy: SyncPolicy) -> list[Problem]:
    """Mode and size rules for one tree entry."""
    size = entry.size if entry.size is not None else _data_size(entry)
    if entry.mode == MODE_FILE and (size is None or size <= policy.max_file_size):
        return []
    shown = printable(path)
    problems: list[Problem] = []
    if entry.mode == MODE_GITLINK:
        problems.append(Problem("gitlink", shown, None, f"'{shown}' is a submodule (gitlink)"))
    elif entry.mode == MODE_SYMLINK:
        problems.append(Problem("symlink", shown, None, f"'{shown}' is a symbolic link"))
    elif entry.mode == MODE_EXECUTABLE:
        message = f"'{shown}' is executable (mode 100755); memory files must be mode 100644"
        problems.append(Problem("executable", shown, None, message))
    elif entry.mode != MODE_FILE:
        message = f"'{shown}' is not a regular file (mode {entry.mode:06o})"
        problems.append(Problem("special-file", shown, None, message))
    if size is not None and size > policy.max_file_size:
        message = f"'{shown}' is {size} bytes, over the {policy.max_file_size}-byte cap"
        problems.append(Problem("too-large", shown, None, message))
    return problems


def _data_size(entry: Entry) -> int | None:
    return None if entry.data is None else len(entry.data)


def within_cap(entry: Entry, policy: SyncPolicy) -> bool:
    """A regular file whose bytes may be read (its size is unknown or within the cap)."""
    size = entry.size if entry.size is not None else _data_size(entry)
    return entry.is_regular and (size is None or size <= policy.max_file_size)


def check_text(path: str, data: bytes) -> Problem | None:
    """`not-utf8` with the line of the first invalid byte; every synchronized file is text."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        shown = printable(path)
        message = f"'{shown}' is not valid UTF-8 (line {line}, byte offset {exc.start})"
        return Problem("not-utf8", shown, line, message)
    return None


@functools.lru_cache(maxsize=1 << 16)
def _fold(component: str) -> str:
    if component.isascii():
        return component.lower()
    normalized = unicodedata.normalize("NFC", component).casefold()
    return "".join(c for c in normalized if ord(c) not in HFS_IGNORABLES)


def case_collisions(paths: Iterable[str]) -> list[Problem]:
    """`case-collision` for paths that clash on case-insensitive or normalizing file systems.

    Components are compared after NFC, case folding and dropping HFS+-ignorable code
    points, at every depth: `A/x` and `a/y` clash on the directory, and a file clashes with
    a directory of the same folded name. Each clashing path is reported once, naming the
    first (sorted) path it clashes with.
    """
    ordered = sorted(set(paths))
    if not _may_collide(ordered):
        return []
    split = {p: p.split("/") for p in ordered}
    folded = {p: tuple(_fold(c) for c in parts) for p, parts in split.items()}
    # folded prefix -> {(spelling of the prefix, is it the file itself): first path}
    seen: dict[tuple[str, ...], dict[tuple[tuple[str, ...], bool], str]] = {}
    for path, parts in split.items():
        for depth in range(1, len(parts) + 1):
            shape = (tuple(parts[:depth]), depth == len(parts))
            seen.setdefault(folded[path][:depth], {}).setdefault(shape, path)
    by_key: dict[tuple[str, ...], list[str]] = {}
    for path, key in folded.items():
        by_key.setdefault(key, []).append(path)
    problems: list[Problem] = []
    for path, parts in split.items():
        shown = printable(path)
        same = [p for p in by_key[folded[path]] if p != path]
        if same:
            message = f"'{shown}' collides with '{printable(same[0])}'{_WHERE}"
            problems.append(Problem("case-collision", shown, None, message))
            continue
        for depth in range(1, len(parts) + 1):
            shapes = seen[folded[path][:depth]]
            if len(shapes) < 2:
                continue
            mine = (tuple(parts[:depth]), depth == len(parts))
            other = min(p for shape, p in shapes.items() if shape != mine)
            mine_at = printable("/".join(parts[:depth]))
            other_at = printable("/".join(split[other][:depth]))
            if mine_at == other_at:
                why = f"'{mine_at}' is both a file and a directory"
            else:
                why = f"'{mine_at}' and '{other_at}' are one entry{_WHERE}"
            message = f"'{shown}' collides with '{printable(other)}': {why}"
            problems.append(Problem("case-collision", shown, None, message))
            break
    return problems


def _may_collide(paths: list[str]) -> bool:
    """A cheap screen: False when no two paths or directory prefixes fold to one name."""
    files: set[str] = set()
    dirs: dict[str, str] = {}
    for path in paths:
        key = "/".join(_fold(c) for c in path.split("/"))
        if key in files:
            return True
        files.add(key)
        cut = path.rfind("/")
        while cut > 0:
            prefix = path[:cut]
            folded = (
                key[: len(prefix)]
                if prefix.isascii()
                else "/".join(_fold(c) for c in prefix.split("/"))
            )
            if dirs.setdefault(folded, prefix) != prefix:
                return True
            cut = path.rfind("/", 0, cut)
    return any(key in files for key in dirs)


_WHERE = " on case-insensitive or Unicode-normalizing file systems (macOS, Windows)"
