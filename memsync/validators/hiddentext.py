"""Hidden text: code points a person reading a memory file does not see but a model reads.

`hidden-text` (a pure rule over a file's text, once its bytes decoded as UTF-8) refuses:

- Unicode tag characters U+E0000..U+E007F: invisible copies of ASCII that smuggle a whole
  instruction past a reviewer ("ASCII smuggling");
- bidirectional controls U+202A..U+202E and U+2066..U+2069: text shown in another order than
  it is read ("Trojan Source");
- U+200B ZERO WIDTH SPACE, U+2060 WORD JOINER and U+FEFF ZERO WIDTH NO-BREAK SPACE, which
  carry no meaning in text; U+FEFF is allowed as the byte order mark at byte 0 only.

ZERO WIDTH JOINER and NON-JOINER (U+200D, U+200C) stay allowed: emoji sequences and the
Indic and Persian scripts need them. Everything else (the implicit marks U+200E/U+200F and
U+061C included) is not this rule's business.

`is_hidden` states the rule code point by code point; `has_hidden` is the same rule on UTF-8
bytes (the fast check every file gets) and `find_hidden` on text (the details, read only
when a file holds some); property tests keep the three equal.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator

from memsync.lazypattern import lazy
from memsync.validators.problems import Problem

TAG_CHARACTERS = range(0xE0000, 0xE0080)
BIDI_CONTROLS = frozenset([*range(0x202A, 0x202F), *range(0x2066, 0x206A)])
ZERO_WIDTH = frozenset([0x200B, 0x2060, 0xFEFF])
BYTE_ORDER_MARK = 0xFEFF
SHOWN_LINES = 8  # further lines holding hidden text are counted, not listed

_HIDDEN_UTF8 = (
    lazy(rb"\xe2\x80[\x8b\xaa-\xae]"),  # U+200B, U+202A..U+202E
    lazy(rb"\xe2\x81[\xa0\xa6-\xa9]"),  # U+2060, U+2066..U+2069
    lazy(rb"\xf3\xa0[\x80\x81]"),  # U+E0000..U+E007F
)
_BOM_UTF8 = b"\xef\xbb\xbf"
_HIDDEN = lazy("[\U000e0000-\U000e007f\u202a-\u202e\u2066-\u2069\u200b\u2060\ufeff]")


def is_hidden(code_point: int, *, at_start: bool = False) -> bool:
    """The rule on one code point; `at_start`: it is the file's first (byte 0)."""
    if code_point == BYTE_ORDER_MARK and at_start:
        return False
    return code_point in TAG_CHARACTERS or code_point in BIDI_CONTROLS or code_point in ZERO_WIDTH


class Hidden:
    """One forbidden code point: its 1-based line (counted by LF) and index in the text.
    A plain class: only a refused file makes one, and a dataclass costs every process that
    loads the path rules a few generated functions (issue 18)."""

    __slots__ = ("code_point", "index", "line")

    def __init__(self, line: int, index: int, code_point: int) -> None:
        self.line = line
        self.index = index
        self.code_point = code_point


def has_hidden(data: bytes) -> bool:
    """Whether `data` (valid UTF-8) holds a forbidden code point: the rule on bytes, for speed.

    UTF-8 is self-synchronizing, so these byte patterns are exactly the forbidden code points'
    encodings; each starts with a literal, which `re` finds with its fast substring search
    (several times faster than a character class tried at every position).
    """
    if data.isascii():
        return False
    return any(p.search(data) for p in _HIDDEN_UTF8) or data.find(_BOM_UTF8, 1) != -1


def find_hidden(text: str) -> Iterator[Hidden]:
    """Every forbidden code point in `text`, in order."""
    if text.isascii():
        return
    line, counted = 1, 0
    for match in _HIDDEN.finditer(text):
        start = match.start()
        if start == 0 and text[0] == "\ufeff":
            continue  # the byte order mark
        line += text.count("\n", counted, start)
        counted = start
        yield Hidden(line, start, ord(text[start]))


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


def hidden_problem(shown: str, text: str) -> Problem | None:
    """`hidden-text` for the file printed as `shown` (its decoded `text`), or None.

    One problem per file: it names the first hidden code point and its line, then how
    many more there are and on which lines (the first `SHOWN_LINES`).
    """
    first: Hidden | None = None
    count, lines = 0, list[int]()
    for hidden in find_hidden(text):  # bounded memory: counted, the first lines kept
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
