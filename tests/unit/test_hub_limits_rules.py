"""The rules behind the hub's listener limits, free of sockets: the per-token stream count
shared by workers (`streams.py`), the repeat filter of the log (`ratelog.py`) and the
default connection cap (`guard.py`). The hub under real hostile clients is tested in
tests/e2e/test_hub_hostile.py."""

from __future__ import annotations

import logging
import resource

from hypothesis import given
from hypothesis import strategies as st

from memsync.hub.guard import BACKLOG, default_max_connections
from memsync.hub.ratelog import RepeatFilter
from memsync.hub.streams import StreamTable

TOKENS = ["0123456789abcdef", "fedcba9876543210", "00000000000000ff", "ff00000000000000"]


@given(
    st.lists(st.tuples(st.integers(0, 2), st.sampled_from(TOKENS), st.booleans()), max_size=200),
    st.integers(1, 5),
)
def test_a_token_never_holds_more_streams_than_its_cap_across_workers(
    steps: list[tuple[int, str, bool]], cap: int
) -> None:
    table = StreamTable(3, slots=8)
    tallies = [table.tally(index, cap) for index in range(3)]
    model: list[dict[str, int]] = [{}, {}, {}]  # streams each worker holds per token
    for worker, token, opening in steps:
        total = sum(held.get(token, 0) for held in model)
        if opening:
            assert tallies[worker].open(token) == (total < cap)
            if total < cap:
                model[worker][token] = model[worker].get(token, 0) + 1
        elif model[worker].get(token):
            tallies[worker].close(token)
            model[worker][token] -= 1
        for other in TOKENS:  # every worker sees every worker's streams
            expected = sum(held.get(other, 0) for held in model)
            assert all(tally.held(other) == expected for tally in tallies)


def test_an_id_straddling_two_slots_is_not_counted() -> None:
    table = StreamTable(1, slots=4)
    tally = table.tally(0, 10)
    assert tally.open("aaaaaaaa11223344")  # slot 0: its id, then its count (1)
    assert tally.open("ffffffffffffffff")  # slot 1
    # the end of slot 0's id and the start of its count, read across the field boundary
    assert bytes(table.memory[4:12]).hex() == "1122334401000000"
    assert tally.held("1122334401000000") == 0


def test_a_token_counted_again_after_its_slot_was_freed_is_counted_once() -> None:
    tally = StreamTable(1, slots=4).tally(0, 10)
    first, second = TOKENS[:2]
    assert tally.open(first) and tally.open(second)  # slots 0 and 1
    tally.close(first)
    tally.close(second)
    assert tally.open(first)  # in another slot than before: nothing of it left in slot 0
    assert tally.held(first) == 1


def _record(
    message: str, level: int = logging.WARNING, name: str = "memsync.hub"
) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, (3,), None)


def test_the_same_warning_passes_once_per_interval_and_counts_the_rest() -> None:
    now = [100.0]
    quiet = RepeatFilter(60, clock=lambda: now[0])
    assert quiet.filter(_record("closed %d connections"))
    assert [quiet.filter(_record("closed %d connections")) for _ in range(1000)] == [False] * 1000
    assert quiet.filter(_record("another warning %d"))  # another kind has its own line
    assert quiet.filter(_record("closed %d connections", logging.INFO))  # below WARNING: all
    now[0] += 60
    again = _record("closed %d connections")
    assert quiet.filter(again)
    assert "1000 more like this in the last 60 s" in again.getMessage()
    assert again.getMessage().startswith("closed 3 connections")


def test_varying_messages_still_fall_under_one_kind_per_logger() -> None:
    quiet = RepeatFilter(60, clock=lambda: 0.0)
    passed = sum(quiet.filter(_record(f"peer {n} did something")) for n in range(100_000))
    assert passed <= 600  # the kinds remembered, then one for the logger and level


def test_the_default_cap_leaves_room_below_the_descriptor_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        for limit in (512, 1024, 65536):
            if hard != resource.RLIM_INFINITY and limit > hard:
                continue
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
            cap = default_max_connections()
            assert cap + 2 * BACKLOG + max(64, limit // 8) == limit
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
