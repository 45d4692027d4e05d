"""`lazypattern.lazy` (issue 18): a pattern compiled on first use answers as `re.compile`'s."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from memsync.lazypattern import LazyPattern, lazy

SOURCES = (r"msk_[^\s&/?#;,\"']*", r"(?P<a>[a-z]+)=(\d+)", r"[0-9a-f]{40}|[0-9a-f]{64}", r"^x$")


@given(st.sampled_from(SOURCES), st.sampled_from([0, re.IGNORECASE, re.MULTILINE]), st.text())
def test_a_lazy_pattern_answers_as_the_compiled_one(source: str, flags: int, text: str) -> None:
    pattern, compiled = lazy(source, flags), re.compile(source, flags)
    assert isinstance(pattern, LazyPattern)
    assert str(pattern.search(text)) == str(compiled.search(text))
    assert str(pattern.fullmatch(text)) == str(compiled.fullmatch(text))
    assert pattern.sub("*", text) == compiled.sub("*", text)
    assert pattern.findall(text) == compiled.findall(text)
    assert (pattern.pattern, pattern.flags, pattern.groups) == (
        compiled.pattern,
        compiled.flags,
        compiled.groups,
    )


def test_a_lazy_pattern_compiles_once_on_first_use() -> None:
    pattern = lazy(rb"[0-9a-f]{40}\n")
    assert "match" not in vars(pattern)  # nothing compiled at definition
    assert pattern.fullmatch(b"0" * 40 + b"\n") is not None
    assert vars(pattern)["fullmatch"].__self__ is vars(pattern)["match"].__self__  # one compile
    try:
        pattern.nothing  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError:
        pass
    else:
        raise AssertionError("a name re.Pattern lacks")
