"""Pure parsers for git's machine output (`-z`, porcelain v2, batch formats), bytes in.

Paths are decoded as UTF-8 with `surrogateescape`, so a name that is not valid UTF-8
survives to the validators (which refuse it) instead of being dropped or mangled.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from memsync.validators.tree import Change, Entry

_ZERO = re.compile(rb"^0+$")
UNMERGED_XY = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})


def decode_path(raw: bytes) -> str:
    return raw.decode("utf-8", errors="surrogateescape")


def encode_path(path: str) -> bytes:
    return path.encode("utf-8", errors="surrogateescape")


@dataclass(frozen=True)
class StatusEntry:
    """One changed, unmerged or untracked path of a work tree."""

    xy: str
    path: str

    @property
    def unmerged(self) -> bool:
        return self.xy in UNMERGED_XY

    @property
    def untracked(self) -> bool:
        return self.xy == "??"


@dataclass(frozen=True)
class WorkState:
    """`git status --porcelain=v2 --branch -z`: branch, HEAD, upstream and changed paths."""

    branch: str | None  # None when HEAD is detached
    head: str | None  # None on an unborn branch
    upstream: str | None  # "<remote>/<branch>" when the branch tracks one
    ahead: int | None
    behind: int | None
    entries: tuple[StatusEntry, ...]


def parse_status_v2(raw: bytes) -> WorkState:
    branch = head = upstream = None
    ahead = behind = None
    entries: list[StatusEntry] = []
    tokens = raw.split(b"\0")
    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if not token:
            continue
        kind = token[:1]
        if kind == b"#":
            key, _, value = token[2:].decode("utf-8", "surrogateescape").partition(" ")
            if key == "branch.oid" and value != "(initial)":
                head = value
            elif key == "branch.head" and value != "(detached)":
                branch = value
            elif key == "branch.upstream":
                upstream = value
            elif key == "branch.ab":
                plus, minus = value.split()
                ahead, behind = int(plus), -int(minus)
        elif kind == b"1":
            parts = token.split(b" ", 8)
            entries.append(StatusEntry(parts[1].decode("ascii"), decode_path(parts[8])))
        elif kind == b"2":
            parts = token.split(b" ", 9)
            entries.append(StatusEntry(parts[1].decode("ascii"), decode_path(parts[9])))
            i += 1  # the original path of a rename follows
        elif kind == b"u":
            parts = token.split(b" ", 10)
            entries.append(StatusEntry(parts[1].decode("ascii"), decode_path(parts[10])))
        elif kind == b"?":
            entries.append(StatusEntry("??", decode_path(token[2:])))
    return WorkState(branch, head, upstream, ahead, behind, tuple(entries))


_LS_TREE = re.compile(rb"([0-7]+) [a-z]+ ([0-9a-f]+) +(-|[0-9]+)\t([^\0]*)\0")


def parse_ls_tree(raw: bytes) -> dict[str, Entry]:
    """`git ls-tree -r -z -l`: every leaf with mode, size and object id."""
    return {
        decode_path(path): Entry(
            int(mode, 8), None if size == b"-" else int(size), oid.decode("ascii")
        )
        for mode, oid, size, path in _LS_TREE.findall(raw)
    }


def parse_log_raw(raw: bytes) -> list[tuple[str, str, int, str | None]]:
    """`git log --raw -m -z --no-abbrev --format=%x01%H`: (commit, path, new mode, new oid).

    A deletion has new mode 0 and oid None. Merges appear once per parent.
    """
    found: list[tuple[str, str, int, str | None]] = []
    tokens = raw.split(b"\0")
    commit = ""
    i = 0
    while i < len(tokens):
        token = tokens[i].lstrip(b"\n")
        i += 1
        if token.startswith(b"\x01"):
            commit = token[1:].decode("ascii").strip()
        elif token.startswith(b":"):
            fields = token[1:].split()
            new_mode, new_oid = int(fields[1], 8), fields[3]
            path = decode_path(tokens[i])
            i += 1
            deleted = new_mode == 0 or _ZERO.match(new_oid) is not None
            found.append((commit, path, new_mode, None if deleted else new_oid.decode("ascii")))
    return found


def changes_from(
    records: list[tuple[str, str, int, str | None]], sizes: dict[str, int]
) -> list[Change]:
    return [
        Change(
            commit=c,
            path=p,
            entry=None if oid is None else Entry(mode=mode, size=sizes.get(oid), oid=oid),
        )
        for c, p, mode, oid in records
    ]


def parse_batch_check(raw: bytes) -> dict[str, int]:
    """`cat-file --batch-check=%(objectname) %(objecttype) %(objectsize)`: blob sizes."""
    sizes: dict[str, int] = {}
    for line in raw.decode("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "blob":
            sizes[parts[0]] = int(parts[2])
    return sizes


def parse_batch(raw: bytes) -> dict[str, bytes]:
    """`cat-file --batch`: object id -> bytes (missing objects are left out)."""
    blobs: dict[str, bytes] = {}
    pos = 0
    while pos < len(raw):
        eol = raw.index(b"\n", pos)
        header = raw[pos:eol].split()
        pos = eol + 1
        if len(header) != 3:  # "<oid> missing"
            continue
        size = int(header[2])
        blobs[header[0].decode("ascii")] = raw[pos : pos + size]
        pos += size + 1
    return blobs


def parse_refs(raw: bytes) -> dict[str, str]:
    """`for-each-ref --format=%(refname)%00%(objectname)` (one record per line)."""
    found: dict[str, str] = {}
    for line in raw.decode("utf-8", "surrogateescape").splitlines():
        name, _, oid = line.partition("\0")
        found[name] = oid
    return found


# git's fsck message ids for tree entry names, mapped to our problem codes.
_FSCK_NAME_CODES = {
    "hasdotgit": "dotgit-path",
    "hasdot": "unsafe-path",
    "hasdotdot": "unsafe-path",
    "emptyname": "unsafe-path",
    "fullpathname": "unsafe-path",
}
_FSCK_LINE = re.compile(r"object ([0-9a-f]{40,64}): (\w+): (.*)")


def fsck_findings(text: str) -> list[tuple[str, str]]:
    """(problem code, message) for each name problem git's object check reported."""
    found: list[tuple[str, str]] = []
    for line in text.splitlines():
        match = _FSCK_LINE.search(line)
        if match is None:
            continue
        oid, msg_id, detail = match.groups()
        code = _FSCK_NAME_CODES.get(msg_id.lower())
        if code is not None:
            found.append((code, f"tree {oid[:12]}: {detail} (refused by git's object check)"))
    return found


def looks_like_bad_objects(text: str) -> bool:
    lowered = text.lower()
    return any(
        k in lowered
        for k in (
            "fsck error",
            "error in object",
            "did not send all necessary objects",
            "bad object",
        )
    )


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else "no answer"
