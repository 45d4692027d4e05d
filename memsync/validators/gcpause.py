"""The cyclic garbage collector paused while a validation allocates.

Building a graph or joining the cross-file pass allocates many small acyclic objects; the
collector would scan the growing heap again and again and find nothing. The graph
validator, the graph's builder and a cycle's admission (`roots.incoming`) pause it here (a
module of its own: a sync that parses nothing loads no builder, issue 18).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while building.

    A 100k-item graph allocates some 500k small acyclic objects; the collector would scan
    the growing heap again and again (a quarter of the time at that size) and find nothing.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
