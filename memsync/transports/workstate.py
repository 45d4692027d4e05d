"""`git status --porcelain=v2 --branch -z` parsed: a work tree's branch, HEAD, upstream,
ahead/behind and changed paths (`WorkState`). Pure, bytes in, like `gitparse`, and apart
from it so that a one-shot `memsync status` (which parses nothing else) loads none of the
tree, diff and object parsers. Paths are decoded as `gitparse.decode_path` decodes them.
"""

from __future__ import annotations

from memsync.values import value

UNMERGED_XY = frozenset({"DD", "AU", "UD", "UA", "DU", "AA", "UU"})


def _path(raw: bytes) -> str:
    return raw.decode("utf-8", errors="surrogateescape")  # `gitparse.decode_path`


@value
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


@value
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
            entries.append(StatusEntry(parts[1].decode("ascii"), _path(parts[8])))
        elif kind == b"2":
            parts = token.split(b" ", 9)
            entries.append(StatusEntry(parts[1].decode("ascii"), _path(parts[9])))
            i += 1  # the original path of a rename follows
        elif kind == b"u":
            parts = token.split(b" ", 10)
            entries.append(StatusEntry(parts[1].decode("ascii"), _path(parts[10])))
        elif kind == b"?":
            entries.append(StatusEntry("??", _path(token[2:])))
    return WorkState(branch, head, upstream, ahead, behind, tuple(entries))
