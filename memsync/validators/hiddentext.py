"""Hidden text: code points a person reading a memory file does not see but a model reads.

`hidden-text` (a pure rule over a file's bytes, already known to be UTF-8) refuses:

- Unicode tag characters U+E0000..U+E007F: invisible copies of ASCII that smuggle a whole
  instruction past a reviewer ("ASCII smuggling");
- bidirectional controls U+202A..U+202E and U+2066..U+2069: text shown in another order than
  it is read ("Trojan Source");
- U+200B ZERO WIDTH SPACE, U+2060 WORD JOINER and U+FEFF ZERO WIDTH NO-BREAK SPACE, which
  carry no meaning in text; U+FEFF is allowed as the byte order mark at byte 0 only.

ZERO WIDTH JOINER and NON-JOINER (U+200D, U+200C) stay allowed: emoji sequences and the
Indic and Persian scripts need them. Everything else (the implicit marks U+200E/U+200F and
U+061C included) is not this rule's business.

Every forbidden code point's UTF-8 form starts with one of three lead bytes and UTF-8 is
self-synchronizing, so the rule searches the bytes themselves (no decode, ASCII-only files
cost one regex scan); `is_hidden` is the same rule stated on code points, and a property
test keeps the two equal.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from memsync.validators.problems import Problem

TAG_CHARACTERS = range(0xE0000, 0xE0080)
BIDI_CONTROLS = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
ZERO_WIDTH = frozenset([0x200B, 0x2060, 0xFEFF])
BYTE_ORDER_MARK = 0xFEFF
SHOWN_LINES = 8  # further lines holding hidden text are counted, not listed

# The UTF-8 forms of exactly the code points above (U+E0000..U+E007F is F3 A0 80..81 xx).
_HIDDEN = re.compile(
    rb"\xf3\xa0[\x80\x81][\x80-\xbf]"  # tag characters
    rb"|\xe2\x80[\x8b\xaa-\xae]"  # U+200B, U+202A..U+202E
    rb"|\xe2\x81[\xa0\xa6-\xa9]"  # U+2060, U+2066..U+2069
    rb"|\xef\xbb\xbf"  # U+FEFF
)


def is_hidden(code_point: int, *, at_start: bool = False) -> bool:
    """The rule on one code point; `at_start`: it is the file's first (byte 0)."""
    if code_point == BYTE_ORDER_MARK and at_start:
        return False
    return code_point in TAG_CHARACTERS or code_point in BIDI_CONTROLS or code_point in ZERO_WIDTH


@dataclass(frozen=True)
class Hidden:
    """One forbidden code point: its 1-based line (counted by LF) and byte offset."""

    line: int
    offset: int
    code_point: int


def find_hidden(data: bytes) -> Iterator[Hidden]:
    """Every forbidden code point in `data` (valid UTF-8), in order."""
    line, counted = 1, 0
    for match in _HIDDEN.finditer(data):
        start = match.start()
        if start == 0 and match.group() == b"\xef\xbb\xbf":
            continue  # the byte order mark
        line += data.count(b"\n", counted, start)
        counted = start
        yield Hidden(line, start, ord(match.group().decode("utf-8")))


def describe(code_point: int) -> str:
    """`U+E0041 TAG LATIN CAPITAL LETTER A`: the form every message names a code point in."""
    name = unicodedata.name(chr(code_point), "")
    return f"U+{code_point:04X} {name}" if name else f"U+{code_point:04X}"


def _kind(code_point: int) -> str:
    if code_point in TAG_CHARACTERS:
        return "a Unicode tag character (invisible text, 'ASCII smuggling')"
    if code_point in BIDI_CONTROLS:
        return "a bidirectional control (text read in another order than shown, 'Trojan Source')"
    return "a zero-width character that carries no meaning in text"


def hidden_problem(shown: str, data: bytes) -> Problem | None:
    """`hidden-text` for the file printed as `shown` (valid UTF-8 `data`), or None.

    One problem per file: it names the first hidden code point and its line, then how
    many more there are and on which lines (the first `SHOWN_LINES`).
    """
    first: Hidden | None = None
    count, lines = 0, list[int]()
    for hidden in find_hidden(data):  # bounded memory: counted, the first lines kept
        first = first or hidden
        count += 1
        if len(lines) <= SHOWN_LINES and (not lines or lines[-1] != hidden.line):
            lines.append(hidden.line)
    if first is None:
        return None
    message = (
        f"'{shown}' line {first.line} holds {describe(first.code_point)}, {_kind(first.code_point)}"
    )
    if count > 1:
        listed = ", ".join(str(n) for n in lines[:SHOWN_LINES])
        more = ", ..." if len(lines) > SHOWN_LINES else ""
        message += f"; {count} hidden code points in all, on lines {listed}{more}"
    message += (
        f"; remove {'them' if count > 1 else 'it'} (memsync refuses text a reader cannot see)"
    )
    return Problem("hidden-text", shown, first.line, message)
