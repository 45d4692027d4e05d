"""The daemon's configuration validated in a child process (`daemon.configcheck`, issue
18): the settings the daemon then holds are the ones its own load makes, a refused file is
refused with the same words, and the daemon's process never loads the schema for it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.cli.kit import App
from memsync.config import settingsmemo
from memsync.config.load import load_config_bytes
from memsync.config.model import settings_from
from memsync.daemon.configcheck import check_in_child, daemon_settings
from memsync.errors import ConfigError

GOOD = """version: 1
state_dir: {tmp}/state
control: {{socket: {tmp}/run/memsync.sock}}
roots:
  bob:
    path: {tmp}/bob
    sync: {{interval: 90s, timeout: 20s}}
  carol:
    path: {tmp}/carol
    watch: false
hooks:
  - on: [rejected]
    command: [/bin/true]
"""
BAD = [
    "version: 1\nroots: [this is not a mapping\n",
    "version: 1\nbogus: 1\nroots:\n  bob: {path: /x}\n"
    "hooks:\n  - on: [sinked]\n    command: [/bin/true]\n",
    "version: 2\nroots: {}\n",
    "version: 1\nroots:\n  bob: {path: relative/path, sync: {interval: soon}}\n",
    "- a list\n",
    "",
]


@pytest.fixture(autouse=True)
def own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


# The child is a fork of the daemon at start-up (one thread) and a new interpreter at a
# reload (threads running): each gives the same settings and the same words.
CHILD_KINDS = pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])


@CHILD_KINDS
def test_good_settings_are_the_ones_the_daemon_would_load(tmp_path: Path, fork: bool) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(GOOD.format(tmp=tmp_path))
    raw = path.read_bytes()
    assert settingsmemo.recall(path, raw) is None
    assert check_in_child(path, raw, fork=fork) is None
    assert settingsmemo.recall(path, raw) == settings_from(load_config_bytes(raw, path), path)
    assert daemon_settings(App(config_path=str(path))) == settings_from(
        load_config_bytes(raw, path), path
    )


@CHILD_KINDS
@pytest.mark.parametrize("text", BAD)
def test_a_refused_file_is_refused_with_the_same_words(
    tmp_path: Path, text: str, fork: bool
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    raw = path.read_bytes()
    with pytest.raises(ConfigError) as here:
        load_config_bytes(raw, path)
    child = check_in_child(path, raw, fork=fork)
    assert child is not None
    assert type(here.value) is ConfigError
    said = (child.message, child.hint, child.source, child.problems)
    assert said == (here.value.message, here.value.hint, here.value.source, here.value.problems)
    with pytest.raises(ConfigError) as daemon:
        daemon_settings(App(config_path=str(path)))
    assert (daemon.value.message, daemon.value.problems) == (
        here.value.message,
        here.value.problems,
    )
    assert settingsmemo.recall(path, raw) is None


def test_the_daemons_process_does_not_load_the_schema(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(GOOD.format(tmp=tmp_path))
    probe = f"""
import sys
from memsync.cli.kit import App
from memsync.daemon.configcheck import daemon_settings
settings = daemon_settings(App(config_path={str(path)!r}))
assert [r.name for r in settings.roots] == ["bob", "carol"], settings
print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "yaml")
             or m == "memsync.config.schema"))
"""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, "-c", probe],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
