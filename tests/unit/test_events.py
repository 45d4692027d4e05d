"""The hub event-stream parser: SSE framing, garbage tolerance, any chunking, its bounds
(line, event, id) and linear work."""

from __future__ import annotations

import contextlib
import itertools
import json
import signal
import time
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.daemon.events import MAX_EVENT, MAX_ID, MAX_LINE, Event, EventParser, StreamError


def parse(chunks: list[bytes]) -> list[Event]:
    parser = EventParser()
    return [event for chunk in chunks for event in parser.feed(chunk)]


def outcome(chunks: list[bytes]) -> tuple[list[Event], str | None, str | None]:
    """The events, the last id and the bound broken (if any) for a stream cut into `chunks`."""
    parser, events = EventParser(), []
    try:
        for chunk in chunks:
            events.extend(parser.feed(chunk))
    except StreamError as exc:
        return events, parser.last_id, str(exc)
    return events, parser.last_id, None


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


def test_an_endless_line_breaks_the_stream_and_is_never_buffered() -> None:
    parser = EventParser()
    with pytest.raises(StreamError, match="line over"):
        for _ in range(8):
            list(parser.feed(b"data: " + b"x" * 20_000))
            assert len(parser._buffer) <= MAX_LINE + 20_000


def test_an_event_that_never_ends_breaks_the_stream_at_the_bound() -> None:
    parser, fed = EventParser(), 0
    line = b"data: " + b"x" * 1000 + b"\n"
    with pytest.raises(StreamError, match="event over"):
        while fed < 10 * MAX_EVENT:
            list(parser.feed(line * 16))
            fed += 16 * len(line)
    assert fed <= MAX_EVENT + 16 * len(line)
    assert sum(map(len, parser._data)) <= MAX_EVENT


def test_unknown_fields_and_retry_lines_count_per_event_not_per_stream() -> None:
    frame = b"retry: 1000\n\n" + b"x-unknown: " + b"y" * 1000 + b"\n\n"
    parser = EventParser()
    for _ in range(4 * MAX_EVENT // len(frame)):
        assert list(parser.feed(frame)) == []
    assert list(parser.feed(b"event: upstream\ndata: {}\n\n")) == [Event("upstream", {}, None)]


# Ids go back to the hub as `Last-Event-ID`: printable ASCII within MAX_ID, or dropped.
ID_TEXT = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.characters(codec="ascii"), max_size=40),
    st.sampled_from(["a\rb", "x\x00", "\x7f", "é", "\u2028", "ok\x1b[2J", "z" * (MAX_ID + 1)]),
)


@given(ID_TEXT.filter(lambda v: "\n" not in v and not v.endswith("\r")))
def test_an_id_is_printable_ascii_within_the_bound_or_dropped(value: str) -> None:
    parser = EventParser()
    frame = b"id: 7\n\nid: " + value.encode() + b"\ndata: {}\n\n"
    events = list(parser.feed(frame))
    sane = len(value) <= MAX_ID and all(" " <= ch <= "~" for ch in value)
    expected = value if sane else "7"
    assert parser.last_id == expected
    assert events == [Event("message", {}, value if sane else None)]


@given(
    st.lists(
        st.sampled_from(
            [
                b"\n",
                b"\r\n",
                b": hb\n",
                b"data: {}\n",
                b"id: 3\n",
                b"id: \x01\n",
                b"event: upstream\n",
                b"retry: 5\n",
                b"data: " + b"x" * (MAX_LINE + 1) + b"\n",
                b"data: " + b"y" * 60_000 + b"\n",
            ]
        ),
        max_size=40,
    ),
    st.lists(st.integers(0, 10_000_000), max_size=8),
)
def test_bounds_hold_the_same_for_any_chunking(lines: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(lines)
    points = sorted({0, len(stream), *(c % (len(stream) + 1) for c in cuts)})
    chunks = [stream[a:b] for a, b in itertools.pairwise(points)]
    assert outcome(chunks) == outcome([stream])


@contextlib.contextmanager
def within(seconds: float) -> Iterator[None]:
    """Interrupt the block (TimeoutError) when it runs longer than `seconds`."""

    def expire(_signum: int, _frame: object) -> None:
        raise TimeoutError(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


FLOOD = (b"\n" * 30_000 + b": " + b"c" * 100 + b"\n\r\n") * 300  # about 9 MB


def test_a_flood_of_blank_lines_and_comments_is_parsed_in_linear_time() -> None:
    """The old parser re-sliced its buffer once per line: quadratic in the bytes of one
    read (minutes for this one); now one pass, in any chunking."""
    started = time.monotonic()
    with within(10):
        parser = EventParser()
        assert list(parser.feed(FLOOD)) == []
        assert list(parser.feed(b"event: upstream\ndata: {}\n\n")) == [Event("upstream", {}, None)]
        parser = EventParser()
        for at in range(0, len(FLOOD), 64 * 1024):
            assert list(parser.feed(FLOOD[at : at + 64 * 1024])) == []
    print(f"{len(FLOOD) * 2 / 2**20:.0f} MiB of blank lines and comments: ", end="")
    print(f"{time.monotonic() - started:.3f} s")
