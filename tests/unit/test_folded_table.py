"""A FoldedTree read from a record's columns (`collisions.Table`, kept as they are, changes
beside them) answers every question exactly as the FoldedTree built path by path: its
one-shape and crowded prefixes, its length, membership and clashes, through any series of
additions and removals, and a copy never changes what it was copied from (issue 18: a
fresh process checks a one-path change without a map of every prefix)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.collisions import FoldedTree, Table
from memsync.validators.shapestore import _index
from tests.unit.test_gate_incremental import paths


def _table(tree: FoldedTree) -> FoldedTree:
    """`tree` as a record keeps it: its one-shape prefixes as sorted columns."""
    one = sorted(tree._one.items())
    table = Table(
        [key for key, _ in one],
        [spelling for _, ((spelling, _leaf), _n) in one],
        bytes(leaf for _, ((_s, leaf), _n) in one),
        [count for _, (_shape, count) in one],
    )
    return FoldedTree.over(table, {k: dict(v) for k, v in tree._many.items()})


def _same(got: FoldedTree, want: FoldedTree, probes: list[str]) -> None:
    assert len(got) == len(want)
    assert got.crowded == want.crowded
    for path in probes:
        assert (path in got) == (path in want), path
        assert got.clashes(path) == want.clashes(path), path


@given(
    base=st.lists(paths, max_size=12),
    steps=st.lists(st.tuples(st.booleans(), paths), max_size=10),
)
def test_a_tree_over_a_table_equals_the_tree_built_path_by_path(
    base: list[str], steps: list[tuple[bool, str]]
) -> None:
    want = FoldedTree(base)
    got = _table(want.copy())
    probes = base + [path for _, path in steps]
    _same(got, want, probes)
    first = got.copy()
    for add, path in steps:
        if add:
            got.add(path)
            want.add(path)
        else:
            got.remove(path)
            want.remove(path)
        _same(got, want, probes)
        copy = got.copy()
        copy.add(path + "/x")  # a copy's changes stay its own
        _same(got, want, probes)
    assert got._one == want._one  # built from the table and the changes, once asked for
    assert got._many == want._many
    _same(first, FoldedTree(base), probes)


def test_a_table_refuses_unsorted_or_repeated_prefixes() -> None:
    for keys in (["b", "a"], ["a", "a"]):
        try:
            Table(keys, keys, bytes(len(keys)), [1] * len(keys))
        except ValueError:
            continue
        raise AssertionError(keys)


@given(st.lists(paths, min_size=1, max_size=8, unique=True), paths)
def test_a_path_is_found_in_a_text_of_paths_where_the_list_has_it(
    listed: list[str], probe: str
) -> None:
    text = "\0".join(listed).encode("utf-8", "surrogateescape")
    for path in [*listed, probe, probe + "x", "x" + probe]:
        want = listed.index(path) if path in listed else -1
        assert _index(text, path.encode("utf-8", "surrogateescape")) == want, path
