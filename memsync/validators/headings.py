"""The heading grammar: `#{1,4} Title {KIND id}` with an optional `→ [edges]`, or a plain
heading.

`ANCHOR` reads the usual addressable heading in one match (the lazy title finds the first
anchor that fits); `unanchored` reads what it does not match: a plain heading, or an anchor
that is malformed (a known kind with a bad id or a bad edge list, an unknown kind), with the
problem it makes. The rules that need the headings above (depth, terminal placement,
headings under F#) are the scanner's (`document.py`).
"""

from __future__ import annotations

import re

from memsync.lazypattern import lazy
from memsync.validators.edgelists import ID, ID_RE

ANCHOR_KINDS = frozenset({"#", "F#", "M#", "S#", "MF#", "MQ#"})
TERMINAL_KINDS = frozenset({"F#", "M#", "S#", "MF#", "MQ#"})

_KIND = r"MF#|MQ#|F#|M#|S#|#"
HEADING = lazy(r"(#+)(?:[ \t]|$)")
# The anchor, then nothing or an edge list: the lazy title finds the first anchor that fits.
ANCHOR = lazy(rf"#+[ \t]+(.*?)\{{({_KIND})({ID})\}}[ \t]*(?:(?:→|->)[ \t]*\[(.*)\])?[ \t]*$")
_KNOWN_MARKER = lazy(rf"\{{({_KIND})([^}}]*)\}}")
_ANY_MARKER = lazy(r"\{([A-Za-z]+#)([^}]*)\}")
# A Pursuit's `## Focus` section: its bullets are references, not nodes.
FOCUS_HEADING = lazy(r"#{1,2}[ \t]+focus[ \t]*$", re.IGNORECASE)


def unanchored(line: str) -> tuple[str, str | None, str | None, tuple[str, str] | None]:
    """Title, kind and id of a heading `ANCHOR` does not match (no anchor, or a bad one),
    and the problem it makes as `(code, value)`, if any. Its edge list is never read."""
    title = line.lstrip("#").strip()
    known = _KNOWN_MARKER.search(line)
    if known is not None:
        if ID_RE.fullmatch(known[2]):
            title = line[: known.start()].lstrip("#").strip()
            return title, known[1], known[2], ("malformed-edge-list", known[2])
        return title, None, None, ("invalid-id", known[2])
    unknown = _ANY_MARKER.search(line)
    if unknown is not None:
        return title, None, None, ("unsupported-marker", unknown[1])
    return title, None, None, None
