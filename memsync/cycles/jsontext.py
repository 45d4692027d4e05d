"""Untrusted JSON text (a model endpoint's body, a model's answer) parsed within bounds.

`loads` refuses text over a size cap and nesting deeper than `MAX_DEPTH` before the parser
sees it (Python's parser recurses once per level: 100,000 nested `[` were a RecursionError,
an internal error), and turns whatever the parser still raises into one `JSONRefused`
(a ValueError) whose text says what was wrong.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from typing import Any

MAX_DEPTH = 64  # a chat completion nests 4 levels; an answer object 2
MAX_CHARS = 4 << 20  # characters of JSON text parsed at most

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
_BRACKET = re.compile(r"[\[\]{}]")
_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


class JSONRefused(ValueError):
    """Text that is not JSON memsync will use; `message` says why in plain words."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def depth(text: str) -> int:
    """How deep the brackets of `text` nest outside its strings (an unterminated string's
    brackets count too: the text is invalid then, and a higher count only refuses sooner)."""
    bare = _STRING.sub("", text)
    steps = (_STEP[match.group()] for match in _BRACKET.finditer(bare))
    return max(itertools.accumulate(steps, initial=0))


def loads(
    text: str | bytes,
    *,
    max_depth: int = MAX_DEPTH,
    max_chars: int = MAX_CHARS,
    object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None,
) -> Any:
    """`json.loads` for untrusted text: JSONRefused (a ValueError) for text over
    `max_chars`, nested deeper than `max_depth`, or not valid JSON. Errors the
    `object_pairs_hook` raises (other than a RecursionError) propagate unchanged."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise JSONRefused(f"not UTF-8 (byte {exc.start})") from None
    if len(text) > max_chars:
        raise JSONRefused(f"{len(text)} characters, over the {max_chars}-character cap")
    nested = depth(text)
    if nested > max_depth:
        raise JSONRefused(f"nested {nested} levels deep, over the {max_depth}-level cap")
    hook = None if object_pairs_hook is None else _Carried.wrap(object_pairs_hook)
    try:
        return json.loads(text, object_pairs_hook=hook)
    except _Carried as carried:  # the caller's own hook refused: its error, unchanged
        raise carried.error from None
    except json.JSONDecodeError as exc:
        raise JSONRefused(f"{exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except ValueError as exc:  # e.g. an integer over Python's digit limit
        raise JSONRefused(str(exc) or type(exc).__name__) from None
    except RecursionError:  # the depth scan should make this unreachable; never exit 3
        raise JSONRefused(f"nested too deep to parse (over {max_depth} levels)") from None


class _Carried(Exception):
    """Carries what the caller's hook raised past the parser's own error handling."""

    def __init__(self, error: Exception) -> None:
        super().__init__(str(error))
        self.error = error

    @classmethod
    def wrap(
        cls, hook: Callable[[list[tuple[str, Any]]], Any]
    ) -> Callable[[list[tuple[str, Any]]], Any]:
        def carried(pairs: list[tuple[str, Any]]) -> Any:
            try:
                return hook(pairs)
            except Exception as exc:
                raise cls(exc) from exc

        return carried
