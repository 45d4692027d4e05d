"""Config files as hostile input: alias bombs, deep nesting, tags, huge values and files.

Every command loads the config, so none of these may cost more than reading the file: each
is refused with one located problem (exit 2), before anything is expanded or built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from memsync.config import load_config, load_config_text
from memsync.config.load import MAX_CONFIG_BYTES, MAX_DEPTH
from memsync.configproblem import Located
from memsync.errors import ConfigError, SecretError
from memsync.secrets import MAX_SECRET_BYTES, SecretRef, resolve
from memsync.wire.cli import ErrorReport


def billion_laughs(levels: int = 9) -> str:
    """The classic: 9 levels of 9 aliases each, 9**9 (387 million) strings once expanded."""
    lines = ["version: 1", 'a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for level in range(1, levels):
        lines.append(f"a{level}: &a{level} [{','.join([f'*a{level - 1}'] * 9)}]")
    return "\n".join(lines) + "\n"


def refused(text: str) -> Located:
    with pytest.raises(ConfigError) as caught:
        load_config_text(text, Path("/cfg"), "config.yaml")
    assert len(caught.value.problems) == 1, caught.value.problems
    return caught.value.problems[0]


def test_alias_bombs_are_refused_before_any_expansion() -> None:
    # In this process only a small bomb (9**5 strings): should the guard break, it costs a
    # fraction of a second to fail, not all the memory there is. The full one runs in a
    # memory-capped child below.
    problem = refused(billion_laughs(levels=5))
    assert problem == Located(
        "",
        "YAML anchor &a0 is not allowed: a memsync config has no use for anchors and "
        "aliases; write the value out",
        2,
    )


@pytest.mark.parametrize(
    ("text", "line", "words"),
    [
        ("version: 1\nstate_dir: &s /x\n", 2, "anchor &s"),
        ("version: 1\nstate_dir: *s\n", 2, "alias *s"),
        ("version: 1\nroots:\n  a: &r {path: /a}\n  b: {<<: *r, path: /b}\n", 3, "anchor &r"),
        ("version: 1\nroots: &self {a: *self}\n", 2, "anchor &self"),
    ],
)
def test_anchors_and_aliases_are_refused(text: str, line: int, words: str) -> None:
    problem = refused(text)
    assert (problem.location, problem.line) == ("", line)
    assert words in problem.message


@pytest.mark.parametrize(
    "text",
    [
        "version: 1\nx: " + "[" * 10_000 + "]" * 10_000 + "\n",
        "version: 1\nx: " + "{a: " * 10_000 + "1" + "}" * 10_000 + "\n",
        "version: 1\n" + "".join(f"{' ' * depth}k{depth}:\n" for depth in range(2_000)),
    ],
    ids=["flow-lists", "flow-maps", "block-maps"],
)
def test_deep_nesting_is_refused(text: str) -> None:
    problem = refused(text)
    assert problem.message == f"nested more than {MAX_DEPTH} levels deep"
    assert problem.line is not None


def test_nesting_the_schema_needs_is_fine() -> None:
    text = (
        "version: 1\nroots:\n  a:\n    path: /a\n    publish:\n      - view: v\n"
        "        hub: https://hub.example\n        token: {env: T}\n        key: {file: /k}\n"
    )
    config = load_config_text(text, Path("/cfg"))
    assert config.roots["a"].publish[0].key.ref == "/k"


def test_python_tags_never_run(tmp_path: Path) -> None:
    made = tmp_path / "made-by-yaml"
    for text in (
        f"version: 1\nx: !!python/object/apply:os.mkdir [{str(made)!r}]\n",
        f"version: 1\nx: !!python/name:os.mkdir {made}\n",
        f"version: !!python/object/apply:os.mkdir [{str(made)!r}]\n",
    ):
        problem = refused(text)
        assert "is not allowed (a config holds plain values)" in problem.message
        assert problem.message.startswith("YAML tag !!python/")
    assert not made.exists()


@pytest.mark.parametrize("tag", ["!!binary aGk=", "!!set {a}", "!!timestamp 2024-01-01", "!mine x"])
def test_other_tags_are_refused(tag: str) -> None:
    problem = refused(f"version: 1\nstate_dir: {tag}\n")
    assert (problem.line, problem.location) == (2, "")
    assert "is not allowed" in problem.message


def test_core_tags_are_plain_values() -> None:
    config = load_config_text("version: !!int 1\nstate_dir: !!str /s\n", Path("/cfg"))
    assert config.state_dir == Path("/s")


@pytest.mark.parametrize(
    ("value", "words"),
    [("1" * 5000, "Exceeds the limit"), ("2024-13-45", "month must be in 1..12")],
    ids=["huge-int", "impossible-date"],
)
def test_values_python_cannot_build_are_problems(value: str, words: str) -> None:
    problem = refused(f"version: 1\nhttp:\n  listen: {value}\n")
    assert problem.line == 3
    assert problem.message.startswith("cannot read the value: ")
    assert words in problem.message


def test_files_over_the_cap_are_not_read(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"version: 1\n" + b"#" * MAX_CONFIG_BYTES + b"\n")
    with pytest.raises(ConfigError, match=r"is larger than 1024 KiB"):
        load_config(big)
    # An endless "file" is not a regular one: refused before a byte is read.
    with pytest.raises(ConfigError, match=r"/dev/zero is a character device, not a regular"):
        load_config(Path("/dev/zero"))


def within(seconds: float, call: Callable[[], object]) -> BaseException | None:
    """What `call` raised (None if nothing), failing the test if it is still running after
    `seconds` (a blocked open on a FIFO would otherwise hang the test run)."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            raised.append(None)
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert raised, f"still blocked after {seconds} s"
    return raised[0]


def test_a_config_path_that_is_not_a_regular_file_is_refused_without_blocking(
    tmp_path: Path,
) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    error = within(5, lambda: load_config(fifo))
    assert isinstance(error, ConfigError)
    assert error.message == f"config file {fifo} is a FIFO, not a regular file"
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(ConfigError, match="is a directory, not a regular file"):
        load_config(tmp_path / "dir.yaml")
    # A link to a regular file is an ordinary way to keep a config: followed.
    real = tmp_path / "real.yaml"
    real.write_text("version: 1\n")
    (tmp_path / "linked.yaml").symlink_to(real)
    assert load_config(tmp_path / "linked.yaml").version == 1
    (tmp_path / "to-fifo.yaml").symlink_to(fifo)
    error = within(5, lambda: load_config(tmp_path / "to-fifo.yaml"))
    assert isinstance(error, ConfigError) and "is a FIFO" in error.message


def test_a_secret_file_is_read_only_when_regular_and_small(tmp_path: Path) -> None:
    fifo = tmp_path / "token"
    os.mkfifo(fifo)
    error = within(5, lambda: resolve(SecretRef("file", str(fifo))))
    assert isinstance(error, SecretError)
    assert error.message == f"secret file {fifo}: {fifo} is a FIFO, not a regular file"
    big = tmp_path / "big"
    big.write_bytes(b"t" * (MAX_SECRET_BYTES + 1))
    with pytest.raises(SecretError, match="larger than 64 KiB"):
        resolve(SecretRef("file", str(big)))
    small = tmp_path / "small"
    small.write_bytes(b"t" * (MAX_SECRET_BYTES - 1) + b"\n")
    assert resolve(SecretRef("file", str(small))) == "t" * (MAX_SECRET_BYTES - 1)


# The child caps its own address space: an unguarded bomb then dies (MemoryError) instead of
# taking the machine's memory down with it.
_CAPPED = (
    "import resource, runpy, sys; cap = 2 * 1024**3; "
    "resource.setrlimit(resource.RLIMIT_AS, (cap, cap)); "
    "sys.argv[0] = 'memsync'; runpy.run_module('memsync', run_name='__main__')"
)


def memsync(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MEMSYNC_CONFIG": "", "XDG_CONFIG_HOME": "/nonexistent"}
    return subprocess.run(
        [sys.executable, "-c", _CAPPED, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )


def test_the_cli_refuses_a_bomb_in_one_line_at_once(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(billion_laughs())
    started = time.monotonic()
    done = memsync("config", "validate", str(bomb))
    elapsed = time.monotonic() - started
    assert done.returncode == 2, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"memsync: {bomb}:2: YAML anchor &a0 is not allowed")
    assert elapsed < 10  # start-up included; unguarded it never finishes within 60 s
    status = memsync("--config", str(bomb), "status", "--json")
    assert status.returncode == 2
    report = ErrorReport.model_validate_json(status.stdout)
    assert report.error.code == "config-invalid"
    assert report.error.source == str(bomb)
    assert [(p.line, p.location) for p in report.error.problems] == [(2, "")]
    assert json.loads(status.stdout)["error"]["exit_code"] == 2
