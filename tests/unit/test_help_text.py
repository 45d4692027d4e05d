"""`--help` of every command is what it was before the command line became a package
(issue 20, item 6): the text click renders, 80 columns wide, for every command path, against
tests/unit/data/help.txt (written from the code before the move). A change to a command's
help is a change to that file, made on purpose."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memsync.cli.app import App
from memsync.cli.group import cli
from tests.e2e.test_helpmemo import command_paths

GOLDEN = Path(__file__).parent / "data" / "help.txt"


def golden() -> dict[str, str]:
    """Each command path's help, by `memsync PATH --help`."""
    found: dict[str, str] = {}
    for block in GOLDEN.read_text().split("$ memsync ")[1:]:
        command, _, text = block.partition("\n")
        found[command] = text
    return found


def test_every_commands_help_is_unchanged(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    # The group's callback sets up logging for a process (its handler, levels, propagation):
    # in this test process that is put back afterwards, or later tests' caplog sees nothing.
    for logger in (logging.getLogger(), logging.getLogger("memsync")):
        monkeypatch.setattr(logger, "handlers", list(logger.handlers))
        monkeypatch.setattr(logger, "level", logger.level)
        monkeypatch.setattr(logger, "propagate", logger.propagate)
    expected = golden()
    rendered: dict[str, str] = {}
    for path in command_paths():
        args = [*path, "--help"]
        capsys.readouterr()
        code = cli.main(args=args, prog_name="memsync", standalone_mode=False, obj=App())
        out, err = capsys.readouterr()
        assert (code, err) == (0, ""), args
        rendered[" ".join(args)] = out
    assert sorted(rendered) == sorted(expected)
    for command, text in expected.items():
        assert rendered[command] == text, command
