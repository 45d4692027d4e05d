"""The starter's pure parts: `--root NAME=PATH` parsing (every input is a root or a usage
error) and the rendered text (any path, read back through the schema, is that path)."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from memsync.config.load import load_config_text
from memsync.config.starter import StarterRoot, parse_root_option, render
from memsync.errors import UsageError
from memsync.names import is_name


@given(st.text(max_size=60))
def test_a_root_option_is_a_valid_name_and_an_absolute_path_or_a_usage_error(text: str) -> None:
    try:
        name, path = parse_root_option(text)
    except UsageError as exc:
        assert "--root" in exc.message
        return
    assert is_name(name)
    assert path.is_absolute()
    assert text.startswith(f"{name}=")


def test_root_options() -> None:
    assert parse_root_option("work=/srv/mem") == ("work", Path("/srv/mem"))
    assert parse_root_option("a.b-c_1=~/x")[1] == Path.home() / "x"
    assert parse_root_option("w=rel")[1] == Path.cwd() / "rel"
    for bad in ("", "=", "x", "x=", "=/p", "bad name=/p", ".x=/p", "-x=/p", "x\udcff=/p"):
        with pytest.raises(UsageError):
            parse_root_option(bad)
    with pytest.raises(UsageError, match="not valid UTF-8"):
        parse_root_option("x=/p\udcff")


# Paths a YAML writer could get wrong: quotes, colons, '#', leading spaces, newlines, YAML
# words, non-ASCII.
path_parts = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/\x00"),
    min_size=1,
    max_size=20,
)


@given(st.lists(path_parts, min_size=1, max_size=3), st.booleans())
@example(["\x85"], True)  # a raw NEL in YAML reads back as a space (found by CI's profile)
def test_any_path_renders_to_a_config_that_reads_back_as_that_path(
    parts: list[str], has_remote: bool
) -> None:
    path = Path("/", *parts)
    root = StarterRoot(
        "r", path, "main", "origin" if has_remote else None, None if has_remote else "none"
    )
    text = render(Path("/var/lib/memsync"), Path("/run/memsync/memsync.sock"), [root])
    config = load_config_text(text, Path("/"))
    assert config.roots["r"].path == path
    assert config.roots["r"].sync.enabled is has_remote


def test_two_roots_of_one_name_are_refused() -> None:
    root = StarterRoot("r", Path("/a"), "main", "origin")
    with pytest.raises(UsageError, match="same name"):
        render(Path("/s"), Path("/s/m.sock"), [root, root])
