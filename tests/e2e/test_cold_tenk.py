"""A cold `memsync sync-now` pays for what changed (issue 18, item 1 at 10k files): the
listing of the tree the root is at comes from the record the previous process left
(`validators/listingstore.py`), not from `git ls-tree -r` of every entry, and only when
that record hashes to the tree's id: a record of other entries under the tree's name is
not used (the tree is listed by git, and the sync decides as it would without records).
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path

from memsync.validators.listingstore import DIRECTORY, ListingStore
from memsync.validators.tree import MODE_FILE, Entry, Listing
from tests.conftest import Team
from tests.e2e.daemons import write_config
from tests.e2e.test_cold_cycle import _cold_sync, _cold_sync_order, _one_incoming_commit
from tests.helpers import git
from tests.integration.test_git_refs import _runs, _spy


def _listings(tmp_path: Path) -> Path:
    return tmp_path / "state" / "cache" / DIRECTORY  # `cli/syncrun`: state_dir/cache


def test_a_cold_fast_forward_lists_its_start_tree_from_its_record(
    team: Team, tmp_path: Path
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    folder, log = _spy(tmp_path / "spy")
    spied = {**env, "PATH": f"{folder}:{os.environ['PATH']}"}
    _one_incoming_commit(team, 0)
    _cold_sync(config, spied)  # lists the start tree (no record yet) and records it
    assert Counter(_runs(log))["ls-tree"] == 1
    for turn in (1, 2):  # each process reads the start from the record the last one left
        log.unlink()
        _one_incoming_commit(team, turn)
        _code, _started, _loaded, out = _cold_sync(config, spied)
        assert out.split()[:2] == ["bob", "synced"], out
        assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
        runs = Counter(_runs(log))
        assert runs["ls-tree"] == 0, f"the start tree listed in full again: {dict(runs)}"


def test_a_record_that_is_not_its_trees_listing_is_not_used(team: Team, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    folder, log = _spy(tmp_path / "spy")
    spied = {**env, "PATH": f"{folder}:{os.environ['PATH']}"}
    _one_incoming_commit(team, 0)
    _cold_sync(config, spied)
    start = git(team.bob.path, "rev-parse", "HEAD^{tree}")
    store = ListingStore.open(_listings(tmp_path))
    assert store is not None
    path = store._path(start)
    assert path is not None and path.exists()
    # The start tree's record, rewritten with the store's own key: one entry's object id
    # is another's (so its checksum holds, and only its hash to the tree id tells).
    listed = git(team.bob.path, "ls-tree", "-r", "-l", "--full-tree", start).splitlines()
    paths = [line.split("\t", 1)[1] for line in listed]
    blobs = [line.split()[2] for line in listed]
    sizes = [int(line.split()[3]) for line in listed]
    assert len(set(blobs)) > 1
    forged = Listing()
    forged.update(
        {p: Entry(MODE_FILE, size, blobs[0]) for p, size in zip(paths, sizes, strict=True)}
    )
    store.save(start, forged)
    assert store.saves == 1 and store.load(start) is None
    log.unlink()
    _one_incoming_commit(team, 1)
    _code, _started, _loaded, out = _cold_sync(config, spied)
    assert out.split()[:2] == ["bob", "synced"], out
    assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
    assert Counter(_runs(log))["ls-tree"] == 1  # listed by git: the record was not used


def test_a_cold_fast_forward_reads_its_records_once_the_log_has_started(
    team: Team, tmp_path: Path
) -> None:
    """The start tree's listing and shape records are read in this interpreter, beside the
    incoming log: started before the log, they held the interpreter while the log was to
    be started (its git started ~20 ms after the object session instead of ~4 ms). Here
    the fetch brings no object (they came before, under another ref), so nothing is read
    while it runs (see the next test)."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    for turn in (0, 1):  # the records of the tree the next sync starts from
        _one_incoming_commit(team, turn)
        _cold_sync(config, env)
    _one_incoming_commit(team, 2)
    git(team.bob.path, "fetch", "-q", "origin", "main:refs/kept/objects")
    out, order = _cold_sync_order(config, env)
    seen = [f"{kind} {name}" for kind, name, _ in order if kind in ("process", "record")]
    assert out.split()[:2] == ["bob", "synced"], (out, seen)
    assert "process git ls-tree" not in seen, seen
    log = seen.index("process git log")
    records = [i for i, what in enumerate(seen) if what.startswith("record ")]
    assert {"record listing", "record shape"} <= set(seen), seen
    assert min(records) > log, f"a record was read before the log started: {seen}"


def _holding_git(tmp_path: Path, marks: Path, seconds: float) -> Path:
    """A directory holding a `git` whose fetch, once done, is held until both records are
    opened (`ORDER_MARKS`: the order probe marks each) or `seconds` pass: a fetch that runs
    long, as a 10k-file root's or a far upstream's does; it says which in `marks/held`."""
    real_git = shutil.which("git")
    assert real_git is not None
    folder = tmp_path / "holding"
    folder.mkdir()
    ticks = int(seconds * 100)
    (folder / "git").write_text(
        "#!/bin/sh\n"
        'for arg in "$@"; do [ "$arg" = fetch ] && break; done\n'
        f'[ "$arg" = fetch ] || exec {real_git} "$@"\n'
        f'{real_git} "$@"; code=$?; i=0\n'
        f"while [ $i -lt {ticks} ]; do\n"
        f"  [ -e {marks}/listing ] && [ -e {marks}/shape ] && break\n"
        "  sleep 0.01; i=$((i + 1))\n"
        "done\n"
        f'[ $i -lt {ticks} ] && echo read > {marks}/held || echo "not read" > {marks}/held\n'
        "exit $code\n"
    )
    (folder / "git").chmod(0o755)
    return folder


def test_a_cold_fast_forward_reads_its_records_while_its_fetch_brings_objects(
    team: Team, tmp_path: Path
) -> None:
    """While a one-shot sync's fetch still brings objects (git says so on its progress
    lines), the start tree's listing and shape records are read beside it: at 10k files
    they were read after it, on the critical path (~130M instructions), between the log
    and the candidate's check. The records are read, and checked, as before."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    for turn in (0, 1):  # the records of the tree the next sync starts from
        _one_incoming_commit(team, turn)
        _cold_sync(config, env)
    _one_incoming_commit(team, 2)
    marks = tmp_path / "marks"
    marks.mkdir()
    folder = _holding_git(tmp_path, marks, 10.0)
    held = {**env, "PATH": f"{folder}:{os.environ['PATH']}", "ORDER_MARKS": str(marks)}
    out, order = _cold_sync_order(config, held)
    seen = [f"{kind} {name}" for kind, name, _ in order if kind in ("process", "record")]
    assert out.split()[:2] == ["bob", "synced"], (out, seen)
    assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
    assert (marks / "held").read_text() == "read\n", f"not read while fetching: {seen}"
    log = seen.index("process git log")
    assert {"record listing", "record shape"} <= set(seen[:log]), seen  # read while fetching
    assert "record listing" not in seen[log:], seen  # (a shape record is saved after)
    assert "process git ls-tree" not in seen, seen


def test_a_cold_sync_with_nothing_fetched_reads_no_record(team: Team, tmp_path: Path) -> None:
    """A fetch that brings nothing (the root is current) reads no record and opens no
    object session, however long it runs: only a fetch that says objects come does."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    for turn in (0, 1):
        _one_incoming_commit(team, turn)
        _cold_sync(config, env)
    marks = tmp_path / "marks"
    marks.mkdir()
    folder = _holding_git(tmp_path, marks, 0.5)  # a fetch that runs 0.5 s more
    held = {**env, "PATH": f"{folder}:{os.environ['PATH']}", "ORDER_MARKS": str(marks)}
    out, order = _cold_sync_order(config, held)
    seen = [f"{kind} {name}" for kind, name, _ in order if kind in ("process", "record")]
    assert out.split()[:2] == ["bob", "current"], (out, seen)
    assert (marks / "held").read_text() == "not read\n", seen
    assert not [what for what in seen if what.startswith("record ")], seen
    assert "process git cat-file" not in seen, seen
