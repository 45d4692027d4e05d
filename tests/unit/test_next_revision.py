"""`next_revision`: the one rule `views build` and `views publish` take the revision from."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.errors import UsageError
from memsync.names import is_name
from memsync.views.build import Current, next_revision, static_dir

NOW = datetime(2026, 12, 1, tzinfo=UTC)
LIFE = timedelta(days=30)
A, B = "a" * 64, "b" * 64


def test_a_new_target_starts_at_one() -> None:
    assert next_revision(A, None, now=NOW, expires=LIFE).revision == 1


@given(st.integers(min_value=1, max_value=2**40), st.booleans())
def test_changed_content_is_the_next_revision_unchanged_is_nothing(rev: int, same: bool) -> None:
    current = Current(rev, A, NOW + LIFE)
    decided = next_revision(A if same else B, current, now=NOW, expires=LIFE)
    assert decided.unchanged is same
    assert decided.revision == (rev if same else rev + 1)


def test_unchanged_content_past_half_its_lifetime_is_renewed() -> None:
    current = Current(3, A, NOW + LIFE / 2 - timedelta(seconds=1))
    decided = next_revision(A, current, now=NOW, expires=LIFE)
    assert (decided.revision, decided.unchanged, decided.renews) == (4, False, True)


@given(st.integers(min_value=1, max_value=100), st.integers(min_value=1, max_value=100))
def test_an_explicit_revision_must_be_above_the_current(rev: int, asked: int) -> None:
    current = Current(rev, A, NOW + LIFE)
    if asked <= rev:
        with pytest.raises(UsageError, match=f"existing revision {rev}"):
            next_revision(A, current, now=NOW, expires=LIFE, requested=asked)
    else:
        decided = next_revision(A, current, now=NOW, expires=LIFE, requested=asked)
        assert (decided.revision, decided.unchanged) == (asked, False)


@given(st.text(max_size=20))
def test_the_static_layout_takes_only_a_view_name(view_id: str) -> None:
    """`--out`'s manifest is read before anything is built: never by a path that escapes."""
    out = Path("/srv/site")
    if is_name(view_id):
        assert static_dir(out, view_id).parent == out / "v1" / "views"
    else:
        with pytest.raises(UsageError, match="not a view id"):
            static_dir(out, view_id)
