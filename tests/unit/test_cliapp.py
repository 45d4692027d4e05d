"""`cli.app.echo` writes what `click.echo` writes, whatever the text and the stream."""

from __future__ import annotations

import io
import sys

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.cli import app

PIECES = st.sampled_from(["\x1b[31m", "\x1b[0m", "\x1b]0;t\x07", "\x1b", "é", "…", "\udcff", "a"])
TEXTS = st.lists(PIECES | st.text(max_size=5), max_size=6).map("".join)


class Tty(io.TextIOWrapper):
    def isatty(self) -> bool:
        return True


def written(echo: object, text: str, encoding: str, errors: str, tty: bool) -> bytes | str:
    raw = io.BytesIO()
    stream = (Tty if tty else io.TextIOWrapper)(raw, encoding=encoding, errors=errors)
    saved = sys.stdout
    sys.stdout = stream
    try:
        echo(text)  # type: ignore[operator]
    except UnicodeEncodeError as exc:
        return f"UnicodeEncodeError {exc.reason}"
    finally:
        sys.stdout = saved
    stream.flush()
    return raw.getvalue()


@pytest.mark.parametrize(
    ("encoding", "errors"),
    [("utf-8", "strict"), ("utf-8", "surrogateescape"), ("ascii", "strict"), ("latin-1", "strict")],
)
@pytest.mark.parametrize("tty", [False, True])
@given(text=TEXTS)
def test_echo_writes_what_click_echo_writes(
    text: str, encoding: str, errors: str, tty: bool
) -> None:
    ours = written(app.echo, text, encoding, errors, tty)
    assert ours == written(click.echo, text, encoding, errors, tty)
