"""The suite never touches the real home: each test has HOME and XDG dirs of its own."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from memsync.config import paths
from tests.conftest import ISOLATED_DIRS


def test_home_and_xdg_dirs_are_this_tests_own(tmp_path_factory: pytest.TempPathFactory) -> None:
    base = tmp_path_factory.getbasetemp().resolve()
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)
    for var in ISOLATED_DIRS:
        value = Path(os.environ[var])
        assert value.is_relative_to(base), f"{var}={value} is outside {base}"
        assert not value.is_relative_to(real_home) or real_home == Path("/")
    memo = paths.memo_path()
    assert memo is not None and memo.is_relative_to(Path(os.environ["XDG_CACHE_HOME"]))


def test_two_tests_do_not_share_a_home_first(isolated_home: dict[str, str]) -> None:
    marker = Path(isolated_home["HOME"]) / "left-by-first"
    marker.write_text("x")
    assert Path.home() == Path(isolated_home["HOME"])


def test_two_tests_do_not_share_a_home_second(isolated_home: dict[str, str]) -> None:
    assert not (Path(isolated_home["HOME"]) / "left-by-first").exists()
    assert Path.home() == Path(isolated_home["HOME"])
