"""A work tree's bytes for `memsync validate`: read only from what is still a regular file
(a name swapped for a symlink or a FIFO after the listing is neither followed nor waited
on)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsync.roots.disktree import FileBlobs


def test_regular_files_are_read(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_bytes(b"# M\n")
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "x.md").write_bytes(b"x")
    assert FileBlobs(tmp_path).read_many(["MEMORY.md", "d/x.md"]) == {
        "MEMORY.md": b"# M\n",
        "d/x.md": b"x",
    }


@pytest.mark.parametrize("kind", ["symlink", "fifo"])
def test_a_name_that_is_no_longer_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    secret = tmp_path / "outside.txt"
    secret.write_bytes(b"not memory")
    root = tmp_path / "root"
    root.mkdir()
    if kind == "symlink":
        (root / "MEMORY.md").symlink_to(secret)
    else:
        os.mkfifo(root / "MEMORY.md")  # nobody writes: a blocking open would wait forever
    with pytest.raises(OSError):
        FileBlobs(root).read_many(["MEMORY.md"])
