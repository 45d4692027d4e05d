"""The cyclic garbage collector paused while a validation allocates.

Building a graph or joining the cross-file pass allocates many small acyclic objects; the
collector would scan the growing heap again and again and find nothing. The graph
validator, the graph's builder, a cycle's admission (`roots.incoming`) and the records a
fresh process reads (`listingstore`, `shapestore`: some on a thread of their own, beside
the admission) pause it here (a module of its own: a sync that parses nothing loads no
builder, issue 18).

The collector's switch is the process's: pauses that overlap, on one thread or several,
are one pause, which ends when the last of them does (a pause ending on one thread never
turns the collector back on under another's); each pause that begins turns it off, and a
collector turned on meanwhile is on again once the last pause ends.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_LOCK = threading.Lock()
_held = 0  # pauses under way
_resume = False  # whether the collector was on when the first of them began


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building.

    A 100k-item graph allocates some 500k small acyclic objects; the collector would scan
    the growing heap again and again (a quarter of the time at that size) and find nothing.
    """
    global _held, _resume  # noqa: PLW0603 - the process's one switch
    with _LOCK:
        # On when the first pause began, or turned on since (by code that owns it, say a
        # command's start-up once it has loaded): on again once the last pause ends.
        _resume = gc.isenabled() or (_held > 0 and _resume)
        gc.disable()
        _held += 1
    try:
        yield
    finally:
        with _LOCK:
            _held -= 1
            if _held == 0 and _resume:
                gc.enable()
