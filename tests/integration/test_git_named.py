"""The git box's named calls (`gitfacts`, `gitcommits`) against the real git binary: each
answer is compared with what git itself says, through the test's own git."""

from __future__ import annotations

from pathlib import Path

from memsync.transports.git import Git, RemoteBranch
from memsync.transports.gitparse import parse_version
from tests.helpers import commit, git

ME = [("user.name", "Named Calls"), ("user.email", "named@example.invalid")]


def _repo(path: Path) -> Git:
    box = Git(path)
    path.mkdir()
    box.init(branch="main")
    return box


def test_history_reads_match_git(tmp_path: Path) -> None:
    root = tmp_path / "root"
    box = _repo(root)
    first = commit(root, {"MEMORY.md": "# m\n"}, "memory: one")
    second = commit(root, {"notes.txt": "x"}, "prune: \u00e9 ledger\n\nbody line")
    third = commit(root, {"MEMORY.md": "# m\n- a\n"}, "memory: two")
    assert box.subjects("HEAD") == [
        (third, "memory: two"),
        (second, "prune: \u00e9 ledger"),
        (first, "memory: one"),
    ]
    assert box.recent_subjects(2) == ["memory: two", "prune: \u00e9 ledger"]
    assert box.commit_message(second) == "prune: \u00e9 ledger\n\nbody line"
    assert box.commit_id("HEAD") == third
    assert box.touching("HEAD", ["MEMORY.md"]) == [first, third]
    assert box.count_touching("HEAD", None, ["MEMORY.md"]) == 2
    assert box.count_touching("HEAD", first, ["MEMORY.md"]) == 1
    assert box.root_commits("HEAD") == [first]
    assert box.first_parent_chain(first, third) == [third, second]
    assert box.parents_of(third) == [second]
    assert box.parents_of(first) == []
    assert box.merge_bases(first, third) == [first]
    assert box.descends(first, third) and not box.descends(third, first)
    assert not box.descends("0" * 40, third)  # git cannot tell: not an ancestor
    assert box.has_commit(second) and not box.has_commit("0" * 40)
    tree = git(root, "rev-parse", "HEAD^{tree}")
    assert not box.has_commit(tree)
    assert box.object_id("HEAD:MEMORY.md") == git(root, "rev-parse", "HEAD:MEMORY.md")
    assert box.object_id("HEAD:missing") is None
    assert box.file_at(first, "MEMORY.md") == b"# m\n"
    assert box.file_at(first, "notes.txt") is None
    assert box.object_format() == git(root, "rev-parse", "--show-object-format")


def test_tree_names_index_and_remotes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    box = _repo(root)
    commit(root, {"MEMORY.md": "m", "MEMORY_b.md": "b", "sub/x.md": "x", "we ird.md": "w"})
    assert box.tree_names("HEAD") == ["MEMORY.md", "MEMORY_b.md", "sub", "we ird.md"]
    assert box.tree_names("HEAD", "MEMORY.md") == ["MEMORY.md"]
    assert box.tracks_under("sub") and not box.tracks_under("su")
    assert box.remotes() == []
    box.add_remote("origin", str(tmp_path / "up.git"))
    box.add_remote("second", str(tmp_path / "other.git"))
    box.track("main", "origin")
    assert box.remotes() == ["origin", "second"]
    assert git(root, "config", "branch.main.merge") == "refs/heads/main"
    plain = tmp_path / "plain"
    plain.mkdir()
    assert Git(plain).remotes() == []  # not a repository: git fails, no remotes, no error


def test_remote_branch_and_version(tmp_path: Path) -> None:
    up = tmp_path / "up.git"
    Git(tmp_path).run("init", "--quiet", "--bare", str(up))
    root = tmp_path / "root"
    box = _repo(root)
    box.add_remote("origin", str(up))
    assert box.remote_branch("origin", "main", 10)[0] is RemoteBranch.ABSENT
    git(root, "push", "-q", "origin", f"{commit(root, {'a': 'a'})}:refs/heads/main")
    assert box.remote_branch("origin", "main", 10) == (RemoteBranch.PRESENT, "")
    gone, why = box.remote_branch(str(tmp_path / "gone.git"), "main", 10)
    assert gone is RemoteBranch.UNREACHABLE and why
    answer = Git(Path("/"), timeout=10).version()
    assert answer.ok and answer.text == git(tmp_path, "--version")
    assert parse_version(answer.text) is not None


def test_index_and_commit_writes(tmp_path: Path) -> None:
    root = tmp_path / "root"
    box = _repo(root)
    base = commit(root, {"a.md": "a", "b.md": "b"})
    (root / "a.md").write_text("a2")
    (root / "b.md").unlink()
    box.add(["a.md", "b.md"], every=True)
    tree = box.write_tree()
    assert tree == git(root, "write-tree")
    made = box.commit_tree(tree, [base], "made\n\nMemsync-Operation: x\n", ME)
    assert git(root, "log", "-1", "--format=%P%x09%cn%x09%B", made) == (
        f"{base}\tNamed Calls\tmade\n\nMemsync-Operation: x"
    )
    merged = box.commit_tree(tree, [base, made], "two parents", ME)
    assert box.parents_of(merged) == [base, made]
    git(root, "reset", "-q", "--hard", base)
    (root / "c.md").write_text("c")
    box.add(["c.md"])
    box.remove_cached("b.md")
    box.commit_index("index commit", ME, verify=False)
    assert git(root, "show", "--name-status", "--format=%s", "HEAD").split("\n") == [
        "index commit",
        "",
        "D\tb.md",
        "A\tc.md",
    ]
    box.commit_index("empty", ME, allow_empty=True)
    assert box.subjects("HEAD")[0][1] == "empty"
    assert box.set_ref("refs/memsync/kept", base, "test")
    assert git(root, "rev-parse", "refs/memsync/kept") == base
    assert not box.set_ref("refs/memsync/kept", "1" * 40, "test")  # no such object


def test_merge_and_cherry_pick_attempts(tmp_path: Path) -> None:
    root = tmp_path / "root"
    box = _repo(root)
    base = commit(root, {"f.md": "base\n"})
    git(root, "checkout", "-q", "-b", "side")
    side = commit(root, {"f.md": "side\n"}, "side edit")
    git(root, "checkout", "-q", "main")
    commit(root, {"f.md": "main\n"}, "main edit")
    clash = box.merge(side, "memsync: merge", ME)
    assert not clash.ok
    assert box.unmerged_paths() == ["f.md"]
    git(root, "merge", "--abort")
    picked = box.cherry_pick(side, ME)
    assert not picked.ok
    git(root, "cherry-pick", "--abort")
    git(root, "reset", "-q", "--hard", base)
    other = commit(root, {"g.md": "g"}, "other")
    git(root, "reset", "-q", "--hard", base)
    assert box.cherry_pick(other, ME).ok
    box.cherry_pick_kept(other, ME)  # changes nothing now, kept anyway
    assert box.subjects("HEAD")[0][1] == "other" and len(box.subjects("HEAD")) == 3
    fresh = box.merge(side, "memsync: merge side", ME)
    assert fresh.ok and box.parents_of("HEAD")[1] == side


def test_new_repositories(tmp_path: Path) -> None:
    bare = tmp_path / "cache"
    bare.mkdir()
    Git(bare).init(bare=True)
    assert git(bare, "rev-parse", "--is-bare-repository") == "true"
    role = tmp_path / "role"
    role.mkdir()
    box = Git(role)
    box.init(empty_template=True, object_format="sha1")
    assert not (role / ".git" / "hooks").exists()  # no template files
    box.set_config("user.name", "Role", local=True)
    assert git(role, "config", "--local", "user.name") == "Role"
