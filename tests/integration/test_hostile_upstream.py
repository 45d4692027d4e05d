"""The sync cycle against upstream histories git's object check or the gate refuses.

Whatever refuses it (the fetch's object check, or the gate on objects a fetch stored
before refusing), the verdict is `rejected` with a problem code on every try, the root is
untouched, and the same shapes are never pushed outgoing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.errors import RootError
from memsync.roots.create import init_root
from tests.conftest import Team
from tests.helpers import commit, git, push, snapshot

FILE, DIR = "100644", "40000"


def _tree(repo: object, entries: list[tuple[str, str, str]]) -> str:
    body = b"".join(
        mode.encode() + b" " + name.encode() + b"\0" + bytes.fromhex(oid)
        for mode, name, oid in sorted(entries, key=lambda e: e[1] + ("/" if e[0] == DIR else ""))
    )
    return git(repo, "hash-object", "-t", "tree", "--literally", "-w", "--stdin", input=body)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "mode", "code"),
    [
        ("GITMOD~1", DIR, "dotgit-path"),
        (".GITATTRIBUTES", DIR, "dotgit-path"),
        (".git\u200cmodules", FILE, "dotgit-path"),
        ("MEMORY.md", FILE, "duplicate-entry"),
    ],
    ids=["ntfs-gitmodules-dir", "gitattributes-dir", "hfs-gitmodules", "duplicate"],
)
def test_a_hostile_tree_is_rejected_with_a_code_on_every_try(
    team: Team, name: str, mode: str, code: str
) -> None:
    up = team.upstream
    base = git(up, "rev-parse", "main")
    entries = [
        tuple(line.split(maxsplit=3)[i] for i in (0, 3, 2))
        for line in git(up, "ls-tree", "main").splitlines()
    ]
    blob = git(up, "hash-object", "-w", "--stdin", input=b"[x]\n")
    extra = blob if mode == FILE else _tree(up, [(FILE, "x.md", blob)])
    tree = _tree(up, [*entries, (mode, name, extra)])  # type: ignore[list-item]
    hostile = git(up, "commit-tree", "-p", base, "-m", "hostile", tree)
    git(up, "update-ref", "refs/heads/main", hostile)
    before = snapshot(team.bob.path)
    for _attempt in range(3):
        result = team.bob.sync()
        assert result.status == "rejected", result.message
        assert code in {p.code for p in result.problems}, result.problems
        assert snapshot(team.bob.path) == before


def test_a_case_collision_inside_the_history_is_rejected(team: Team) -> None:
    alice = team.alice.path
    commit(alice, {"MEMORY_x.md": "# x\n", "MEMORY_X.md": "# X\n"}, "both")
    commit(alice, {"MEMORY_X.md": None}, "one again")
    push(alice)
    before = snapshot(team.bob.path)
    result = team.bob.sync()
    assert result.status == "rejected"
    assert "case-collision" in {p.code for p in result.problems}
    assert snapshot(team.bob.path) == before


def test_a_case_collision_inside_local_history_is_never_pushed(team: Team) -> None:
    bob = team.bob.path
    upstream_before = git(team.upstream, "rev-parse", "main")
    commit(bob, {"MEMORY_x.md": "# x\n", "MEMORY_X.md": "# X\n"}, "both")
    commit(bob, {"MEMORY_X.md": None}, "one again")
    result = team.bob.sync()
    assert result.status == "rejected"
    assert "case-collision" in {p.code for p in result.problems}
    assert git(team.upstream, "rev-parse", "main") == upstream_before


def test_init_refuses_a_history_clash_after_an_empty_commit_as_sync_does(
    team: Team, tmp_path: Path
) -> None:
    """A case collision only inside the history, made on top of an empty commit (git
    lists no diff for it, so its tree must be looked up): joining by init is refused like
    syncing into a root is (init used to assume an empty tree there and let it in)."""
    alice = team.alice.path
    commit(alice, {"MEMORY_x.md": "# x\n"}, "x")
    git(alice, "commit", "-q", "--allow-empty", "-m", "empty")
    commit(alice, {"MEMORY_X.md": "# X\n"}, "clash")
    commit(alice, {"MEMORY_X.md": None}, "gone")
    push(alice)
    joining = tmp_path / "carol"
    with pytest.raises(RootError, match=r"case-collision MEMORY_X\.md"):
        init_root(joining, upstream=str(team.upstream))
    assert not joining.exists() or not any(joining.iterdir())
    before = snapshot(team.bob.path)
    result = team.bob.sync()
    assert result.status == "rejected", result.message
    assert "case-collision" in {p.code for p in result.problems}
    assert snapshot(team.bob.path) == before
