"""A regular expression compiled when it is first used, not when its module loads.

A cold `memsync status` or `sync-now` loads modules whose patterns only a rarer path
matches (a failed call's words, a token in a log line, git's progress on a terminal, a
driver in an attributes file): compiling each at import cost every process, used or not
(issue 18). `lazy(source)` is typed as the compiled pattern and behaves as one for its
methods and attributes; once compiled, they are the pattern's own, found as plain
attributes, so a hot loop pays no indirection. Two threads may both compile it the first
time: the same pattern either way.
"""

from __future__ import annotations

import re

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from re import Pattern
    from typing import AnyStr

# What a compiled pattern offers (`re.Pattern`'s methods and attributes).
_ATTRIBUTES = (
    "match",
    "fullmatch",
    "search",
    "sub",
    "subn",
    "split",
    "findall",
    "finditer",
    "pattern",
    "flags",
    "groups",
    "groupindex",
)


class LazyPattern:
    """`re.compile(source, flags)` on first use; its methods then, as plain attributes."""

    def __init__(self, source: str | bytes, flags: int) -> None:
        self._source, self._flags = source, flags

    def __getattr__(self, name: str) -> object:
        if name not in _ATTRIBUTES:
            raise AttributeError(name)
        compiled = re.compile(self._source, self._flags)
        for attribute in _ATTRIBUTES:
            setattr(self, attribute, getattr(compiled, attribute))
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy({self._source!r}, {self._flags})"


def lazy(source: AnyStr, flags: int = 0) -> Pattern[AnyStr]:
    """The pattern `re.compile(source, flags)` would return, compiled on first use."""
    return LazyPattern(source, flags)  # type: ignore[return-value]
