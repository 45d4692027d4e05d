"""The gate's whole-tree verdict derived from a kept tree plus a diff equals the verdict
computed from scratch: names, modes, sizes, case collisions and duplicate entries, with
every problem's code, path and message (issue 11: a sync pays for what changed)."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.collisions import FoldedTree, case_collisions, duplicate_entries
from memsync.validators.gate import SHAPES, TreeShape, tree_shape, validate_tree
from memsync.validators.paths import check_entry, check_name, check_text, within_cap
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem, Report
from memsync.validators.tree import (
    MODE_EXECUTABLE,
    MODE_FILE,
    MODE_GITLINK,
    MODE_SYMLINK,
    Entry,
    TreeView,
)

POLICY = SyncPolicy(max_file_size=12)
_IDS = itertools.count()

# Components that make every rule fire: case and Unicode variants that fold together,
# names git guards, Windows device names, a name that is not NFC, plain memory files.
COMPONENTS = [
    "MEMORY.md",
    "memory.md",
    "MEMORY_a.md",
    "PURSUITS.md",
    "a",
    "A",
    "b",
    "x.md",
    "X.md",
    "\u00e9.md",
    "e\u0301.md",
    ".git",
    "con",
    "d\u200c",
    "views",
    ".gitignore",
]
MODES = [MODE_FILE, MODE_FILE, MODE_FILE, MODE_EXECUTABLE, MODE_SYMLINK, MODE_GITLINK]

ALLOWED = ["MEMORY.md", "MEMORY_a.md", "MEMORY_b.md", "PURSUITS.md", ".gitignore"]
paths = st.one_of(
    st.sampled_from(ALLOWED),  # names that pass, so their modes and bytes are what counts
    st.lists(st.sampled_from(COMPONENTS), min_size=1, max_size=3).map("/".join),
)
entries = st.builds(
    lambda mode, data: Entry(mode, len(data), data=data),
    st.sampled_from(MODES),
    st.one_of(st.binary(max_size=16), st.sampled_from([b"# M\n", b"\xff\xfe", b"ok"])),
)
trees = st.dictionaries(paths, entries, max_size=12)


class NoGraph:
    """The graph's verdict is the graph validator's business (tested elsewhere)."""

    def validate(self, tree: TreeView) -> Report:
        return Report()


class Told(TreeView):
    """A view that says which tree it is and what it was derived from, as the git box's do."""

    def __init__(
        self,
        files: dict[str, Entry],
        tree_oid: str,
        base_oid: str | None = None,
        delta: tuple[tuple[str, Entry | None], ...] | None = None,
        duplicates: tuple[str, ...] = (),
        base_entries: dict[str, Entry] | None = None,
    ) -> None:
        super().__init__(files, duplicates=duplicates)
        self.tree_oid = tree_oid
        self.base_oid = base_oid
        self.delta = delta
        self.base_entries = base_entries


def reference(tree: TreeView, content: list[str] | None) -> tuple[Problem, ...]:
    """The whole-tree verdict computed from scratch, every rule on every entry (the gate's
    algorithm before it kept anything), in the gate's order."""
    problems: list[Problem] = []
    for path in sorted(tree.entries):
        entry = tree.entries[path]
        name_problem = check_name(path, POLICY)
        if name_problem is not None:
            problems.append(name_problem)
        problems += check_entry(path, entry, POLICY)
        wanted = content is None or path in content
        if name_problem is None and within_cap(entry, POLICY) and wanted:
            text_problem = check_text(path, tree.content(path))
            if text_problem is not None:
                problems.append(text_problem)
    problems += case_collisions(tree.entries, file_and_directory=False)
    problems += duplicate_entries(tree.entries, tree.duplicates)
    order = lambda p: (p.path or "", p.code, p.line or 0, p.message)  # noqa: E731
    return tuple(sorted(set(problems), key=order))


def diff(old: dict[str, Entry], new: dict[str, Entry]) -> tuple[tuple[str, Entry | None], ...]:
    gone = [(path, None) for path in old if path not in new]
    changed = [(path, e) for path, e in new.items() if old.get(path) != e]
    return (*gone, *changed)


def oid() -> str:
    return f"tree-{next(_IDS)}"


# Made once (not per call of `edited`): Hypothesis validates each new strategy object on
# its first draw, which cost more than the checks. The examples drawn are the same.
_CHANGE = st.one_of(st.none(), entries)
_ADDED = st.dictionaries(paths, entries, max_size=4)


def edited(data: st.DataObject, base: dict[str, Entry]) -> dict[str, Entry]:
    """`base` with some of its paths deleted or changed and some paths added."""
    new = dict(base)
    for path in data.draw(st.lists(st.sampled_from(sorted(base)), max_size=4)) if base else []:
        change = data.draw(_CHANGE)
        if change is None:
            new.pop(path, None)
        else:
            new[path] = change
    new.update(data.draw(_ADDED))
    return new


@given(
    data=st.data(),
    base=trees,
    duplicates=st.lists(paths, max_size=2),
    content=st.one_of(st.none(), st.lists(paths, max_size=6)),
)
def test_a_derived_verdict_equals_the_full_one(
    data: st.DataObject,
    base: dict[str, Entry],
    duplicates: list[str],
    content: list[str] | None,
) -> None:
    new = edited(data, base)
    base_oid, new_oid = oid(), oid()
    validate_tree(Told(base, base_oid), POLICY, NoGraph())  # keeps the base's shape
    told = Told(new, new_oid, base_oid, diff(base, new), tuple(duplicates))
    derived = validate_tree(told, POLICY, NoGraph(), content_paths=content)
    full = reference(TreeView(new, duplicates=duplicates), content)
    assert derived.problems == full
    # and once kept, the same verdict again (no base needed)
    again = validate_tree(Told(new, new_oid, duplicates=tuple(duplicates)), POLICY, NoGraph())
    assert again.problems == reference(TreeView(new, duplicates=duplicates), None)


@given(data=st.data(), base=trees)
def test_a_derived_shape_equals_the_shape_of_the_new_tree(
    data: st.DataObject, base: dict[str, Entry]
) -> None:
    new = edited(data, base)
    before = TreeShape.of(base, POLICY)
    derived = before.derive(diff(base, new), POLICY)
    full = TreeShape.of(new, POLICY)
    assert dict(derived.flagged) == dict(full.flagged)
    assert len(derived.folded) == len(full.folded)
    assert derived.folded.crowded == full.folded.crowded
    for path in {*base, *new}:
        assert (path in derived.folded) == (path in new)
        if path in new:
            assert derived.folded.clashes(path) == full.folded.clashes(path)
    assert dict(before.flagged) == dict(TreeShape.of(base, POLICY).flagged)  # base untouched


@given(st.lists(paths, max_size=14))
def test_crowded_says_exactly_when_there_is_a_clash(listed: list[str]) -> None:
    """Not crowded -> no case collision and no file that is also a directory (the gate
    then skips both whole-tree checks); crowded -> one of them."""
    folded = FoldedTree(set(listed))
    clashes = case_collisions(listed, file_and_directory=False) + duplicate_entries(listed)
    assert folded.crowded == bool(clashes)


@given(st.lists(paths, max_size=10), st.lists(paths, max_size=10))
def test_a_copy_is_independent(first: list[str], second: list[str]) -> None:
    original = FoldedTree(first)
    twin = original.copy()
    for path in second:
        twin.add(path)
    for path in first:
        twin.remove(path)
    fresh = FoldedTree(first)
    assert len(original) == len(fresh)
    assert all(original.clashes(p) == fresh.clashes(p) for p in first)
    assert original.crowded == fresh.crowded


def test_a_kept_shape_is_used_by_tree_oid_and_a_view_without_one_is_computed() -> None:
    files = {"MEMORY.md": Entry(MODE_FILE, 4, data=b"# M\n")}
    tree = oid()
    first = tree_shape(Told(files, tree), files, POLICY)
    assert tree_shape(Told(files, tree), files, POLICY) is first
    assert tree_shape(TreeView(files), files, POLICY) is not first
    SHAPES.clear()
    assert tree_shape(Told(files, tree), files, POLICY) is not first
