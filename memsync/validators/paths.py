"""Path, entry and byte rules for every synchronized file (pure functions).

Paths are `str` decoded from Git's bytes with `errors="surrogateescape"`, so a lone
surrogate means the name was not UTF-8. Every Problem's `path` is the printable form of
the path (see `printable`), so a hostile name never reaches a terminal or a log raw.

The `.git` rules follow Git's own `is_ntfs_dotgit` (path.c) and `is_hfs_dotgit` (utf8.c);
the rules for the other names git guards (`.gitmodules`, `.gitattributes`, `.gitignore`,
`.mailmap`) follow `is_ntfs_dot_generic` (path.c) and `is_hfs_dot_generic` (utf8.c), which
fsck.c's `fsck_tree` applies to every tree entry. The gate refuses a superset of what
`fsck_tree` and `verify_path` (read-cache.c) refuse. Clashes between paths (case
folding, duplicate entries) are `collisions.py`'s.
"""

from __future__ import annotations

import functools
import re
import unicodedata

from memsync.validators.hiddentext import has_hidden, hidden_problem
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

# A root's `.runtime/` (imported views, live state): never synchronized, validated or watched.
RUNTIME_DIR = ".runtime"


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


# The other names git guards, with the first six characters of their NTFS 8.3 fallback
# short names (git's `is_ntfs_dotgitmodules` and siblings spell these out the same way).
GUARDED_NAMES: dict[str, str] = {
    ".gitmodules": "gi7eba",
    ".gitattributes": "gi7d29",
    ".gitignore": "gi250a",
    ".mailmap": "maba30",
}
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_DIGITS = frozenset("0123456789")


def _ntfs_tail(rest: str) -> bool:
    """Only dots and spaces up to the end or an alternate data stream (`:`)."""
    for char in rest:
        if char == ":":
            return True
        if char not in ". ":
            return False
    return True


def _ntfs_fallback_short_name(lowered: str, prefix: str) -> bool:
    """An 8.3 fallback name: up to six characters of `prefix`, `~`, 1-9, then digits (8 in all)."""
    if len(lowered) < 8:
        return False
    tilde = lowered.find("~", 0, 7)
    return (
        tilde >= 0
        and lowered[:tilde] == prefix[:tilde]
        and lowered[tilde + 1] in "123456789"
        and all(c in _DIGITS for c in lowered[tilde + 2 : 8])
    )


def is_ntfs_equivalent(component: str, name: str) -> bool:
    """Whether NTFS may open `component` as the guarded `name` (say `.gitmodules`).

    Mirrors git's `is_ntfs_dot_generic`: the name in any ASCII case, or its short name
    (six characters, `~1` to `~4`), or its fallback short name; then only dots and spaces
    up to the end or an alternate data stream.
    """
    bare = name[1:]
    lowered = component.translate(_ASCII_LOWER)
    if lowered.startswith(name):
        return _ntfs_tail(component[len(name) :])
    short = lowered[:6] == bare[:6] and lowered[6:7] == "~" and lowered[7:8] in ("1", "2", "3", "4")
    if short or _ntfs_fallback_short_name(lowered, GUARDED_NAMES[name]):
        return _ntfs_tail(component[8:])
    return False


def is_hfs_equivalent(component: str, name: str) -> bool:
    """`name` in any ASCII case once HFS+-ignorable code points are gone (`is_hfs_dot_generic`)."""
    stripped = "".join(c for c in component if ord(c) not in HFS_IGNORABLES)
    return stripped.isascii() and stripped.translate(_ASCII_LOWER) == name


def guarded_names(component: str) -> list[str]:
    """The names git guards (`.gitmodules`, ...) that some file system may take `component` for.

    A backslash separates components on Windows, so each backslash-separated part counts.
    `.git` itself is `is_dotgit`'s business. Usually empty; `~1000000` is all four.
    """
    parts = component.split("\\")
    return [
        name
        for name in GUARDED_NAMES
        if any(is_ntfs_equivalent(p, name) or is_hfs_equivalent(p, name) for p in parts)
    ]


def _guarded_problem(path: str, components: list[str]) -> Problem | None:
    """`dotgit-path` for a component that is, or that a file system may take for, a name git
    guards. The one exception: `.gitignore` spelled exactly so as the last component (a
    file) is left to the allowlist, which synchronizes it at the root and in shared views.
    """
    last = len(components) - 1
    for depth, component in enumerate(components):
        if is_dotgit(component):
            why = "which some file systems treat as '.git', Git's own repository metadata"
        else:
            names = guarded_names(component)
            if not names or (
                names == [".gitignore"] and component == ".gitignore" and depth == last
            ):
                continue
            why = _GUARDED_WHY[names[0]]
            if component != names[0]:
                why = f"which some file systems treat as {why}"
            else:
                why = f"which is {why}"
        shown = printable(path)
        message = f"'{shown}' has the component '{printable(component)}', {why}"
        return Problem("dotgit-path", shown, None, message)
    return None


_GUARDED_WHY = {
    ".gitmodules": "'.gitmodules', where git reads submodules from",
    ".gitattributes": "'.gitattributes', which tells git which filters and drivers to run",
    ".gitignore": (
        "'.gitignore' (only a file spelled exactly '.gitignore' at the root or in a shared "
        "view is synchronized)"
    ),
    ".mailmap": "'.mailmap', which git reads to rewrite author names",
}


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
    guarded = _guarded_problem(path, path.split("/"))
    if guarded is not None:
        return guarded
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
    """The byte rules of one synchronized file (every one is text): `not-utf8`, then
    `hidden-text` (code points a reader cannot see; `hiddentext.py`)."""
    text = _decoded(path, data)
    if isinstance(text, Problem):
        return text
    return hidden_problem(printable(path), text) if has_hidden(data) else None


def check_utf8(path: str, data: bytes) -> Problem | None:
    """`not-utf8` with the line of the first invalid byte."""
    text = _decoded(path, data)
    return text if isinstance(text, Problem) else None


def _decoded(path: str, data: bytes) -> str | Problem:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        shown = printable(path)
        message = f"'{shown}' is not valid UTF-8 (line {line}, byte offset {exc.start})"
        return Problem("not-utf8", shown, line, message)
