"""The hub's log under a flood: the same warning or error is written at most once per
interval, and the next line of that kind says how many were left out.

A hostile client can make any warning repeat as fast as it opens connections (a refused
connection, a request head that never arrives, the descriptor limit asyncio hits when it
accepts). `RepeatFilter` sits on the handlers of the root logger, so it bounds every such
line whatever logged it: ours, aiohttp's or asyncio's. A kind is the logger, the level,
the message template and the exception's type; lines below WARNING pass untouched.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

LOG_INTERVAL = 60.0  # seconds between two lines of one kind
MAX_KINDS = 512  # kinds remembered; past that, one kind per logger and level

Kind = tuple[str, int, str, str]


class RepeatFilter(logging.Filter):
    """Let one record of a kind through per `interval` seconds (see above)."""

    def __init__(
        self, interval: float = LOG_INTERVAL, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.interval = interval
        self._clock = clock
        self._last: dict[Kind, float] = {}
        self._left_out: dict[Kind, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        kind = _kind(record)
        if kind not in self._last and len(self._last) >= MAX_KINDS:
            kind = (record.name, record.levelno, "", "")  # message templates that vary
        now = self._clock()
        if now - self._last.get(kind, -self.interval) < self.interval:
            self._left_out[kind] = self._left_out.get(kind, 0) + 1
            return False
        self._last[kind] = now
        left_out = self._left_out.pop(kind, 0)
        if left_out:
            record.msg = f"{record.msg} [{left_out} more like this in the last {self.interval:g} s]"
        return True


def _kind(record: logging.LogRecord) -> Kind:
    error = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
    return record.name, record.levelno, str(record.msg)[:200], error


def quiet_repeats(interval: float = LOG_INTERVAL) -> None:
    """Put a `RepeatFilter` first on every handler of the root and `memsync` loggers (once:
    first, so that it sees the message template before any filter formats it)."""
    handlers = {*logging.getLogger().handlers, *logging.getLogger("memsync").handlers}
    for handler in handlers:
        if not any(isinstance(f, RepeatFilter) for f in handler.filters):
            handler.filters.insert(0, RepeatFilter(interval))
