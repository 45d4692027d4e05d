"""A file's summary: what the graph rules need from one file, compact (`summary.py` makes it).

The per-file pass (`summary.py`) makes it from a file's bytes, its path and whether it is
read as Pursuit; the cross-file pass (`crossfile.py`), the lineage records and the parse
cache read it. Here on its own so that a process that only reads stored summaries (a sync
whose lineage record covers its change) loads no parser (issue 18).
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from memsync.validators.runedges import Pending

# One character per item: a node, or the anchor kind of an addressable heading.
NODE = "n"
KIND_CHARS: Final = {"#": "#", "F#": "F", "M#": "M", "S#": "S", "MF#": "f", "MQ#": "q"}
CHAR_KINDS: Final = {char: kind for kind, char in KIND_CHARS.items()}

# (item index, code, message): a problem reported at the item's line if the item is kept.
ItemProblem = tuple[int, str, str]
# (code, line, message): a problem of the file whatever else the graph holds.
LocalProblem = tuple[str, int, str]


class FileSummary:
    """The graph-relevant content of one file. `decoded` is False for a file that is not
    UTF-8 (the graph skips it; the path rules report it) and then everything is empty."""

    __slots__ = (
        "decoded",
        "focus",
        "ids",
        "item_problems",
        "kinds",
        "lines",
        "orphans",
        "parents",
        "pending",
        "problems",
        "specials",
    )

    def __init__(
        self,
        *,
        decoded: bool = True,
        ids: tuple[str, ...] = (),
        lines: array[int] | None = None,
        parents: array[int] | None = None,
        kinds: str = "",
        specials: tuple[int, ...] = (),
        pending: tuple[Pending, ...] = (),
        item_problems: tuple[ItemProblem, ...] = (),
        problems: tuple[LocalProblem, ...] = (),
        orphans: tuple[tuple[int, bool], ...] = (),
        focus: tuple[tuple[str, int], ...] = (),
    ) -> None:
        self.decoded = decoded
        self.ids = ids  # item ids in document order (nodes and addressable headings)
        self.lines = lines if lines is not None else array("I")  # 1-based line per item
        self.parents = parents if parents is not None else array("i")  # heading item or -1
        self.kinds = kinds  # NODE or a KIND_CHARS value per item
        self.specials = specials  # items that are headings of a kind other than `#`
        self.pending = pending
        self.item_problems = item_problems
        self.problems = problems
        self.orphans = orphans  # (line, before the first heading): MF prose outside items
        self.focus = focus  # (target, line) of each Pursuit Focus reference

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FileSummary):
            return NotImplemented
        return all(getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None  # type: ignore[assignment]

    def weight(self) -> int:
        """An estimate of the bytes this summary holds, for the cache's bound."""
        count = len(self.ids)
        text = sum(map(len, self.ids))
        extra = len(self.pending) + len(self.item_problems) + len(self.problems)
        extra += len(self.orphans) + len(self.focus) + len(self.specials)
        return 400 + count * 70 + text + extra * 160


UNDECODABLE: Final = FileSummary(decoded=False)
