"""The wording of the problems one file alone decides (`document.py`'s scanner), by code:
format strings filled with the line's values (ids, lines of the headings involved)."""

from __future__ import annotations

from typing import Final

_ID_HINT = "use only letters, digits, '.', '_' and '-'"
_F_MOVE = (
    "an F# heading keeps only its body here; "
    "move this {0} into the backing file of the F# heading at line {1}"
)
MESSAGES: Final = {
    "heading-under-f": _F_MOVE,
    "node-under-f": _F_MOVE,
    "heading-under-terminal": "the `####` terminal reference at line {0} cannot contain headings",
    "node-under-terminal": "the `####` terminal reference at line {0} cannot contain nodes",
    "heading-too-deep": "headings deeper than `####` are not allowed",
    "terminal-kind": "a `####` heading must be a terminal reference: "
    "{{F#id}}, {{M#id}}, {{S#id}}, {{MF#id}} or {{MQ#id}}",
    "terminal-parent": "a `####` terminal reference must sit directly under a `###` heading",
    "malformed-edge-list": "after the anchor of heading `{0}` only an edge list such as "
    "`→ [dep:other-id]` may follow",
    "invalid-id": f"heading id `{{0}}` is not valid: {_ID_HINT}",
    "unsupported-marker": "heading marker `{0}` is not one of #, F#, M#, S#, MF#, MQ#",
    "invalid-node-id": f"node id `{{0}}` is not valid: {_ID_HINT}",
    "node-missing-edges": "node `{0}` needs an edge list at the end of its line, such as `→ []`",
    "invalid-focus-id": f"Focus reference `{{0}}` is not a valid id: {_ID_HINT}",
}
