"""Cheap draws for `st.composite` strategies: each strategy object is built once.

Hypothesis validates a strategy object and computes its label the first time that object is
drawn from, and `st.integers(a, b)` / `st.sampled_from(...)` go through an LRU cache on every
call; a composite strategy that builds them inside its loops spends most of its time there,
not in the test. These helpers draw the same values (an index shrinks towards the first
option, as `sampled_from` does) from strategies made once per bounds."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

T = TypeVar("T")

BOOLEANS = st.booleans()
_INTEGERS: dict[tuple[int, int], SearchStrategy[int]] = {}


def integer(draw: st.DrawFn, low: int, high: int) -> int:
    """`draw(st.integers(low, high))`."""
    strategy = _INTEGERS.get((low, high))
    if strategy is None:
        strategy = _INTEGERS[(low, high)] = st.integers(low, high)
    return draw(strategy)


def pick(draw: st.DrawFn, options: Sequence[T]) -> T:
    """`draw(st.sampled_from(options))` for a non-empty sequence."""
    if not options:
        raise ValueError("nothing to pick from")
    return options[integer(draw, 0, len(options) - 1)]


def flag(draw: st.DrawFn) -> bool:
    """`draw(st.booleans())`."""
    return draw(BOOLEANS)
