"""How many event streams each token holds, across every worker of one hub, so that one
token cannot hold more than `hub.max_streams_per_token` of them.

`StreamTable` is shared memory made before the workers are forked (one worker: made by the
application itself): one region per worker, written by that worker only, so no lock is
needed. A slot is a token id (its 16 hex digits as 8 bytes) and how many streams this
worker holds for it; a region has one slot per connection the worker may hold, so it never
fills. A worker counts a token's streams by finding its id in every region (a memory
search, no system call). Two workers opening the last allowed stream of one token at the
same instant may both succeed: the cap can be passed by at most one stream per worker.
"""

from __future__ import annotations

import mmap
import struct

_SLOT = struct.Struct("=8sQ")  # token id, streams held for it in this worker


class StreamTable:
    """Every worker's region (see above)."""

    def __init__(self, workers: int, slots: int) -> None:
        self.workers = workers
        self.slots = max(1, slots)
        self.region = self.slots * _SLOT.size
        self.memory = mmap.mmap(-1, workers * self.region)  # MAP_SHARED: the forks share it

    def tally(self, index: int, cap: int) -> StreamTally:
        """Worker `index`'s side of the table, refusing streams beyond `cap` per token."""
        return StreamTally(self, index, cap)


class StreamTally:
    """One worker's count of its streams; `open` refuses a token's stream past the cap."""

    def __init__(self, table: StreamTable, index: int, cap: int) -> None:
        self.table = table
        self.cap = cap
        self._base = index * table.region
        self._slots: dict[bytes, int] = {}  # token id -> slot offset in this region
        self._free = [self._base + n * _SLOT.size for n in reversed(range(table.slots))]

    def held(self, token_id: str) -> int:
        """Streams the token holds in every worker."""
        key, memory, size = bytes.fromhex(token_id), self.table.memory, _SLOT.size
        total = 0
        for start in range(0, self.table.workers * self.table.region, self.table.region):
            at = memory.find(key, start, start + self.table.region)
            while at >= 0 and (at - start) % size:  # the bytes straddle two fields
                at = memory.find(key, at + 1, start + self.table.region)
            if at >= 0:
                total += _SLOT.unpack_from(memory, at)[1]
        return total

    def open(self, token_id: str) -> bool:
        """Count one more stream of the token here; False (nothing counted) at the cap."""
        if self.held(token_id) >= self.cap:
            return False
        key = bytes.fromhex(token_id)
        at = self._slots.get(key)
        if at is None:
            if not self._free:  # as many streams as connections: cannot happen
                return False
            at = self._free.pop()
            self._slots[key] = at
            _SLOT.pack_into(self.table.memory, at, key, 0)
        _SLOT.pack_into(self.table.memory, at, key, _SLOT.unpack_from(self.table.memory, at)[1] + 1)
        return True

    def close(self, token_id: str) -> None:
        """One stream of the token ended here."""
        key = bytes.fromhex(token_id)
        at = self._slots[key]
        count = _SLOT.unpack_from(self.table.memory, at)[1] - 1
        if count:
            _SLOT.pack_into(self.table.memory, at, key, count)
        else:  # the slot is free again: no id left behind for `held` to find
            _SLOT.pack_into(self.table.memory, at, bytes(8), 0)
            del self._slots[key]
            self._free.append(at)
