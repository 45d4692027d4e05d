"""The hub's event streams: `revision` and `upstream` events fanned out to the Server-Sent
Event subscribers of this process, each filtered by its `root`/`view` selection and by its
token's scopes (views and roots have separate ones: see `tokens.py`).

Other worker processes of the same hub hear of events through `peers.py`; this module
knows only the streams held here.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from memsync.hub.tokens import TokenInfo

QUEUE_SIZE = 256  # events buffered per subscriber before it is dropped

Event = tuple[str, bytes]  # (SSE event name, JSON data)


@dataclass(eq=False)
class Subscriber:
    """One open event stream. A `None` in its queue means: end the stream."""

    token: TokenInfo
    roots: frozenset[str]
    views: frozenset[str]
    queue: asyncio.Queue[Event | None] = field(default_factory=lambda: asyncio.Queue(QUEUE_SIZE))

    def wants(self, kind: str, name: str) -> bool:
        if (self.roots or self.views) and name not in (
            self.views if kind == "revision" else self.roots
        ):
            return False
        return self.token.may_read(name) if kind == "revision" else self.token.may_watch(name)

    def close(self) -> None:
        while not self.queue.empty():
            self.queue.get_nowait()
        self.queue.put_nowait(None)


class EventBus:
    """The open event streams of this process (used from the event loop only)."""

    def __init__(self) -> None:
        self.subscribers: set[Subscriber] = set()

    def publish(self, kind: str, name: str, data: bytes) -> bytes:
        """Queue `data` (the event's JSON, `wire.hubanswers`) as event `kind` about view or
        root `name` for whoever may see it; return it (what the other workers are told)."""
        self.deliver(kind, name, data)
        return data

    def deliver(self, kind: str, name: str, data: bytes) -> None:
        """Queue an event already in JSON (one that another worker published)."""
        for subscriber in list(self.subscribers):
            if subscriber.wants(kind, name):
                try:
                    subscriber.queue.put_nowait((kind, data))
                except asyncio.QueueFull:  # a reader this slow reconnects and catches up
                    subscriber.close()

    def close_all(self) -> None:
        for subscriber in list(self.subscribers):
            subscriber.close()
