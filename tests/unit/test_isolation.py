"""The suite never touches the real home: each test has HOME and XDG dirs of its own."""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import pytest

from memsync.config import paths
from tests.conftest import ISOLATED_DIRS, _new_home, untouched


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


def test_a_home_is_given_again_only_as_it_was_made(tmp_path: Path) -> None:
    """A finished test's home goes to the next test only when nothing was written, moved
    or chmodded in it: each of these changes keeps it from being given again."""
    changes = {
        "a file": lambda b: (b / "home" / "x").write_text(""),
        "an empty dir": lambda b: (b / "cache" / "memsync").mkdir(),
        "a hidden file": lambda b: (b / "state" / ".lock").write_text(""),
        "a mode": lambda b: (b / "run").chmod(0o755),
        "a symlink": lambda b: ((b / "data").rmdir(), (b / "data").symlink_to(b / "home")),
        "a gone dir": lambda b: (b / "config").rmdir(),
        "a file beside": lambda b: (b / "extra").write_text(""),
    }
    assert untouched(_new_home(tmp_path))
    for what, change in changes.items():
        base = _new_home(tmp_path)
        change(base)
        assert not untouched(base), what
