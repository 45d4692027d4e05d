"""A new revision reuses the active import's unchanged files, and nothing else.

`views pull` hard-links a file from the active import instead of inflating and writing
it again only when the kept package is the trusted revision's and the file on disk still
holds exactly the trusted bytes, as a regular file of ours with no other name. Whatever
was done to the import or the kept package, the new import is the package's files.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from memsync.roots.create import init_root
from memsync.views.previous import KEPT_PACKAGE
from memsync.views.pull import pull_views
from tests.flaky_server import FlakyState, serve
from tests.integration.test_pull import expected, imported, package_files, release, settings

IMPORT = Path(".runtime/shared_views/imports/team-auth")
UNCHANGED = sorted(set(package_files("one")) - {"dist/MEMORY.md"})


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "bob"
    init_root(path)
    return path


def inodes(base: Path) -> dict[str, int]:
    return {
        p.relative_to(base).as_posix(): p.lstat().st_ino
        for p in sorted(base.rglob("*"))
        if p.is_file() and not p.is_symlink()
    }


async def pull_two(root: Path, state_dir: Path, between: object = None) -> dict[str, int]:
    """Pull revision 1, run `between(import_dir, state_dir)`, pull revision 2 (only
    dist/MEMORY.md changes); returns revision 1's inodes."""
    state = FlakyState()
    state.manifest, state.package = release(1, "one")
    async with serve(state) as server:
        view = settings(root, server.url)
        [first] = await pull_views([view], state_dir)
        assert first.status == "pulled", first.message
        before = inodes(root / IMPORT)
        if callable(between):
            between(root / IMPORT, state_dir / "views" / "team-auth")
        state.manifest, state.package = release(2, "two")
        [second] = await pull_views([view], state_dir)
        assert (second.status, second.revision) == ("pulled", 2), second.message
    assert imported(root) == expected("two")
    for path in package_files("two"):
        st = (root / IMPORT / path).lstat()
        assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, path
        assert st.st_nlink == 1, path  # the old import is gone, nothing else names it
    return before


async def test_unchanged_files_are_linked_from_the_previous_import(
    root: Path, tmp_path: Path
) -> None:
    before = await pull_two(root, tmp_path / "state")
    after = inodes(root / IMPORT)
    assert {p: after[p] for p in UNCHANGED} == {p: before[p] for p in UNCHANGED}
    assert after["dist/MEMORY.md"] != before["dist/MEMORY.md"]
    assert (tmp_path / "state" / "views" / "team-auth" / KEPT_PACKAGE).is_file()


def _edited(imports: Path, _state: Path) -> None:
    with (imports / "view.md").open("r+b") as handle:  # same inode, same size, other bytes
        handle.write(b"X")


def _chmod(imports: Path, _state: Path) -> None:
    (imports / "view.md").chmod(0o644)


def _outside(imports: Path) -> Path:
    outside = imports.parents[4] / "outside"
    outside.mkdir(exist_ok=True)
    return outside


def _symlink_out(imports: Path, _state: Path) -> None:
    target = _outside(imports) / "view.md"
    shutil.copyfile(imports / "view.md", target)  # the right bytes, outside the import
    (imports / "view.md").unlink()
    (imports / "view.md").symlink_to(target)


def _hardlink_out(imports: Path, _state: Path) -> None:
    target = _outside(imports) / "view.md"
    os.link(imports / "view.md", target)  # a second name outside: writes there show here


def _dir_symlink_out(imports: Path, _state: Path) -> None:
    target = _outside(imports) / "dist"
    shutil.copytree(imports / "dist", target)
    shutil.rmtree(imports / "dist")
    (imports / "dist").symlink_to(target)


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (_edited, "view.md"),
        (_chmod, "view.md"),
        (_symlink_out, "view.md"),
        (_hardlink_out, "view.md"),
        (_dir_symlink_out, "dist/manifest.toml"),
    ],
)
async def test_a_changed_import_file_is_written_again_not_linked(
    root: Path, tmp_path: Path, change: object, path: str
) -> None:
    before = await pull_two(root, tmp_path / "state", change)
    after = inodes(root / IMPORT)
    outside = root.parent / "outside"
    for other in outside.rglob("*"):
        assert other.lstat().st_ino != after[path], other  # never a name of an outside file
    if change in (_edited, _chmod, _hardlink_out):  # the inode lived on: not shared
        assert after[path] != before[path]
    others = [p for p in UNCHANGED if p != path and not p.startswith("dist/")]
    assert others  # the untouched files were still reused
    assert {p: after[p] for p in others} == {p: before[p] for p in others}


def _spoil(content: bytes | None) -> object:
    def spoil(_imports: Path, state: Path) -> None:
        kept = state / KEPT_PACKAGE
        kept.unlink()
        if content is not None:
            kept.write_bytes(content)

    return spoil


@pytest.mark.parametrize(
    "content",
    [None, b"not a zip", release(2, "two")[1], release(1, "one")[1][:-1]],
    ids=["missing", "garbage", "another-package", "truncated"],
)
async def test_a_kept_package_that_is_not_the_trusted_one_reuses_nothing(
    root: Path, tmp_path: Path, content: bytes | None
) -> None:
    before = await pull_two(root, tmp_path / "state", _spoil(content))
    after = inodes(root / IMPORT)
    assert not set(before.values()) & set(after.values())
