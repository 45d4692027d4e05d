"""The one name rule: roots, views, roles, headings, view ids and token scopes.

RightMemory's id grammar (letters, digits, '.', '_', '-'), starting with a letter or digit
so a name is never `.`/`..` or hidden. Names become single path components on disk (state
directories, import directories, the hub's view directories), so the rule is also what makes
them safe there. 128 characters: the longest any place accepted, so no stored name breaks.
"""

from __future__ import annotations

from memsync.lazypattern import lazy

NAME_MAX = 128
NAME_PATTERN = rf"[A-Za-z0-9][A-Za-z0-9_.-]{{0,{NAME_MAX - 1}}}"
NAME_RE = lazy(NAME_PATTERN)


def is_name(value: str) -> bool:
    return NAME_RE.fullmatch(value) is not None
