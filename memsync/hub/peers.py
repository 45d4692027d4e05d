"""The worker processes of one hub, as each of them sees the others.

`hub serve --workers N` forks N workers that share one data dir, which stays the only
truth: revisions are files, tokens are rows in `hub.db`. What the workers share besides is
made by the supervisor before it forks (`Board.create`) and inherited:

- a page of shared memory holding one counter per worker. A worker bumps its own counter
  after it stored a revision (each counter has one writer, so no lock is needed). Every
  read of a worker compares the page with what it saw last (a memory compare, no system
  call) and, when it moved, rescans the views on disk before answering: a client that
  published through one worker reads its revision through any other at once;
- the count of every worker's event streams per token (`streams.StreamTable`), which
  caps a token's streams across the workers;
- one datagram socket pair per worker, its inbox. A worker that published a revision or
  accepted a notify writes one datagram to every other worker's inbox; a worker reading
  its inbox rescans the views (revision) or passes the event on (upstream) to the event
  streams it holds. Nothing polls at rest.

A datagram is `kind \\n name \\n JSON`; it comes only from a sibling worker (the sockets
are unnamed and inherited), so it is trusted like memory.
"""

from __future__ import annotations

import asyncio
import logging
import mmap
import socket
import struct
from collections.abc import Callable

from memsync.hub.streams import StreamTable

log = logging.getLogger("memsync.hub")

_SLOT = struct.Struct("=Q")
INBOX_BYTES = 1 << 20  # room for thousands of small datagrams should a worker lag
MAX_DATAGRAM = 8192

Listener = Callable[[str, str, bytes], None]  # (kind, name, JSON data)


class Board:
    """What the supervisor makes before forking: the shared page and every inbox."""

    def __init__(self, count: int, connections: int = 1024) -> None:
        self.count = count
        self.page = mmap.mmap(-1, max(mmap.PAGESIZE, count * _SLOT.size))  # MAP_SHARED
        self.streams = StreamTable(count, connections)  # a slot per connection of a worker
        self.pairs = [socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM) for _ in range(count)]
        for inbox, outbox in self.pairs:
            inbox.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, INBOX_BYTES)
            outbox.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, INBOX_BYTES)
            outbox.setblocking(False)

    def member(self, index: int) -> Peers:
        """Worker `index`'s side (call it in that worker, after the fork): its own inbox and
        every outbox; the other inboxes are closed in this process."""
        for other, (inbox, _outbox) in enumerate(self.pairs):
            if other != index:
                inbox.close()
        outboxes = [outbox for other, (_inbox, outbox) in enumerate(self.pairs) if other != index]
        return Peers(index, self.count, self.page, self.pairs[index][0], outboxes, self.streams)

    def close(self) -> None:
        """The supervisor's copies, once every worker is forked."""
        for inbox, outbox in self.pairs:
            inbox.close()
            outbox.close()


class Peers:
    """This worker's view of its siblings: the shared counters and the inboxes."""

    def __init__(
        self,
        index: int,
        count: int,
        page: mmap.mmap,
        inbox: socket.socket,
        outboxes: list[socket.socket],
        streams: StreamTable | None = None,
    ) -> None:
        self.index = index
        self.streams = streams or StreamTable(count, 1024)
        self._page = page
        self._size = count * _SLOT.size
        self._inbox = inbox
        self._outboxes = outboxes
        self._seen = page[: self._size]

    # -- the shared counters ----------------------------------------------------------------

    def moved(self) -> bool:
        """Whether any worker stored a revision since `seen` was last called."""
        return self._page[: self._size] != self._seen

    def seen(self) -> None:
        """Note the counters as they are now (call it before rescanning the disk)."""
        self._seen = self._page[: self._size]

    def bump(self) -> None:
        """Count one stored revision of this worker (after its rename: the disk is ahead)."""
        offset = self.index * _SLOT.size
        (value,) = _SLOT.unpack_from(self._page, offset)
        _SLOT.pack_into(self._page, offset, value + 1)

    # -- the inboxes --------------------------------------------------------------------------

    def tell(self, kind: str, name: str, data: bytes) -> None:
        """Send an event to every other worker (never blocks: a full inbox is logged)."""
        datagram = b"%s\n%s\n%s" % (kind.encode(), name.encode(), data)
        for outbox in self._outboxes:
            try:
                outbox.send(datagram)
            except OSError as exc:  # a worker that stopped reading; its reads still catch up
                log.warning("could not tell another hub worker of a %s event: %s", kind, exc)

    def listen(self, loop: asyncio.AbstractEventLoop, listener: Listener) -> None:
        """Call `listener(kind, name, data)` on the loop for every datagram that arrives."""
        self._inbox.setblocking(False)

        def drain() -> None:
            while True:
                try:
                    datagram = self._inbox.recv(MAX_DATAGRAM)
                except BlockingIOError:
                    return
                kind, _, rest = datagram.partition(b"\n")
                name, _, data = rest.partition(b"\n")
                listener(kind.decode(), name.decode(), data)

        loop.add_reader(self._inbox.fileno(), drain)

    def close(self, loop: asyncio.AbstractEventLoop) -> None:
        loop.remove_reader(self._inbox.fileno())
        self._inbox.close()
        for outbox in self._outboxes:
            outbox.close()
