"""Clashes between paths of one tree: case collisions and duplicate entries (pure).

Two paths clash when a case-insensitive or Unicode-normalizing file system (macOS,
Windows) would store them as one entry: components are compared after NFC, case folding
and dropping HFS+-ignorable code points. `case_collisions` and `duplicate_entries` check
a whole tree; `FoldedTree` keeps the same answer current one path at a time, so a series
of commits is checked in O(changed paths) each.
"""

from __future__ import annotations

import functools
import unicodedata
from bisect import bisect_left
from collections.abc import Iterable, Sequence

from memsync.validators.paths import HFS_IGNORABLES, printable
from memsync.validators.problems import Problem


@functools.lru_cache(maxsize=1 << 16)
def _fold(component: str) -> str:
    if component.isascii():
        return component.lower()
    normalized = unicodedata.normalize("NFC", component).casefold()
    return "".join(c for c in normalized if ord(c) not in HFS_IGNORABLES)


def case_collisions(paths: Iterable[str], *, file_and_directory: bool = True) -> list[Problem]:
    """`case-collision` for paths that clash on case-insensitive or normalizing file systems.

    Components are compared after NFC, case folding and dropping HFS+-ignorable code
    points, at every depth: `A/x` and `a/y` clash on the directory, and a file clashes with
    a directory of the same folded name. Each clashing path is reported once, naming the
    first (sorted) path it clashes with. With `file_and_directory=False`, a file and a
    directory spelled exactly alike are left out (in a Git tree that is a duplicate entry,
    which `duplicate_entries` reports).
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
            others = [
                p
                for shape, p in shapes.items()
                if shape != mine and (file_and_directory or shape[0] != mine[0])
            ]
            if not others:
                continue
            other = min(others)
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


def duplicate_entries(paths: Iterable[str], repeated: Iterable[str] = ()) -> list[Problem]:
    """`duplicate-entry` for a name one tree holds twice (git's `duplicateEntries`).

    `repeated` names paths a listing gave more than once; a path that is a file and also a
    directory (a prefix of another path) is the other shape of the same fault.
    """
    leaves = set(paths)
    directories: set[str] = set()
    for path in leaves:
        cut = path.rfind("/")
        while cut > 0 and path[:cut] not in directories:
            directories.add(path[:cut])
            cut = path.rfind("/", 0, cut)
    problems = [_listed_twice(path) for path in sorted(set(repeated))]
    problems += [_file_and_directory(path, path) for path in sorted(leaves & directories)]
    return problems


def _listed_twice(path: str) -> Problem:
    shown = printable(path)
    message = f"'{shown}' is listed twice in one tree (two entries with one name)"
    return Problem("duplicate-entry", shown, None, message)


def _file_and_directory(path: str, at: str) -> Problem:
    shown = printable(path)
    where = "" if at == path else f"'{shown}': "
    message = f"{where}'{printable(at)}' is both a file and a directory in one tree"
    return Problem("duplicate-entry", shown, None, message)


_Shape = tuple[str, bool]  # the spelling of a prefix, and whether it is the whole path


class FoldedTree:
    """A tree's paths indexed by folded prefix, kept current one added or removed path at a
    time, so that the trees of a series of commits are checked in O(changed paths) each.

    For every prefix of every path it counts the paths that have each spelling of that
    prefix, as a directory or as the file itself. Two spellings under one folded prefix
    are a `case-collision` (exactly as `case_collisions` sees the whole tree); one spelling
    as both file and directory, or a file counted twice, is a `duplicate-entry`.

    Almost every folded prefix has one spelling: those are kept in a flat map of immutable
    values, so `copy` is one C-level dict copy; the few with several (`crowded`) apart.

    A tree read from a record (`over`) keeps the record's columns as they are (`Table`) and
    its changes beside them: a fresh process that checks a one-path change looks up that
    path's prefixes, and builds no map of every prefix (issue 18); `_one` is the whole map,
    built when asked for.
    """

    def __init__(self, paths: Iterable[str] = ()) -> None:
        # folded prefix -> (its one shape, paths) / {shape: paths} when it has several;
        # over a table: the prefixes changed since (`_gone`: dropped from the table)
        self._over: dict[str, tuple[_Shape, int]] = {}
        self._many: dict[str, dict[_Shape, int]] = {}
        self._base: Table | None = None
        self._gone: set[str] = set()
        for path in paths:
            self.add(path)

    @classmethod
    def over(cls, table: Table, many: dict[str, dict[_Shape, int]]) -> FoldedTree:
        """The tree whose one-shape prefixes are `table`'s and crowded ones `many`."""
        tree = cls()
        tree._base = table
        tree._many = many
        return tree

    @property
    def _one(self) -> dict[str, tuple[_Shape, int]]:
        """Every folded prefix with one shape (built from the table, once, if over one)."""
        base = self._base
        if base is not None:
            whole = base.whole()
            for key in self._gone:
                del whole[key]
            whole.update(self._over)
            self._over, self._base, self._gone = whole, None, set()
        return self._over

    @_one.setter
    def _one(self, one: dict[str, tuple[_Shape, int]]) -> None:
        self._over, self._base, self._gone = one, None, set()

    def _get(self, key: str) -> tuple[_Shape, int] | None:
        found = self._over.get(key)
        if found is not None or self._base is None or key in self._gone:
            return found
        return self._base.get(key)

    def _set(self, key: str, value: tuple[_Shape, int]) -> None:
        self._over[key] = value
        self._gone.discard(key)

    def _drop(self, key: str) -> None:
        self._over.pop(key, None)
        if self._base is not None and self._base.get(key) is not None:
            self._gone.add(key)

    def copy(self) -> FoldedTree:
        twin = FoldedTree()
        twin._over = self._over.copy()
        twin._base = self._base
        twin._gone = set(self._gone)
        twin._many = {key: dict(shapes) for key, shapes in self._many.items()}
        return twin

    @property
    def crowded(self) -> bool:
        """Whether some folded prefix has two shapes: then, and only then, the tree has a
        case collision or a name that is both a file and a directory."""
        return bool(self._many)

    def __len__(self) -> int:
        base = self._base
        if base is None:
            return len(self._over) + len(self._many)
        added = sum(1 for key in self._over if base.get(key) is None)
        return len(base) - len(self._gone) + added + len(self._many)

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, str):
            return False
        key, shape = _prefixes(path)[-1]
        return shape in self._shapes(key)

    def _shapes(self, key: str) -> dict[_Shape, int]:
        one = self._get(key)
        if one is not None:
            return {one[0]: one[1]}
        return self._many.get(key, {})

    def add(self, path: str) -> None:
        """Count one more entry named `path` (a second one is a duplicate entry)."""
        self._count(path, 1)

    def remove(self, path: str) -> None:
        """Forget one entry named `path`; a path not held is ignored."""
        if path in self:
            self._count(path, -1)

    def _count(self, path: str, step: int) -> None:
        for key, shape in _prefixes(path):
            one = self._get(key)
            if one is not None and one[0] == shape:
                if one[1] + step > 0:
                    self._set(key, (shape, one[1] + step))
                else:
                    self._drop(key)
                continue
            shapes = self._many.pop(key, None) or {}
            if one is not None:
                self._drop(key)
                shapes[one[0]] = one[1]
            count = shapes.get(shape, 0) + step
            if count > 0:
                shapes[shape] = count
            else:
                shapes.pop(shape, None)
            if len(shapes) > 1:
                self._many[key] = shapes
            elif shapes:
                ((only, paths),) = shapes.items()
                self._set(key, (only, paths))

    def clashes(self, path: str) -> list[Problem]:
        """The `case-collision` and `duplicate-entry` (at most one each) `path` takes part in."""
        collision: Problem | None = None
        duplicate: Problem | None = None
        shown = printable(path)
        for key, mine in _prefixes(path):
            shapes = self._shapes(key)
            if mine[1] and shapes.get(mine, 0) > 1 and duplicate is None:
                duplicate = _listed_twice(path)
            for other in sorted(shapes):
                if other == mine:
                    continue
                if other[0] == mine[0]:
                    duplicate = duplicate or _file_and_directory(path, mine[0])
                elif collision is None:
                    at, other_at = printable(mine[0]), printable(other[0])
                    if mine[1] and other[1]:
                        message = f"'{shown}' collides with '{other_at}'{_WHERE}"
                    else:
                        message = (
                            f"'{shown}' collides with '{other_at}': '{at}' and "
                            f"'{other_at}' are one entry{_WHERE}"
                        )
                    collision = Problem("case-collision", shown, None, message)
        return [p for p in (collision, duplicate) if p is not None]


def _prefixes(path: str) -> list[tuple[str, tuple[str, bool]]]:
    """(folded prefix, (its spelling, is it the whole path)) for each prefix of `path`."""
    parts = path.split("/")
    folded = [_fold(c) for c in parts]
    last = len(parts)
    return [
        ("/".join(folded[:depth]), ("/".join(parts[:depth]), depth == last))
        for depth in range(1, last + 1)
    ]


class Table:
    """A record's one-shape folded prefixes as its columns (`shapestore`), read in place:
    the prefixes sorted (strictly: each once), with each one's spelling, whether it is a
    whole path, and how many paths hold it. Never changed."""

    def __init__(
        self, keys: list[str], spellings: list[str], leaves: bytes, counts: Sequence[int]
    ) -> None:
        if not len(keys) == len(spellings) == len(leaves) == len(counts):
            raise ValueError("columns of different lengths")
        if not all(map(str.__lt__, keys, keys[1:])):
            raise ValueError("prefixes not sorted, or one twice")
        self._keys, self._spellings, self._leaves, self._counts = keys, spellings, leaves, counts

    def __len__(self) -> int:
        return len(self._keys)

    def get(self, key: str) -> tuple[_Shape, int] | None:
        at = bisect_left(self._keys, key)
        if at == len(self._keys) or self._keys[at] != key:
            return None
        return (self._spellings[at], self._leaves[at] == 1), self._counts[at]

    def whole(self) -> dict[str, tuple[_Shape, int]]:
        """Every prefix with its shape and count (a new map)."""
        shapes = zip(self._spellings, map(bool, self._leaves), strict=True)
        return dict(zip(self._keys, zip(shapes, self._counts, strict=True), strict=True))
