"""The values of a RightMemory graph: items, backing references, Focus entries.

`assembly.build_graph` produces a `MemoryGraph`; the validators, the editor and the
maintenance cycles read it (a graph's profile is `profile.py`'s). Everything here is
frozen. Items are NamedTuples because a large root holds 100k of them and tuples are
several times faster to build.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

from memsync.values import value

TYPE_CHECKING = False
if TYPE_CHECKING:
    from memsync.validators.document import Document
    from memsync.validators.edgelists import Edge


class Item(NamedTuple):
    """One addressable heading or node.

    `parent` is the nearest addressable heading above it in the same file; `logical_parent`
    also crosses into the F# heading that owns a detail file. `content_hash` is the SHA-256
    of the item's logical block: its own lines, every line nested under it and, for F#
    headings, the content of the backing file (recursively).
    """

    id: str
    kind: str  # "heading" or "node"
    anchor: str | None  # the heading's anchor kind: "#", "F#", "M#", "S#", "MF#", "MQ#"
    file: str
    line: int
    end_line: int
    parent: str | None
    logical_parent: str | None
    edges: tuple[Edge, ...]
    content_hash: str
    tree: str  # "memory" or "pursuit"


@value
class BackingRef:
    """The file behind an F#, M# or S# heading; `exists` means present and regular."""

    id: str
    kind: str
    path: str
    file: str  # where the heading is
    line: int
    exists: bool


class FocusEntry(NamedTuple):
    """One reference in a Pursuit `## Focus` section."""

    target: str
    file: str
    line: int


@value
class MemoryGraph:
    """Everything parsed from one tree under one profile.

    `files` are the graph files in load order (roots, then F# detail files depth first);
    `evidence_files` the M# and S# files that exist (checked, never parsed). `attached`
    maps an F# heading's location `(file, line)` to the detail file it owns.
    """

    profile: str
    namespace: str
    items: Mapping[str, Item]
    files: tuple[str, ...]
    evidence_files: tuple[str, ...]
    backing: Mapping[str, BackingRef]
    focus: tuple[FocusEntry, ...]
    documents: Mapping[str, Document]
    attached: Mapping[tuple[str, int], str]

    def ancestors(self, item_id: str) -> list[str]:
        """The logical ancestor headings of an item, nearest first."""
        out: list[str] = []
        current = self.items[item_id].logical_parent
        while current is not None:
            out.append(current)
            current = self.items[current].logical_parent
        return out
