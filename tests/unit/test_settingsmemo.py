"""The settings memo (issue 18): a fresh process reads back exactly the settings the schema
would build, only for the bytes and conditions it saw, and never holds a secret."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.config import settingsmemo
from memsync.config.load import load_config_bytes
from memsync.config.model import Settings, settings_from
from memsync.config.sample import SAMPLE

# The sample names every key; a second shape covers the other view source and role kind.
OTHER = """\
version: 1
roots:
  a: {path: ./a, repair: {role: fixer}}
  b:
    path: /b
    sync: {events: "https://hub/v1/events", events_token: {file: tok}}
roles:
  fixer: {executor: command, command: [/bin/true, x], timeout: 90s}
views:
  shared:
    root: a
    source: {kind: http, url: "https://hub.example/v1/views/x", token: {credential: hub}}
    trust: {allow_unsigned: true}
hooks:
  - {on: [synced, conflict], roots: [a, b], command: [/bin/echo]}
"""


def loaded(tmp_path: Path, text: str) -> tuple[Path, bytes, Settings]:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    raw = path.read_bytes()
    return path, raw, settings_from(load_config_bytes(raw, path), path)


@pytest.fixture(autouse=True)
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    return tmp_path / "cache" / "memsync" / settingsmemo.DIR_NAME


@pytest.mark.parametrize("text", [SAMPLE, OTHER])
def test_the_memo_gives_back_what_the_schema_built(tmp_path: Path, text: str) -> None:
    path, raw, settings = loaded(tmp_path, text)
    assert settingsmemo.recall(path, raw) is None
    settingsmemo.remember(path, raw, settings)
    assert settingsmemo.recall(path, raw) == settings


def test_the_memo_answers_only_for_the_bytes_and_conditions_it_saw(
    tmp_path: Path, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, raw, settings = loaded(tmp_path, OTHER)
    settingsmemo.remember(path, raw, settings)
    (memo,) = cache.iterdir()
    assert memo.stat().st_mode & 0o777 == 0o600
    assert cache.stat().st_mode & 0o777 == 0o700
    assert settingsmemo.recall(path, raw + b"\n") is None  # other bytes
    seen = {var: os.environ[var] for var in ("XDG_RUNTIME_DIR", "XDG_STATE_HOME")}
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "elsewhere"))  # moves the socket
    assert settingsmemo.recall(path, raw) is None
    monkeypatch.setenv("XDG_RUNTIME_DIR", seen["XDG_RUNTIME_DIR"])
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state-home"))
    assert settingsmemo.recall(path, raw) is None
    monkeypatch.setenv("XDG_STATE_HOME", seen["XDG_STATE_HOME"])
    assert settingsmemo.recall(path, raw) == settings
    good = memo.read_text()
    for junk in ("", "[]", "{", '{"version": 2}', good.replace('"Settings"', '"Path"')):
        memo.write_text(junk)
        assert settingsmemo.recall(path, raw) is None


def test_the_same_file_by_another_name_keeps_that_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path, raw, settings = loaded(tmp_path, OTHER)
    settingsmemo.remember(path, raw, settings)
    monkeypatch.chdir(tmp_path)
    other = Path("config.yaml")  # `path` is absolute
    recalled = settingsmemo.recall(other, raw)
    assert recalled == settings_from(load_config_bytes(raw, other), other)
    assert recalled is not None and recalled.config_path == other


def test_an_inline_secret_is_never_written(tmp_path: Path, cache: Path) -> None:
    text = OTHER.replace("{file: tok}", '{value: "s3cr3t-token"}')
    path, raw, settings = loaded(tmp_path, text)
    settingsmemo.remember(path, raw, settings)
    assert not cache.exists() or not any(cache.iterdir())
    assert settingsmemo.recall(path, raw) is None


# Any tagged document: decoding either fails as the memo expects or gives allowlisted values.
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(["@", "@path", "@td", "@tuple", "@frozenset", "@dict", "kind", "ref"])
            | st.text(max_size=3),
            inner | st.sampled_from([*settingsmemo.CLASSES, *settingsmemo.LOADED_CLASSES]),
            max_size=3,
        )
    ),
    max_leaves=12,
)


@given(json_values)
def test_a_foreign_memo_decodes_to_allowlisted_values_or_fails_cleanly(data: object) -> None:
    try:
        value = settingsmemo.decode(json.loads(json.dumps(data)))
    except (ValueError, TypeError, KeyError):
        return
    allowed = (type(None), bool, int, float, str, Path, tuple, frozenset, dict)
    allowed += tuple(settingsmemo.CLASSES.values())
    allowed += tuple(settingsmemo.allowed(name) for name in settingsmemo.LOADED_CLASSES)
    assert isinstance(value, allowed) or type(value).__name__ == "timedelta"
    assert os.environ.get("XDG_CACHE_HOME")  # nothing here wrote a memo
