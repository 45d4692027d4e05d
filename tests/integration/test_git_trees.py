"""The git box's derived listings against the real git binary: a listing derived from the
last one plus `diff-tree` equals `ls-tree`'s, for random trees; a tree git's object check
refuses is listed in full; and a warm one-commit sync lists no tree at all."""

from __future__ import annotations

import gc
import itertools
import os
import shutil
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.sync import clone, make_upstream
from memsync.errors import GitError
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.roots.statusmemo import StatusMemo
from memsync.transports import gitmemo, gitparse
from memsync.transports.git import Git, GitBlobs
from memsync.validators.gate import SHAPES, validate_tree
from memsync.validators.policy import SyncPolicy
from memsync.validators.rightmemory import default_graph_validator
from memsync.validators.tree import Listing, TreeView
from tests.conftest import PROCESS_EXAMPLES, Team
from tests.helpers import commit, git, push
from tests.integration.test_git_refs import _runs, _spy
from tests.kit import settings_for

NAMES = ["MEMORY.md", "memory.md", "MEMORY_a.md", "a", "A", "b", "x.md", "\u00e9.md", "d"]
MODES = ["100644", "100644", "100755", "120000", "160000"]
GITLINK = "1" * 40

files = st.dictionaries(
    st.lists(st.sampled_from(NAMES), min_size=1, max_size=3).map("/".join),
    st.tuples(st.sampled_from(MODES), st.sampled_from([b"# one\n", b"two\n", b"\xff"])),
    max_size=10,
)


def well_formed(tree: dict[str, tuple[str, bytes]]) -> dict[str, tuple[str, bytes]]:
    """Drop paths that would make a name both a file and a directory (git cannot)."""
    kept: dict[str, tuple[str, bytes]] = {}
    for path in sorted(tree, key=lambda p: (p.count("/"), p)):
        parts = path.split("/")
        prefixes = {"/".join(parts[:i]) for i in range(1, len(parts))}
        if prefixes & set(kept) or any(k.startswith(path + "/") for k in kept):
            continue
        kept[path] = tree[path]
    return kept


def make_commit(repo: Path, tree: dict[str, tuple[str, bytes]], parent: str | None) -> str:
    index = repo / "scratch-index"
    index.unlink(missing_ok=True)
    env_index = {"GIT_INDEX_FILE": str(index)}
    # Each distinct content written once, all in one `hash-object` (a process per entry
    # was most of this file's git processes).
    contents = sorted({data for mode, data in tree.values() if mode != "160000"})
    scratch = [repo.parent / f"scratch-blob-{i}" for i in range(len(contents))]
    for file, data in zip(scratch, contents, strict=True):
        file.write_bytes(data)
    oids: dict[bytes, str] = {}
    if contents:
        blob_oids = git(repo, "hash-object", "-w", "--no-filters", "--", *map(str, scratch))
        oids = dict(zip(contents, blob_oids.split(), strict=True))
    # NUL-separated (`-z`): a newline may be part of a name.
    info = b"".join(
        b"%s %s\t%s\0"
        % (
            mode.encode(),
            (GITLINK if mode == "160000" else oids[data]).encode(),
            path.encode("utf-8", "surrogateescape"),
        )
        for path, (mode, data) in tree.items()
    )
    saved = dict(os.environ)
    os.environ.update(env_index)
    try:
        if info:
            git(repo, "update-index", "-z", "--add", "--index-info", input=info)
        written = git(repo, "write-tree")
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return git(repo, "commit-tree", written, "-m", "t", *(["-p", parent] if parent else []))


def full_listing(repo: Path, rev: str) -> Listing:
    raw = Git(repo).run("ls-tree", "-r", "-t", "-z", "-l", "--full-tree", rev).stdout
    return gitparse.parse_ls_tree(raw)


@PROCESS_EXAMPLES
@given(st.lists(files, min_size=2, max_size=4))
def test_a_derived_listing_equals_ls_tree(trees: list[dict[str, tuple[str, bytes]]]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo"
        git(Path(tmp), "init", "-q", "-b", "main", str(repo))
        commits: list[str] = []
        for tree in trees:
            commits.append(make_commit(repo, well_formed(tree), commits[-1] if commits else None))
        gitmemo.forget()
        SHAPES.clear()
        box = Git(repo)
        box.changes(commits[-1], None)  # keeps each commit's diff against its parent
        for old, new in itertools.pairwise(commits):
            raw = Git(repo).run("diff-tree", "-r", "-t", "-z", "--raw", "--no-abbrev", old, new)
            assert gitmemo.DIFFS.get((old, new)) == tuple(gitparse.parse_diff_raw(raw.stdout))
        gitmemo.forget()
        first = box.ls_tree(commits[0])
        assert first.base_oid is None
        policy = SyncPolicy()
        validate_tree(box.tree_view(commits[0]), policy, default_graph_validator())
        for old, new in itertools.pairwise(commits):
            listing = box.ls_tree(new)
            expected = full_listing(repo, new)
            assert dict(listing) == dict(expected)
            assert listing.duplicates == expected.duplicates == ()
            assert listing.base_oid is not None or listing.tree_oid in (first.tree_oid,)
            assert list(box.changed_paths(old, new)) == sorted(
                gitparse.decode_path(p)
                for p in Git(repo)
                .run("diff-tree", "-r", "-z", "--name-only", old, new)
                .stdout.split(b"\0")
                if p
            )
            view = box.tree_view(new)
            plain = TreeView(expected, GitBlobs(Git(repo)))
            graph = default_graph_validator()
            assert validate_tree(view, policy, graph) == validate_tree(plain, policy, graph)


def _mktree(repo: Path, lines: list[str]) -> str:
    return git(repo, "mktree", input="".join(f"{line}\n" for line in lines).encode())


@pytest.mark.parametrize(
    "shape", ["directory twice", "new directory twice", "file twice", "file and empty directory"]
)
def test_a_tree_git_refuses_is_listed_in_full(tmp_path: Path, shape: str) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    a = git(repo, "hash-object", "-w", "--stdin", input=b"# a\n")
    b = git(repo, "hash-object", "-w", "--stdin", input=b"# b\n")
    x = _mktree(repo, [f"100644 blob {a}\tx.md"])
    y = _mktree(repo, [f"100644 blob {b}\ty.md"])
    empty = _mktree(repo, [])
    good = _mktree(repo, [f"100644 blob {a}\ta.md", f"040000 tree {x}\td"])
    if shape == "new directory twice":  # `d` is not in the base: both are additions
        good = _mktree(repo, [f"100644 blob {a}\ta.md"])
    twice = [f"100644 blob {a}\ta.md", f"040000 tree {x}\td", f"040000 tree {y}\td"]
    bad = {
        "directory twice": twice,
        "new directory twice": twice,
        "file twice": [f"100644 blob {a}\ta.md", f"100644 blob {b}\ta.md", f"040000 tree {x}\td"],
        "file and empty directory": [
            f"100644 blob {a}\ta.md",
            f"040000 tree {x}\td",
            f"100644 blob {b}\te",
            f"040000 tree {empty}\te",
        ],
    }[shape]
    first = git(repo, "commit-tree", good, "-m", "good")
    second = git(repo, "commit-tree", _mktree(repo, bad), "-p", first, "-m", "bad")
    gitmemo.forget()
    box = Git(repo)
    box.ls_tree(first)
    listing = box.ls_tree(second)
    expected = full_listing(repo, second)
    assert listing.base_oid is None  # not derived: listed in full
    assert dict(listing) == dict(expected)
    assert listing.duplicates == expected.duplicates != ()
    report = validate_tree(box.tree_view(second), SyncPolicy(), default_graph_validator())
    assert "duplicate-entry" in report.codes()


def test_a_warm_one_commit_sync_lists_no_tree(
    team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In the daemon (a process that lives on: it hands the cycle its status memo), after
    one sync, the next that admits one incoming commit derives everything from the last
    tree: no `ls-tree`, no `diff-tree` (the log gave the commit's diff), and no `cat-file`
    (the few objects it reads are read in-process)."""
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    assert team.bob.sync().status == "synced"
    commit(team.alice.path, {"MEMORY_a.md": "# A\n\nmore\n"})
    push(team.alice.path)  # by git itself: nothing about it is known in this process
    folder, log = _spy(tmp_path / "spy")
    with monkeypatch.context() as env:
        env.setenv("PATH", f"{folder}:{os.environ['PATH']}")
        bob = team.bob
        result = sync_root(bob.settings, bob.state_dir, SyncOptions(), memo=StatusMemo())
    assert result.status == "synced", result.message
    runs = _runs(log)
    assert "ls-tree" not in runs
    assert "diff-tree" not in runs
    # The sizes, the new tree's id and the changed bytes come from the object files.
    assert "cat-file" not in runs
    assert (team.bob.path / "MEMORY_a.md").read_text() == "# A\n\nmore\n"


def test_a_path_that_looks_like_a_log_header_is_a_path(tmp_path: Path) -> None:
    """A path holding `\\x01<hex> <hex>` (git allows it) neither counts as a commit nor
    plants a diff for made-up commits in the box's memo."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    fake, parent = "a" * 40, "b" * 40
    stream = (
        b"commit refs/heads/main\ncommitter T <t@e> 0 +0000\ndata 1\nx\n"
        b'M 100644 inline "\\001' + f"{fake} {parent}".encode() + b'"\ndata 2\nx\n\n'
    )
    git(repo, "fast-import", "--quiet", input=stream)
    head = git(repo, "rev-parse", "main")
    gitmemo.forget()
    count, changes = Git(repo).changes(head, None)
    assert count == 1
    assert [c.path for c in changes] == [f"\x01{fake} {parent}"]
    assert gitmemo.DIFFS.get((parent, fake)) is None


def test_a_listing_kept_for_a_commit_that_is_gone_is_not_used(tmp_path: Path) -> None:
    """The root is made again at the same path (a new clone): the last listing's commit
    does not exist there, and the next listing is made in full, not an error."""
    repo = tmp_path / "repo"
    for body in (b"# one\n", b"# two\n"):
        shutil.rmtree(repo, ignore_errors=True)
        git(tmp_path, "init", "-q", "-b", "main", str(repo))
        blob = git(repo, "hash-object", "-w", "--stdin", input=body)
        made = git(repo, "commit-tree", _mktree(repo, [f"100644 blob {blob}\ta.md"]), "-m", "x")
        listing = Git(repo).ls_tree(made)
        assert dict(listing) == dict(full_listing(repo, made))


def _listing_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "memsync-list-ahead"]


def test_a_listing_started_ahead_is_the_one_listing_and_ends_with_the_session(
    tmp_path: Path,
) -> None:
    """A one-shot box lists a start tree beside the incoming log (`list_ahead`): the later
    `ls_tree` takes that listing (one `ls-tree` in all) and it equals git's; a listing
    nobody took is waited for when the object session ends, so none outlives the cycle."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    commit(repo, {"MEMORY.md": "# M\n", "a/MEMORY_x.md": "x\n"})
    head = git(repo, "rev-parse", "HEAD")
    folder, log = _spy(tmp_path / "spy")
    env = {"PATH": f"{folder}:{os.environ['PATH']}"}
    gitmemo.forget()
    box = Git(repo, env=env, resident=False)
    with box.object_session():
        box.list_ahead(head)
        box.list_ahead(head)  # once per revision
        assert len(_listing_threads()) <= 1
        listing = box.ls_tree(head)
    assert dict(listing) == dict(full_listing(repo, head))
    assert _runs(log).count("ls-tree") == 1
    gitmemo.forget()
    with box.object_session():
        box.list_ahead(head)  # never taken
    assert _listing_threads() == []
    assert _runs(log).count("ls-tree") == 2


def test_a_listing_started_ahead_is_what_another_commits_listing_derives_from(
    tmp_path: Path,
) -> None:
    """The candidate's listing, asked first (the history check of a series of edits needs
    no tree), is derived from the start's listing started ahead and git's diff: the start
    is listed once, the candidate never in full, and the derived listing names its base's
    listing (`base_entries`), for the gate's shape."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    commit(repo, {"MEMORY.md": "# M\n", "a/MEMORY_x.md": "x\n"})
    start = git(repo, "rev-parse", "HEAD")
    commit(repo, {"a/MEMORY_x.md": "y\n"})
    candidate = git(repo, "rev-parse", "HEAD")
    folder, log = _spy(tmp_path / "spy")
    env = {"PATH": f"{folder}:{os.environ['PATH']}"}
    gitmemo.forget()
    box = Git(repo, env=env, resident=False)
    with box.object_session():
        box.list_ahead(start)
        listing = box.ls_tree(candidate)
    assert dict(listing) == dict(full_listing(repo, candidate))
    assert listing.base_oid == git(repo, "rev-parse", f"{start}^{{tree}}")
    assert dict(listing.base_entries or {}) == dict(full_listing(repo, start))
    assert [path for path, _entry in listing.delta or ()] == ["a/MEMORY_x.md"]
    assert _runs(log).count("ls-tree") == 1
    assert _listing_threads() == []
    gitmemo.forget()
    with box.object_session():  # a listing ahead that fails: this one is listed in full
        box.list_ahead("f" * 40)
        assert dict(box.ls_tree(candidate)) == dict(full_listing(repo, candidate))
    assert _listing_threads() == []


def test_a_listing_ahead_only_in_a_one_shot_session_and_fails_as_the_plain_one(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    commit(repo, {"MEMORY.md": "# M\n"})
    head = git(repo, "rev-parse", "HEAD")
    gitmemo.forget()
    Git(repo, resident=False).list_ahead(head)  # outside a session: nothing starts
    with Git(repo).object_session():
        Git(repo).list_ahead(head)  # a resident box (the daemon) derives or reads instead
    assert _listing_threads() == []
    missing = "f" * 40
    box = Git(repo, resident=False)
    with box.object_session():
        box.list_ahead(missing)
        with pytest.raises(GitError):  # what `ls_tree` alone raises for an unknown commit
            box.ls_tree(missing)


def test_a_cold_fast_forward_of_a_big_root_runs_the_collector_only_outside_admission(
    tmp_path: Path,
) -> None:
    """Admitting one commit into a 3,000-file root builds the start's listing, its shape
    and their copies: tens of thousands of small acyclic objects. The cyclic collector is
    paused meanwhile (as for the graph), so it does not scan the heap again and again."""
    upstream = make_upstream(tmp_path, 3000)
    root = clone(upstream, tmp_path / "root")
    writer = clone(upstream, tmp_path / "writer")
    settings = settings_for("big", root)
    state = tmp_path / "state"
    assert sync_root(settings, state, SyncOptions()).status == "current"
    commit(writer, {"MEMORY_note00001.md": "# Note 1\n\nmore\n"})
    push(writer)
    gitmemo.forget()
    SHAPES.clear()
    started: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        result = sync_root(settings, state, SyncOptions())
    finally:
        gc.callbacks.remove(count)
    assert result.status == "synced", result.message
    assert gc.isenabled()
    assert len(started) < 8, started  # some 20 without the pause
