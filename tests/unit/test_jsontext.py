"""Untrusted JSON text (cycles/jsontext.py): bounded size and nesting, one error type."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.cycles import jsontext
from memsync.cycles.answers import AnswerError, parse_answer

values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner),
    max_leaves=20,
)


def nesting(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max((nesting(v) for v in value), default=0)
    if isinstance(value, dict):
        return 1 + max((nesting(v) for v in value.values()), default=0)
    return 0


@given(values)
def test_depth_is_the_nesting_of_the_value_whatever_its_strings_hold(value: Any) -> None:
    text = json.dumps(value)
    assert jsontext.depth(text) == nesting(value)
    assert jsontext.loads(text) == value


@given(st.text(alphabet='[]{}"\\:,0 ax', max_size=300))
def test_any_text_parses_or_is_refused_with_one_error_type(text: str) -> None:
    try:
        jsontext.loads(text, max_depth=8)
    except jsontext.JSONRefused as exc:
        assert exc.message


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000,
        "[" * 100_000 + "]" * 100_000,
        '{"a": ' * 50_000 + "1" + "}" * 50_000,
        '["' + "[" * 1000 + '", ' + "[" * 65 + "]" * 65 + "]",
    ],
)
def test_deep_nesting_is_refused_before_the_parser_recurses(text: str) -> None:
    with pytest.raises(jsontext.JSONRefused, match="levels deep"):
        jsontext.loads(text)


def test_brackets_inside_strings_do_not_count() -> None:
    text = json.dumps({"content": "[" * 10_000 + "{" * 10_000})
    assert jsontext.loads(text) == {"content": "[" * 10_000 + "{" * 10_000}


def test_size_and_digit_limits_are_refusals_too() -> None:
    with pytest.raises(jsontext.JSONRefused, match="cap"):
        jsontext.loads("[" + "1," * 100 + "1]", max_chars=50)
    with pytest.raises(jsontext.JSONRefused):
        jsontext.loads("1" * 10_000)  # over Python's int digit limit: a ValueError


def test_a_hooks_own_error_passes_through_unchanged() -> None:
    with pytest.raises(AnswerError, match="appear twice"):
        parse_answer("insight", '{"action": "noop", "action": "noop", "reason": "x"}')
    with pytest.raises(AnswerError, match="levels deep"):
        parse_answer("insight", '{"action": "noop", "reason": ' + "[" * 5000 + "}")
