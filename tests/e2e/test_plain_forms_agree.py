"""The plain forms of `run` and `cycle KIND ROOT` (`cli.plain`, no click) and click's own form
of the same command check the state dir alike: one command line, one answer, whichever form
parses it (`--log-format` sends it through click). Found by review: click named a cycle
`cycle`, not `cycle insight`, and so never made or checked its state dir."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.kit import git


def _config(tmp_path: Path, state: Path) -> Path:
    root = tmp_path / "root"
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    git(root, "commit", "-q", "--allow-empty", "-m", "init")
    config = tmp_path / "c.yaml"
    config.write_text(
        f"version: 1\nstate_dir: {state}\ncontrol:\n  socket: {tmp_path / 'sock'}\n"
        f"roots:\n  bob:\n    path: {root}\n    sync:\n      enabled: false\n"
    )
    return config


FORMS: tuple[list[str], ...] = ([], ["--log-format", "text"])  # the plain form, then click's


def _memsync(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "memsync", "--config", str(config), *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def _both_forms(config: Path, command: list[str]) -> list[tuple[int, str]]:
    answers = [_memsync(config, *extra, *command) for extra in FORMS]
    return [(done.returncode, done.stderr.strip()) for done in answers]


@pytest.mark.parametrize(
    "command", [["cycle", "insight", "bob"], ["cycle", "prune", "bob"], ["run"]]
)
def test_both_forms_refuse_a_state_dir_that_is_a_file(tmp_path: Path, command: list[str]) -> None:
    state = tmp_path / "state"
    state.write_text("not a directory\n")
    plain, clicked = _both_forms(_config(tmp_path, state), command)
    assert plain == clicked
    assert plain[0] == 2 and "state dir" in plain[1]  # a configuration error, before the run


def test_both_forms_of_a_cycle_make_its_state_dir_private(tmp_path: Path) -> None:
    state = tmp_path / "state"
    config = _config(tmp_path, state)
    for extra in FORMS:
        state.mkdir(mode=0o700, exist_ok=True)
        state.chmod(0o777)
        done = _memsync(config, *extra, "cycle", "insight", "bob")
        assert done.returncode == 0, done.stderr
        assert state.stat().st_mode & 0o777 == 0o700, extra
