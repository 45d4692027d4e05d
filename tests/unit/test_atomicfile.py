"""State files are written through a private temporary file (`atomicfile.private_temp`), made as
`tempfile.mkstemp` makes one, without importing tempfile (issue 18: a cold process's start-up)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memsync.atomicfile import private_temp, read_json, write_json


def test_a_temporary_file_is_new_private_and_named_as_asked(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        fd, path = private_temp(tmp_path, ".state.json.", ".tmp")
    finally:
        os.umask(old)
    os.close(fd)
    assert path.parent == tmp_path
    assert path.name.startswith(".state.json.") and path.name.endswith(".tmp")
    assert "." not in path.name.removeprefix(".state.json.").removesuffix(".tmp")
    assert stat.S_IMODE(path.lstat().st_mode) == 0o600
    assert path.read_bytes() == b""
    fd2, other = private_temp(tmp_path, ".state.json.", ".tmp")
    os.close(fd2)
    assert other != path


def test_a_name_that_exists_is_never_reused_nor_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "elsewhere"
    target.write_bytes(b"theirs")
    (tmp_path / ".x.aaaaaaaaaaaa.tmp").symlink_to(target)
    (tmp_path / ".x.bbbbbbbbbbbb.tmp").write_bytes(b"mine before")
    names = iter([b"\xaa" * 6, b"\xbb" * 6, b"\xcc" * 6])
    monkeypatch.setattr(os, "urandom", lambda n: next(names))
    fd, path = private_temp(tmp_path, ".x.", ".tmp")
    os.close(fd)
    assert path.name == ".x.cccccccccccc.tmp"
    assert target.read_bytes() == b"theirs"
    assert (tmp_path / ".x.bbbbbbbbbbbb.tmp").read_bytes() == b"mine before"


def test_write_json_leaves_only_the_file(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "state.json"
    write_json(path, {"a": 1})
    write_json(path, {"a": 2})
    assert read_json(path) == {"a": 2}
    assert sorted(p.name for p in path.parent.iterdir()) == ["state.json"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
