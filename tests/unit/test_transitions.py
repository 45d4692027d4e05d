"""Status transitions: one event when a status changes, none while it stays."""

from __future__ import annotations

import logging

from hypothesis import given
from hypothesis import strategies as st

from memsync.daemon.transitions import Transitions, level_for

HEAD = "1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d"
UP = "ffffeeeeddddccccbbbbaaaa9999888877776666"
ROOT_STATUSES = ["current", "dirty", "rejected", "offline", "error", "conflict", "disabled"]


def root(status: str, head: str = HEAD, message: str = "m") -> dict[str, object]:
    return {"root": "bob", "status": status, "message": message, "head": head, "upstream": UP}


def test_a_repeated_status_says_nothing_and_a_change_says_old_and_new() -> None:
    seen = Transitions()
    first = seen.observe("root", "bob", "offline", "unreachable", root("offline"))
    assert first is not None and first.event == "first" and first.level == logging.WARNING
    for _ in range(5):
        assert seen.observe("root", "bob", "offline", "unreachable", root("offline")) is None
    back = seen.observe("root", "bob", "current", "up to date", root("current"))
    assert back is not None
    assert back.event == "recovered" and back.level == logging.INFO
    assert back.previous == "offline"
    line = back.line()
    assert line.startswith("root bob: offline -> current (head 1a2b3c4d5e6f, upstream ffffeeeedddd")
    assert line.endswith(": up to date")
    document = back.document()
    assert document["previous_status"] == "offline" and document["event"] == "recovered"
    assert document["time"].endswith("Z") and document["head"] == HEAD


def test_levels_a_persons_edit_is_info_refusals_warn_errors_are_errors() -> None:
    assert level_for("root", "current", "dirty") == logging.INFO
    assert level_for("root", None, "disabled") == logging.INFO
    for status in ("rejected", "conflict", "rewound", "auth-failed", "host-key-changed"):
        assert level_for("root", "current", status) == logging.WARNING, status
    assert level_for("root", "current", "error") == logging.ERROR
    assert level_for("root", "synced", "current") == logging.DEBUG  # settling is not news
    assert level_for("view", "current", "stale") == logging.WARNING
    assert level_for("view", "stale", "current") == logging.INFO


def test_each_sync_to_new_commits_is_news_the_same_one_again_is_not() -> None:
    seen = Transitions()
    assert seen.observe("root", "bob", "synced", "m", root("synced", "a" * 40)) is not None
    assert seen.observe("root", "bob", "synced", "m", root("synced", "a" * 40)) is None
    moved = seen.observe("root", "bob", "synced", "m", root("synced", "b" * 40))
    assert moved is not None and moved.event == "moved"


def test_a_forgotten_root_starts_over_and_views_are_apart_from_roots() -> None:
    seen = Transitions()
    assert seen.observe("root", "x", "current", "m", {}) is not None
    assert seen.observe("view", "x", "current", "m", {}) is not None
    seen.forget("root", "x")
    again = seen.observe("root", "x", "current", "m", {})
    assert again is not None and again.previous is None
    assert seen.observe("view", "x", "current", "m", {}) is None


@given(st.lists(st.sampled_from(ROOT_STATUSES), max_size=40))
def test_transitions_are_exactly_the_changes(statuses: list[str]) -> None:
    seen = Transitions()
    said = [seen.observe("root", "r", s, "m", root(s)) for s in statuses]
    changes = [i for i, s in enumerate(statuses) if i == 0 or statuses[i - 1] != s]
    assert [i for i, t in enumerate(said) if t is not None] == changes
