"""The hub event-stream parser: SSE framing, garbage tolerance, any chunking."""

from __future__ import annotations

import itertools
import json

from hypothesis import given
from hypothesis import strategies as st

from memsync.daemon.events import Event, EventParser


def parse(chunks: list[bytes]) -> list[Event]:
    parser = EventParser()
    return [event for chunk in chunks for event in parser.feed(chunk)]


STREAM = (
    b": heartbeat\n\n"
    b'id: 7\nevent: upstream\ndata: {"root": "team", "commit": "abc"}\n\n'
    b'event: revision\r\ndata: {"view_id": "auth",\r\ndata:  "revision": 3}\r\n\r\n'
    b"event: upstream\ndata: not json\n\n"
    b"event: upstream\ndata: [1, 2]\n\n"
    b"\xff\xfe garbage line\n\n"
    b"id: 9\n\n"
)


def test_events_are_read_and_garbage_is_dropped() -> None:
    parser = EventParser()
    events = list(parser.feed(STREAM))
    assert events == [
        Event("upstream", {"root": "team", "commit": "abc"}, "7"),
        Event("revision", {"view_id": "auth", "revision": 3}, None),
    ]
    assert parser.last_id == "9"  # reconnects resume after the last id seen


@given(st.lists(st.integers(0, len(STREAM)), max_size=12))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    points = sorted({0, len(STREAM), *cuts})
    chunks = [STREAM[a:b] for a, b in itertools.pairwise(points)]
    assert parse(chunks) == parse([STREAM])


@given(st.binary(max_size=300))
def test_arbitrary_bytes_never_raise_and_yield_only_objects(junk: bytes) -> None:
    for event in parse([junk, b"\n\n"]):
        assert isinstance(event.data, dict)


@given(st.dictionaries(st.text(max_size=5), st.integers(), max_size=3))
def test_a_well_formed_event_round_trips(data: dict[str, int]) -> None:
    frame = f"event: upstream\ndata: {json.dumps(data)}\n\n".encode()
    assert parse([frame]) == [Event("upstream", data, None)]


def test_an_endless_line_is_dropped_not_buffered_forever() -> None:
    parser = EventParser()
    assert list(parser.feed(b"data: " + b"x" * 200_000)) == []
    assert len(parser._buffer) < 100_000
    assert list(parser.feed(b"\nevent: upstream\ndata: {}\n\n")) == [Event("upstream", {}, None)]
