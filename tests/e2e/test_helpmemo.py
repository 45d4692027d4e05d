"""The help memo (issue 18, item 2): a second `memsync ... --help` prints, without importing
click or any command, exactly what click printed for it, and never an entry made under
other conditions (terminal width, locale, another source)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from memsync.cli import helpmemo
from memsync.cli.group import cli
from tests.e2e.test_startup import HEAVY, probe

# What a help answered by the memo must not import.
NOT_LOADED = (*HEAVY, "click", "memsync.cli.group", "memsync.cli.kit", "memsync.config", "typing")


def command_paths() -> list[list[str]]:
    """Every command's path below `memsync` (the lazy ones loaded), the top level first."""
    found: list[list[str]] = [[]]
    pending: list[tuple[list[str], click.Group]] = [([], cli)]
    while pending:
        prefix, group = pending.pop()
        ctx = click.Context(group, info_name=prefix[-1] if prefix else "memsync")
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            assert command is not None, name
            found.append([*prefix, name])
            if isinstance(command, click.Group):
                pending.append(([*prefix, name], command))
    return found


def help_of(
    *args: str, env: dict[str, str], cwd: Path | None = None
) -> tuple[int, list[str], str, str]:
    return probe(*args, env=env, heavy=NOT_LOADED, cwd=cwd)


def test_every_command_path_is_asked_for_its_help() -> None:
    assert len(command_paths()) > 20  # every subcommand, not only the top level


@pytest.mark.parametrize("path", command_paths(), ids=lambda p: " ".join(p) or "memsync")
def test_every_help_is_answered_from_the_memo_as_click_printed_it(
    tmp_path: Path, path: list[str]
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "80"}
    for flag in ("--help", "-h") if len(path) < 2 else ("--help",):
        code, loaded, first, err = help_of(*path, flag, env=env)
        assert (code, err) == (0, ""), (path, err)
        assert "click" in loaded, path  # click printed it
        code, loaded, again, err = help_of(*path, flag, env=env)
        assert (code, loaded, err) == (0, [], ""), (path, loaded)
        assert again == first, path
        assert again.startswith(f"Usage: memsync {' '.join(path)}".rstrip()), again


@pytest.mark.parametrize(
    "changed",
    [{"COLUMNS": "60"}, {"COLUMNS": "200"}, {"LANGUAGE": "de"}, {"PYTHONIOENCODING": "ascii"}],
)
def test_an_entry_made_under_other_conditions_is_never_printed(
    tmp_path: Path, changed: dict[str, str]
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "COLUMNS": "80"}
    for args in (["--help"], ["sync-now", "--help"]):
        help_of(*args, env=env)
        code, loaded, memo, _ = help_of(*args, env=env)
        assert (code, loaded) == (0, [])
        code, loaded, now, _ = help_of(*args, env={**env, **changed})
        fresh = {**env, **changed, "XDG_CACHE_HOME": str(tmp_path / "fresh")}
        _, _, expected, _ = help_of(*args, env=fresh)
        assert code == 0
        assert "click" in loaded, changed  # a miss: click rendered it again
        assert now == expected
        if changed.get("COLUMNS") == "60":  # click's width is at most 80
            assert now != memo


def test_an_edited_source_retires_the_memo(tmp_path: Path) -> None:
    package = tmp_path / "src" / "memsync"
    shutil.copytree(
        Path(helpmemo.__file__).parent.parent, package, ignore=shutil.ignore_patterns("__pycache__")
    )
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(tmp_path / "src")}
    first = help_of("--help", env=env, cwd=tmp_path)
    assert help_of("--help", env=env, cwd=tmp_path)[:3] == (0, [], first[2])
    assert (
        str(package)
        in subprocess.run(
            [sys.executable, "-c", "import memsync; print(memsync.__file__)"],
            env={**os.environ, **env},
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )  # the copy is the one that runs
    source = package / "cli" / "group.py"
    source.write_text(source.read_text().replace("in step with", "level with"))
    code, loaded, out, _ = help_of("--help", env=env, cwd=tmp_path)
    assert (code, "click" in loaded) == (0, True)
    assert "roots level with their" in out
    assert help_of("--help", env=env, cwd=tmp_path)[:3] == (0, [], out)
    # Any source of the package, not only the command line's own (`cli/`): the help of a
    # command is built from modules below it too; and every moved command module.
    for other in ("names.py", "config/schema.py", "cli/views.py", "cli/app.py"):
        edited = package / other
        edited.write_text(edited.read_text() + "\n# edited\n")
        code, loaded, again, _ = help_of("--help", env=env, cwd=tmp_path)
        assert (code, "click" in loaded, again) == (0, True, out), other
        assert help_of("--help", env=env, cwd=tmp_path)[:3] == (0, [], out), other


def test_a_damaged_or_foreign_entry_is_a_miss(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    _, _, expected, _ = help_of("--help", env=env)
    (entry,) = (tmp_path / "cache" / "memsync" / helpmemo.DIR_NAME).iterdir()
    assert entry.stat().st_mode & 0o777 == 0o600
    assert entry.parent.stat().st_mode & 0o777 == 0o700
    good = entry.read_bytes()
    key, _, rest = good.partition(b"\n")
    for damaged in (
        good[:-1],  # truncated
        good + b"x",
        key + b"\nx\n" + rest.partition(b"\n")[2],
        key.replace(b"'--help'", b"'-h'") + b"\n" + rest,  # another key
        b"",
    ):
        entry.write_bytes(damaged)
        code, loaded, out, _ = help_of("--help", env=env)
        assert (code, "click" in loaded, out) == (0, True, expected)
        assert entry.read_bytes() == good  # and the entry is made anew
    entry.unlink()
    entry.symlink_to(tmp_path / "elsewhere")
    (tmp_path / "elsewhere").write_bytes(good)
    code, loaded, out, _ = help_of("--help", env=env)
    assert (code, "click" in loaded, out) == (0, True, expected)


def test_only_help_is_memoized(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    for args in (["nosuch", "--help"], ["--debug", "--help"], ["--help", "status"], []):
        for _ in range(2):
            _, loaded, _, _ = help_of(*args, env=env)
            assert "click" in loaded, args
    assert not (tmp_path / "cache" / "memsync" / helpmemo.DIR_NAME).exists()
    assert helpmemo.wanted(["views", "pull", "--help"])
    for args in ([], ["--help", "x"], ["--config", "--help"], ["X", "-h"], ["a"] * 4 + ["-h"]):
        assert not helpmemo.wanted(args), args


def test_the_memo_keeps_the_most_recent_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    asked = [[f"c{i}", "--help"] for i in range(helpmemo.MAX_ENTRIES + 3)]
    for i, args in enumerate(asked):
        helpmemo.remember(args, b"help %d\n" % i)
        folder = tmp_path / "cache" / "memsync" / helpmemo.DIR_NAME
        os.utime(folder / os.path.basename(helpmemo._entry_file(args) or ""), ns=(i, i))
    (tmp_path / "cache" / "memsync" / helpmemo.DIR_NAME / "mine.txt").write_text("kept")
    helpmemo.remember(asked[-1], b"again\n")
    kept = [helpmemo.recall(args) is not None for args in asked]
    assert kept == [False] * 3 + [True] * helpmemo.MAX_ENTRIES
    assert (tmp_path / "cache" / "memsync" / helpmemo.DIR_NAME / "mine.txt").exists()


def closed_pipe(args: list[str], env: dict[str, str], entry: list[str]) -> tuple[int, str]:
    """Exit code and stderr of `memsync ARGS` writing into a pipe nobody reads."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run(
            [sys.executable, *entry, *args],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **env},
            timeout=60,
            check=False,
        )
    finally:
        os.close(write)
    return done.returncode, done.stderr


def test_a_closed_pipe_ends_help_as_click_ends_it(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    help_of("--help", env=env)
    assert help_of("--help", env=env)[:2] == (0, [])  # the memo answers
    through_click = ["-c", "import sys; from memsync.cli.group import main; main()"]
    assert closed_pipe(["--help"], env, ["-m", "memsync"]) == (1, "")
    assert closed_pipe(["--help"], env, through_click) == (1, "")
