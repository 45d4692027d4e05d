"""The node-line grammar: a bullet ``- `id` text → [edges]``, and the runs of common node
lines the scanner reads in one pass.

The general path: `BULLET` takes the id, `edge_list` the node's edge list (the last arrow
whose `[...]` closes the line). The common node line, a valid id then a clean (or empty)
edge list closing the line, takes the fast path: a clean list holds no arrow or bracket,
so its arrow is the line's last one: the same edge list `edge_list` finds, with no problem
to report. `FAST_RUN` finds, in one pass over the whole text, each run of such lines with
only empty lines between (no part of it matches a `\\n`; the arrow is found by the literal
with a look-behind for the blank before it, as `.*[ \\t](?:→|->)` would, without its
backtracking). In a line `FAST_RUN` took, the first backquoted text is the id and the last
`[...]` the edge list: `FAST_NODE` reads a run's nodes in one `findall` (id, edge list, the
empty lines after). `Runs` hands the scanner each run at its first line.
"""

from __future__ import annotations

import re

from memsync.lazypattern import lazy
from memsync.validators.edgelists import CLEAN_P, ID_P

BULLET = lazy(r"[ \t]*-[ \t]+`([^`]+)`(?=[ \t]|$)")
# Greedy prefix: the last arrow whose bracketed list closes the line is the edge list.
_NODE_EDGES = lazy(r".*[ \t](?:→|->)[ \t]*\[(.*)\][ \t]*$")
_AFTER_ARROW = lazy(r"[ \t]*\[(.*)\][ \t]*$")
FAST_RUN = lazy(
    rf"^(?:[ \t]*+-[ \t]++`{ID_P}`(?=[ \t])(?:.*→(?<=[ \t]→)|.*->(?<=[ \t]->))"
    rf"[ \t]*+\[{CLEAN_P}\][ \t]*+$\n*+)++",
    re.MULTILINE,
)
FAST_NODE = lazy(r"^[^`]*`([^`]*)`.*\[(.*)\][ \t]*$(\n*)", re.MULTILINE)


def edge_list(line: str, start: int) -> re.Match[str] | None:
    """The node's edge list: the last arrow after `start` whose `[...]` ends the line."""
    arrow = max(line.rfind("→", start), line.rfind("->", start))
    if arrow > start and line[arrow - 1] in " \t":
        listed = _AFTER_ARROW.match(line, arrow + (1 if line[arrow] == "→" else 2))
        if listed is not None:
            return listed
    return _NODE_EDGES.match(line, start)


class Runs:
    """The runs of common node lines of one text, in order, with their first lines."""

    __slots__ = ("at", "body", "coming", "found")

    def __init__(self, text: str) -> None:
        self.body = text.replace("\r\n", "\n") if "\r" in text else text  # same line numbers
        self.found = FAST_RUN.finditer(self.body)
        self.coming = next(self.found, None)
        self.at = self.body.count("\n", 0, self.coming.start()) + 1 if self.coming else 0

    def starting(self, number: int) -> re.Match[str] | None:
        """The run whose first line is `number`, if any. Runs before it are passed over: in a
        fence, a Focus section or a Pursuit field, a run's lines are all there or all not."""
        while self.coming is not None and self.at <= number:
            run, first = self.coming, self.at
            self.coming = next(self.found, None)
            if self.coming is not None:
                self.at += self.body.count("\n", run.start(), self.coming.start())
            if first == number:
                return run
        return None
