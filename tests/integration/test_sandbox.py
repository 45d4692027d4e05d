"""The root guard on a real repository: whatever a role does to the root's refs, HEAD,
config, hooks, info and object-store settings is seen, and the root is put back exactly."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from memsync.cycles.sandbox import ROLE_ESCAPED, RoleEscaped, RootGuard
from memsync.transports.git import Git
from tests.helpers import commit, git


def tree_of_git_dir(dot: Path) -> dict[str, tuple[int, bytes]]:
    """Every file and symlink under the git directory but objects, logs and the index."""
    found: dict[str, tuple[int, bytes]] = {}
    for folder, dirs, files in os.walk(dot):
        rel = Path(folder).relative_to(dot)
        if rel.parts[:1] in (("objects",), ("logs",), ("elsewhere",)) and rel.parts[:2] != (
            "objects",
            "info",
        ):
            continue
        for name in [*files, *(d for d in dirs if Path(folder, d).is_symlink())]:
            path = Path(folder, name)
            if name in ("index", "COMMIT_EDITMSG", "ORIG_HEAD") or name.endswith(".lock"):
                continue
            info = path.lstat()
            data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
            found[path.relative_to(dot).as_posix()] = (info.st_mode, data)
    return found


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "root"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    commit(path, {"MEMORY.md": "# One\n"})
    commit(path, {"MEMORY.md": "# Two\n"})
    git(path, "update-ref", "refs/remotes/origin/main", "HEAD~1")
    git(path, "tag", "kept", "HEAD~1")
    hooks = path / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    (hooks / "pre-commit.sample").write_text("#!/bin/sh\n")
    (hooks / "pre-commit.sample").chmod(0o644)
    return path


def _symlinked_refs(dot: Path) -> None:
    shutil.move(dot / "refs" / "tags", dot / "elsewhere")
    (dot / "refs" / "tags").symlink_to(dot / "elsewhere")


MUTATIONS: dict[str, Callable[[Path], None]] = {
    "hook-made-executable": lambda dot: (dot / "hooks" / "pre-commit.sample").chmod(0o755),
    "hook-added": lambda dot: (dot / "hooks" / "post-checkout").write_text("#!/bin/sh\n"),
    "nested-ref": lambda dot: (
        (dot / "refs" / "heads" / "a" / "b").mkdir(parents=True),
        (dot / "refs" / "heads" / "a" / "b" / "c").write_text((dot / "ORIG").read_text()),
    ),
    "packed-refs": lambda dot: (dot / "packed-refs").write_text("# pack-refs with: peeled\n"),
    "config-include": lambda dot: (dot / "config").write_text(
        (dot / "config").read_text() + "[include]\n\tpath = /tmp/evil\n"
    ),
    "head-removed": lambda dot: (dot / "HEAD").unlink(),
    "refs-dir-symlinked": _symlinked_refs,
    "alternates": lambda dot: (dot / "objects" / "info" / "alternates").write_text("/tmp\n"),
    "ref-deleted": lambda dot: (dot / "refs" / "remotes" / "origin" / "main").unlink(),
}


@pytest.mark.parametrize("mutation", sorted(MUTATIONS))
def test_the_guard_sees_and_undoes_every_change(root: Path, mutation: str) -> None:
    dot = root / ".git"
    (dot / "ORIG").write_text(git(root, "rev-parse", "HEAD~1") + "\n")  # a helper, not git's
    box = Git(root)
    guard = RootGuard.take(box)
    before = tree_of_git_dir(dot)
    MUTATIONS[mutation](dot)
    assert guard.changed()
    with pytest.raises(RoleEscaped) as raised:
        guard.check(box, "the test role")
    assert {p.code for p in raised.value.problems} == {ROLE_ESCAPED}
    assert tree_of_git_dir(dot) == before
    assert guard.changed() == []
    assert git(root, "rev-parse", "main~1") == git(root, "rev-parse", "kept")
    assert git(root, "for-each-ref", "--format=%(refname)", "refs/tags/") == "refs/tags/kept"


def test_an_untouched_root_passes_and_a_moved_branch_is_kept_under_a_rescue_ref(
    root: Path,
) -> None:
    box = Git(root)
    guard = RootGuard.take(box)
    guard.check(box, "the test role")  # nothing changed: nothing raised
    start = git(root, "rev-parse", "HEAD")
    moved = commit(root, {"MEMORY_x.md": "# X\n"})
    with pytest.raises(RoleEscaped) as raised:
        guard.check(box, "the test role")
    assert "refs/heads/main" in raised.value.message and moved[:12] in raised.value.message
    assert git(root, "rev-parse", "HEAD") == start
    assert git(root, "rev-parse", f"refs/memsync/rescue/role-escaped/{moved}") == moved
