"""`tests.helpers.head_of` and `snapshot` read HEAD from `.git` where they can: they say what
`git rev-parse HEAD` and `git symbolic-ref HEAD` say, in every shape a test's repository
takes (a loose branch, packed refs, a detached HEAD, a linked work tree), and start no git
process in the usual one (right after a commit)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import helpers
from tests.helpers import commit, git, head_of, snapshot


def _repo(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    commit(root, {"MEMORY.md": "# One\n"})
    commit(root, {"MEMORY.md": "# Two\n"})
    return root


def test_after_a_commit_head_is_read_without_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _repo(tmp_path)
    want = git(root, "rev-parse", "HEAD")
    asked: list[tuple[str, ...]] = []
    monkeypatch.setattr(helpers, "git", lambda cwd, *args, **kw: asked.append(args) or "")
    assert head_of(root) == want
    assert asked == []


@pytest.mark.parametrize("shape", ["loose", "packed", "detached", "worktree", "subdir"])
def test_head_and_branch_are_what_git_says(tmp_path: Path, shape: str) -> None:
    root = _repo(tmp_path)
    where = root
    if shape == "packed":
        git(root, "pack-refs", "--all")
        assert not (root / ".git" / "refs" / "heads" / "main").exists()
    elif shape == "detached":
        git(root, "checkout", "-q", "--detach", "HEAD~1")
    elif shape == "worktree":
        where = tmp_path / "linked"
        git(root, "worktree", "add", "-q", "-b", "side", str(where), "HEAD~1")
    elif shape == "subdir":
        where = root / "sub"
        where.mkdir()
    assert head_of(where) == git(where, "rev-parse", "HEAD")
    if shape == "detached":  # as `git symbolic-ref HEAD`: a detached HEAD has no branch
        with pytest.raises(AssertionError, match="symbolic-ref"):
            snapshot(where)
        return
    if shape in ("subdir", "worktree"):
        return  # snapshot() takes a main work tree's top (it reads `.git/index`)
    got = snapshot(where)
    assert (got.head, got.branch) == (
        git(where, "rev-parse", "HEAD"),
        git(where, "symbolic-ref", "HEAD"),
    )
