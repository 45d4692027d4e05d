"""Object files read in-process (gitobjects.py) say what `git cat-file` says, for loose and
packed (deltified) objects, and answer None whenever they cannot be certain."""

from __future__ import annotations

import os
import subprocess
import zlib
from pathlib import Path

import pytest
from gitdb.pack import PackEntity, PackIndexFile  # type: ignore[import-untyped]
from hypothesis import given, settings
from hypothesis import strategies as st

from memsync.transports import gitmemo, gitobjects, process
from memsync.transports.git import Git
from memsync.transports.gitobjects import ObjectFiles
from tests.helpers import commit, git


def _repo(path: Path) -> Path:
    git(path.parent, "init", "-q", "-b", "main", str(path))
    git(path, "config", "user.name", "T")
    git(path, "config", "user.email", "t@example.invalid")
    return path


def _raw(repo: Path, oid: str) -> bytes:
    done = subprocess.run(
        ["git", "cat-file", "blob", oid], cwd=repo, capture_output=True, check=True
    )
    return done.stdout


@settings(max_examples=15, deadline=None)
@given(
    versions=st.lists(st.binary(min_size=0, max_size=3000), min_size=1, max_size=4),
    packed=st.booleans(),
)
def test_sizes_and_bytes_equal_cat_file(
    tmp_path_factory: pytest.TempPathFactory, versions: list[bytes], packed: bool
) -> None:
    repo = _repo(tmp_path_factory.mktemp("objects") / "repo")
    base = b"shared prefix for deltas\n" * 40
    blobs = []
    for number, data in enumerate(versions):  # each version differs from the last
        head = commit(repo, {"MEMORY.md": base + b"%d\n" % number + data}, "v")
        blobs.append(git(repo, "rev-parse", f"{head}:MEMORY.md"))
    if packed:
        git(repo, "gc", "-q", "--aggressive")  # deltas against each other
    files = ObjectFiles(repo / ".git" / "objects")
    for oid in blobs:
        size = int(git(repo, "cat-file", "-s", oid))
        assert files.header(oid) == ("blob", size)
        assert files.read(oid, 1 << 20) == ("blob", _raw(repo, oid))
        assert files.read(oid, size - 1 if size else -1) is None  # over the limit: not read
    assert files.commit_tree(head) == git(repo, "rev-parse", f"{head}^{{tree}}")


def test_a_corrupt_or_missing_object_answers_none(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    head = commit(repo, {"MEMORY.md": "# A\n"})
    oid = git(repo, "rev-parse", f"{head}:MEMORY.md")
    path = repo / ".git" / "objects" / oid[:2] / oid[2:]
    path.chmod(0o644)
    path.write_bytes(zlib.compress(b"blob 4\0# B\n"))  # well framed, wrong bytes for the id
    files = ObjectFiles(repo / ".git" / "objects")
    assert files.header(oid) == ("blob", 4)  # the frame is read...
    assert files.read(oid, 100) is None  # ...but bytes that do not hash to the id are not
    path.write_bytes(b"not zlib at all")
    assert ObjectFiles(repo / ".git" / "objects").header(oid) is None
    assert files.header("0" * 40) is None
    assert files.header("0" * 64) is None  # SHA-256 ids: git decides


def test_too_many_packs_ask_git(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _repo(tmp_path / "repo")
    head = commit(repo, {"MEMORY.md": "# A\n"})
    git(repo, "repack", "-q", "-a", "-d")
    oid = git(repo, "rev-parse", f"{head}:MEMORY.md")
    assert ObjectFiles(repo / ".git" / "objects").header(oid) == ("blob", 4)
    monkeypatch.setattr(gitobjects, "MAX_PACKS", 0)
    assert ObjectFiles(repo / ".git" / "objects").header(oid) is None


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_no_pack_stays_open_after_a_read(tmp_path: Path) -> None:
    """A daemon must not keep a pack `git gc` deletes: every window is let go on close."""
    repo = _repo(tmp_path / "repo")
    head = commit(repo, {"MEMORY.md": "# A\n"})
    git(repo, "repack", "-q", "-a", "-d")
    oid = git(repo, "rev-parse", f"{head}:MEMORY.md")

    def open_packs() -> list[str]:
        fds = Path("/proc/self/fd")
        found = [str(os.readlink(fds / fd)) for fd in os.listdir(fds) if (fds / fd).exists()]
        maps = Path("/proc/self/maps").read_text().splitlines()
        return [p for p in found + maps if str(repo) in p and "/pack/" in p]

    with ObjectFiles(repo / ".git" / "objects") as files:
        assert files.read(oid, 100) == ("blob", b"# A\n")
    assert open_packs() == []


def test_an_object_in_an_older_pack_is_found(tmp_path: Path) -> None:
    """Packs are searched newest first, and every one of them is searched."""
    repo = _repo(tmp_path / "repo")
    first = commit(repo, {"MEMORY.md": "# A\n"})
    git(repo, "repack", "-q", "-d")
    second = commit(repo, {"MEMORY_b.md": "# B\n"})
    git(repo, "repack", "-q", "-d")  # a second pack holding only the new objects
    assert len(list((repo / ".git" / "objects" / "pack").glob("*.pack"))) == 2
    with ObjectFiles(repo / ".git" / "objects") as files:
        for rev, path, data in ((first, "MEMORY.md", b"# A\n"), (second, "MEMORY_b.md", b"# B\n")):
            oid = git(repo, "rev-parse", f"{rev}:{path}")
            assert files.read(oid, 100) == ("blob", data)


# -- a one-shot box's object session (one `cat-file --batch` for a cycle's reads) ----------


def _session_box(repo: Path) -> Git:
    gitmemo.forget()  # nothing remembered from another test: every read goes to git
    return Git(repo, resident=False)


def test_the_session_answers_what_one_shot_calls_answer(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    first = commit(repo, {"MEMORY.md": "# M\n", "PURSUITS.md": "# P\n"}, "one")
    head = commit(repo, {"MEMORY.md": "# M\n\nmore\n", "a.md": ""}, "two")
    blobs = [git(repo, "rev-parse", f"{head}:{name}") for name in ("MEMORY.md", "PURSUITS.md")]
    blobs.append(git(repo, "rev-parse", f"{head}:a.md"))  # empty
    missing = "0" * 40
    one_shot = _session_box(repo)
    want_sizes = one_shot.blob_sizes([*blobs, missing], trees_of=[head, first])
    want_trees = {c: gitmemo.TREES.get(c) for c in (head, first)}
    want_bytes = one_shot.read_blobs([*blobs, missing])
    before = process.started()
    box = _session_box(repo)
    with box.object_session():
        assert box.blob_sizes([*blobs, missing], trees_of=[head, first]) == want_sizes
        assert {c: gitmemo.TREES.get(c) for c in (head, first)} == want_trees
        gitmemo.forget()
        assert box.read_blobs([*blobs, missing]) == want_bytes
        session = box._objects
        assert session is not None
    assert process.started() - before == 1  # every read of the block: one git
    assert session.closed and session.proc.returncode is not None  # killed and reaped
    assert box._objects is None
    assert want_trees[head] == git(repo, "rev-parse", f"{head}^{{tree}}")
    assert want_sizes == {blobs[0]: 10, blobs[1]: 4, blobs[2]: 0}
    assert missing not in want_bytes


def test_a_big_blob_ends_the_session_unread(tmp_path: Path) -> None:
    """Its size comes from the header alone: the session is ended, never drained, and the
    next read starts another."""
    repo = _repo(tmp_path / "repo")
    big = os.urandom(gitmemo.BLOB_KEPT + 1)
    head = commit(repo, {"MEMORY.md": "# M\n", "big.md": big}, "one")
    oid, small = (git(repo, "rev-parse", f"{head}:{n}") for n in ("big.md", "MEMORY.md"))
    box = _session_box(repo)
    with box.object_session():
        assert box.blob_sizes([oid]) == {oid: len(big)}
        assert box._objects is None  # ended unread
        assert gitmemo.BLOBS.get(oid) is None
        assert box.read_blobs([small, oid]) == {small: b"# M\n", oid: big}


def test_a_session_whose_git_died_falls_back_to_one_shot_calls(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    head = commit(repo, {"MEMORY.md": "# M\n", "PURSUITS.md": "# P\n"}, "one")
    first, second = (git(repo, "rev-parse", f"{head}:{n}") for n in ("MEMORY.md", "PURSUITS.md"))
    box = _session_box(repo)
    with box.object_session():
        assert box.read_blobs([first]) == {first: b"# M\n"}
        session = box._objects
        assert session is not None
        process.kill_group(session.proc)
        session.proc.wait()
        assert box.read_blobs([second]) == {second: b"# P\n"}
        assert box._objects is None  # the dead one was let go; the answer came from git


def test_ancestry_read_through_the_session_is_git_s(tmp_path: Path) -> None:
    """Every pair of commits of a branching history: the same answer as `merge-base
    --is-ancestor`; a parent found in the walk costs no process, anything else asks git."""
    repo = _repo(tmp_path / "repo")
    root = commit(repo, {"a.md": "a\n"}, "root")
    line = [root]
    for number in range(3):
        line.append(commit(repo, {"a.md": f"a{number}\n"}, f"line {number}"))
    git(repo, "checkout", "-q", "-b", "side", root)
    side = commit(repo, {"b.md": "b\n"}, "side")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-edit", "side")
    merge = git(repo, "rev-parse", "HEAD")
    commits = [*line, side, merge]
    box = _session_box(repo)
    with box.object_session():
        for ancestor in commits:
            for descendant in commits:
                want = (
                    subprocess.run(
                        ["git", "merge-base", "--is-ancestor", ancestor, descendant],
                        cwd=repo,
                        check=False,
                    ).returncode
                    == 0
                )
                assert box.is_ancestor(ancestor, descendant) is want, (ancestor, descendant)
        before = process.started()
        assert box.is_ancestor(line[-1], merge)  # a parent: read, not asked
        assert box.is_ancestor(side, merge)  # the merge's second parent
        assert process.started() == before
        assert not box.is_ancestor(merge, root)  # not found so: git says no
        assert process.started() == before + 1


def test_ancestry_read_from_commits_learns_the_ancestors_tree(tmp_path: Path) -> None:
    """The start of a fast-forward, found among the upstream's parents, is read as a
    commit: its tree id is known from then on (a cold cycle reads its shape record ahead by
    it), with no git process of its own."""
    repo = _repo(tmp_path / "repo")
    first = commit(repo, {"a.md": "a\n"}, "one")
    second = commit(repo, {"a.md": "b\n"}, "two")
    gitmemo.forget()
    box = _session_box(repo)
    with box.object_session():
        assert box.known_tree(first) is None
        assert box.parents_reach(first, second)
        before = process.started()
        assert box.known_tree(first) == git(repo, "rev-parse", f"{first}^{{tree}}")
        assert process.started() == before
    assert box.known_tree("HEAD") is None  # by commit id only


def test_a_shallow_repository_asks_git_for_ancestry(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo")
    first = commit(repo, {"a.md": "a\n"}, "one")
    second = commit(repo, {"a.md": "b\n"}, "two")
    (repo / ".git" / "shallow").write_text(second + "\n")  # git hides second's parents
    box = _session_box(repo)
    with box.object_session():
        assert box.parents_reach(first, second) is False
        assert box.is_ancestor(first, second) is False  # as git says in a shallow clone


def test_letting_a_pack_go_builds_nothing_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Closing reads only what the pack reader holds: asking for its `__dict__` through
    `getattr` made gitdb build the index's sorted offset table (O(objects in the pack),
    13 ms per read on a 10k-file root in the daemon)."""
    repo = _repo(tmp_path / "repo")
    head = commit(repo, {"MEMORY.md": "# A\n", "b.md": "b\n"})
    git(repo, "repack", "-q", "-a", "-d")
    oid = git(repo, "rev-parse", f"{head}:MEMORY.md")
    built: list[str] = []
    for cls in (PackIndexFile, PackEntity):
        original = cls._set_cache_
        monkeypatch.setattr(
            cls,
            "_set_cache_",
            lambda self, attr, original=original: (built.append(attr), original(self, attr))[1],
        )
    with ObjectFiles(repo / ".git" / "objects") as files:
        assert files.read(oid, 100) == ("blob", b"# A\n")
        during = len(built)
    assert built[during:] == []  # nothing built while letting go
