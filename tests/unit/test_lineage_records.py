"""Lineage records never change a verdict: a fresh process (an empty in-memory cache) that
reads the record of the tree it follows from disk and joins only the changed files gives
exactly the full pass's verdict (every problem, in order; files; items), whatever the
trees and edits; and a record that is truncated, corrupt, foreign, not private, or another
tree's cannot make a tree pass that the full pass refuses.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.validators import lineagestore
from memsync.validators.cache import ParseCache, Uncached
from memsync.validators.graph import validate_graph
from memsync.validators.lineagestore import LineageStore
from memsync.validators.tree import TreeView
from tests.unit.test_parse_cache import changed_source, validator_imports
from tests.unit.test_validator_equivalence import edits, git_tree, reference, roots
from tests.unit.test_validator_incremental import base_root, edit, encoded, node

RESTORES: list[int] = []


def named_tree(files: Mapping[str, bytes | None], *, oid: bool = True) -> TreeView:
    """A Git-like tree; with `oid`, it names its tree id (a digest of its files), as a git
    adapter's view does, so its record is found by that id."""
    tree, _ = git_tree(files)
    if oid:
        digest = hashlib.sha1(usedforsecurity=False)
        for path, data in sorted(files.items()):
            digest.update(path.encode() + b"\0" + (b"L" if data is None else data) + b"\0")
        tree.tree_oid = digest.hexdigest()  # type: ignore[attr-defined]
    return tree


def fresh(directory: Path) -> ParseCache:
    """What a new process has: nothing in memory, the records on disk."""
    return ParseCache(records=LineageStore.open(directory))


def check_fresh(
    files: Mapping[str, bytes | None], directory: Path, profile: str = "local", *, oid: bool = True
) -> ParseCache:
    root = "dist/MEMORY.md" if profile == "mf" else None
    tree = named_tree(files, oid=oid)
    want = reference(tree, profile, root)
    assert validate_graph(tree, profile, root_path=root, cache=Uncached()) == want
    cache = fresh(directory)
    got = validate_graph(named_tree(files, oid=oid), profile, root_path=root, cache=cache)
    assert got == want
    assert got.problems == want.problems  # in order
    return cache


@given(st.data())
def test_fresh_processes_over_records_equal_full_passes(data: st.DataObject) -> None:
    """Mostly valid roots (the step is taken) and one-file or multi-file edits."""
    files = base_root()
    oid = data.draw(st.booleans())
    restores = 0
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(data.draw(st.integers(1, 6))):
            restores += check_fresh(encoded(files), Path(tmp), oid=oid).restores
            for _ in range(data.draw(st.integers(1, 3))):  # one or several files change
                files = data.draw(edit(files))
    RESTORES.append(restores)


@given(st.sampled_from(["local", "mf"]).flatmap(lambda p: st.tuples(st.just(p), st.data())))
def test_fresh_processes_over_records_equal_full_passes_on_broken_roots(
    case: tuple[str, st.DataObject],
) -> None:
    """Roots from a soup of broken lines: duplicates, F# chains and cycles, kinds, Focus."""
    profile, data = case
    base = "dist/" if profile == "mf" else ""
    files = data.draw(roots(base))
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(data.draw(st.integers(1, 4))):
            check_fresh(files, Path(tmp), profile, oid=data.draw(st.booleans()))
            files = data.draw(edits(files, base))


def test_the_property_read_records() -> None:
    """The property above is only worth something if fresh processes took the step."""
    if RESTORES:
        print("restores per example:", RESTORES)
        assert sum(RESTORES) > 0


def test_a_fresh_process_joins_only_the_changed_file(tmp_path: Path) -> None:
    files = base_root()
    first = check_fresh(encoded(files), tmp_path)
    assert (first.joins, first.restores) == (1, 0)
    files["MEMORY_b.md"].append(node("fresh", [("dep", "nowhere")]))
    tree = named_tree(encoded(files))
    cache = fresh(tmp_path)
    verdict = validate_graph(tree, cache=cache)
    assert (cache.joins, cache.restores, cache.misses) == (0, 1, 1)  # one file parsed
    assert [(p.code, p.path) for p in verdict.problems] == [("dangling-edge", "MEMORY_b.md")]
    assert verdict == reference(tree, "local", None)
    # The same tree again: its own record, nothing parsed.
    cache = fresh(tmp_path)
    assert validate_graph(named_tree(encoded(files)), cache=cache) == verdict
    assert (cache.joins, cache.restores, cache.misses) == (0, 1, 0)


def records(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.rec"), key=lambda p: p.stat().st_mtime_ns)


def good_then_bad(directory: Path) -> tuple[dict[str, bytes | None], TreeView]:
    """A valid root recorded, and a tree that changes one file so that it is invalid."""
    files = base_root()
    check_fresh(encoded(files), directory)
    files["MEMORY_c.md"].append(node("zz", [("dep", "nowhere")]))  # a dangling edge
    bad = encoded(files)
    return bad, named_tree(bad)


def refused(tree: TreeView, directory: Path) -> None:
    want = reference(tree, "local", None)
    assert want.problems  # the full pass refuses it
    cache = fresh(directory)
    assert validate_graph(tree, cache=cache) == want


def test_another_trees_record_under_this_trees_id_cannot_make_it_pass(tmp_path: Path) -> None:
    _bad, tree = good_then_bad(tmp_path)
    (good,) = records(tmp_path)
    slot = good.name.split("-")[0]
    oid = tree.tree_oid  # type: ignore[attr-defined]
    (tmp_path / f"{slot}-{oid}.rec").write_bytes(good.read_bytes())
    os.chmod(tmp_path / f"{slot}-{oid}.rec", 0o600)
    refused(tree, tmp_path)


@pytest.mark.parametrize("where", ["head", "index", "body", "frames", "end"])
def test_a_corrupt_or_truncated_record_is_ignored(tmp_path: Path, where: str) -> None:
    files = base_root()
    check_fresh(encoded(files), tmp_path)
    (record,) = records(tmp_path)
    data = bytearray(record.read_bytes())
    head = data.index(b"\n") + 1
    at = {
        "head": 10,
        "index": head + 20,
        "body": len(data) // 4,
        "frames": len(data) - 40,
        "end": len(data) - 1,
    }[where]
    truncated, flipped = data[:at], data[:at] + bytes([data[at] ^ 0x20]) + data[at + 1 :]
    for damaged in (truncated, flipped):
        record.write_bytes(bytes(damaged))
        # An edit to a detail file: a used record would read that file's stored summary.
        changed = {**files, "MEMORY_c.md": [*files["MEMORY_c.md"], node("x", [])]}
        tree = named_tree(encoded(changed))
        cache = fresh(tmp_path)
        assert validate_graph(tree, cache=cache) == reference(tree, "local", None)
        # A damaged summary the step does not read is harmless (it is checked when read).
        assert cache.restores == 0 or (damaged is flipped and where in ("frames", "end"))
        for other in records(tmp_path):
            if other != record:
                other.unlink()


def test_a_corrupt_record_cannot_make_a_bad_tree_pass(tmp_path: Path) -> None:
    _bad, tree = good_then_bad(tmp_path)
    (record,) = records(tmp_path)
    data = record.read_bytes()
    for at in range(0, len(data), max(1, len(data) // 97)):
        record.write_bytes(data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :])
        refused(tree, tmp_path)
        for other in records(tmp_path):
            if other != record:
                other.unlink()


def test_a_foreign_or_unprivate_record_is_not_read(tmp_path: Path) -> None:
    files = base_root()
    check_fresh(encoded(files), tmp_path)
    (record,) = records(tmp_path)
    tree = named_tree(encoded(files))

    def restores() -> int:
        cache = fresh(tmp_path)
        assert validate_graph(tree, cache=cache) == reference(tree, "local", None)
        return cache.restores

    assert restores() == 1
    record.chmod(0o644)  # others could have read (or, in a shared dir, written) it
    assert restores() == 0
    record.chmod(0o600)
    data = record.read_bytes()
    version = lineagestore.version_digest().hex().encode()
    record.write_bytes(data.replace(version, b"0" * 32, 1))  # another memsync's record
    assert restores() == 0
    record.unlink()
    elsewhere = tmp_path.parent / "elsewhere.rec"
    elsewhere.write_bytes(data)
    elsewhere.chmod(0o600)
    record.symlink_to(elsewhere)  # a link is never followed
    assert restores() == 0


def test_the_record_version_follows_every_module_of_the_verdict(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A change to the source of any module the cross-file verdict is made by (the
    per-file pass, the join, the edge rules, the record format) makes old records foreign."""
    before = lineagestore.version_digest()
    for module in validator_imports("lineagestore"):
        with monkeypatch.context() as patch:
            changed_source(module, tmp_path, patch)
            assert lineagestore.version_digest() != before, module.__name__


def test_records_are_private_bounded_and_pruned(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "records"
    files = base_root()
    for n in range(lineagestore.KEEP + 3):
        files["MEMORY_a.md"].append(node(f"new{n}", []))
        check_fresh(encoded(files), store)
    kept = records(store)
    assert len(kept) == lineagestore.KEEP
    assert store.stat().st_mode & 0o777 == 0o700
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in kept)
    monkeypatch.setattr(lineagestore, "MAX_RECORD_BYTES", 200)
    files["MEMORY_a.md"].append(node("big", []))
    check_fresh(encoded(files), store)
    assert records(store) == kept  # too big to record: nothing written


def resigned(data: bytes, path: str, ids: list[str]) -> bytes:
    """A record in which `path`'s ids are replaced and the eager part checksummed again (a
    consistent forgery): what only the per-summary checks can still catch."""
    newline = data.index(b"\n") + 1
    fields = data[:newline].split(b" ")
    index_len, body_len, meta_len, named_len = (int(fields[n]) for n in (2, 3, 4, 5))
    at = newline + index_len + body_len
    index = data[newline : newline + index_len]
    body = json.loads(data[newline + index_len : at])
    metas = data[at : at + meta_len]
    rest = data[at + meta_len :]  # the edge targets and the summaries, as they were
    parts, start = [], 0
    for size in body["metas"]:
        parts.append(json.loads(metas[start : start + size]))
        start += size
    parts[[row[0] for row in json.loads(index)[1]].index(path)] = ids
    encoded_parts = [json.dumps(part, separators=(",", ":")).encode() for part in parts]
    body["metas"] = [len(part) for part in encoded_parts]
    new_body = json.dumps(body, separators=(",", ":")).encode()
    new_metas = b"".join(encoded_parts)
    version = lineagestore.version_digest()
    checked = index + new_body + new_metas + rest[:named_len]
    digest = hashlib.blake2b(checked, key=version, digest_size=16)
    lengths = (index_len, len(new_body), len(new_metas), named_len)
    head = b" ".join([*fields[:2], *(b"%d" % n for n in lengths)])
    return head + b" " + digest.hexdigest().encode() + b"\n" + index + new_body + new_metas + rest


def test_ids_that_do_not_match_the_stored_summary_spoil_the_record(tmp_path: Path) -> None:
    _bad, tree = good_then_bad(tmp_path)
    (record,) = records(tmp_path)
    data = record.read_bytes()
    newline = data.index(b"\n") + 1
    index_len = int(data[:newline].split(b" ")[2])
    files = json.loads(data[newline : newline + index_len])[1]
    assert "MEMORY_c.md" in [row[0] for row in files]
    # The record claims MEMORY_c.md also defines the dangling edge's target.
    ids = ["h-c", "n-c", "s-c", "m-c", "nowhere"]
    record.write_bytes(resigned(data, "MEMORY_c.md", ids))
    refused(tree, tmp_path)
    assert resigned(data, "MEMORY_c.md", ["h-c", "n-c", "s-c", "m-c"]) == data  # as made


def test_a_tree_derived_from_a_recorded_one_finds_it_behind_other_roots_records(
    tmp_path: Path,
) -> None:
    """One CLI run syncs many roots: the record of this root's previous tree (the view's
    `base_oid`) is found even when the other roots' records are newer."""
    files = base_root()
    base = named_tree(encoded(files))
    check_fresh(encoded(files), tmp_path)
    for n in range(lineagestore.CANDIDATES + 2):  # other roots: other files altogether
        other = {f"MEMORY_{d}.md": [node(f"o{n}-{d}", [])] for d in "xyz"}
        check_fresh(encoded({**other, "MEMORY.md": ["# Other"], "PURSUITS.md": []}), tmp_path)
    files["MEMORY_a.md"].append(node("later", []))
    tree = named_tree(encoded(files))
    tree.base_oid = base.tree_oid  # type: ignore[attr-defined]
    cache = fresh(tmp_path)
    assert validate_graph(tree, cache=cache) == reference(tree, "local", None)
    assert (cache.restores, cache.joins) == (1, 0)
