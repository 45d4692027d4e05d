"""The scanner's fast path for common node lines (`document._FAST_NODE`, handled inline in
`_Scanner.run`) yields exactly what the general path (`_BULLET` then `_Scanner.node`) yields
for the same document: every block (with its edges and spans) and every problem. The general
path is the reference: the fast one is switched off by a pattern that matches nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import given
from hypothesis import strategies as st

from memsync.validators import document
from memsync.validators.document import Document, Node, scan
from tests.unit.test_validator_equivalence import lines as soup_lines

NEVER = re.compile(r"(?!)")


@contextmanager
def general_path_only() -> Iterator[None]:
    saved = document._FAST_NODE
    document._FAST_NODE = NEVER
    try:
        yield
    finally:
        document._FAST_NODE = saved


@st.composite
def node_lines(draw: st.DrawFn) -> str:
    def part(*options: str) -> str:
        return draw(st.sampled_from(options))

    indent = part("", "  ", "\t", " \t")
    gap = part(" ", "\t", "  ", "")
    item = part("a", "b-1", "x.y_z", "bad id", "", "a`b")
    after = part(" ", "\t", "", "x ")
    filler = part("", "text ", "a → b ", "see [dep:q] ", "x -> [dep:z] ")
    arrow = part("→", "->", "-->", "→→", "")
    inner = part(
        "", " ", "dep:b", "dep:b, rel:c", " dep: b , ext:c ", "dep:b,", "dep=b", "dep:b]", "[dep:b"
    )
    end = part("]", "] ", "]\t", "", "] tail", "]]")
    space = part(" ", "", "\t")
    return f"{indent}-{gap}`{item}`{after}{filler}{arrow}{space}[{inner}{end}"


@st.composite
def texts(draw: st.DrawFn) -> str:
    body = draw(st.lists(st.one_of(node_lines(), soup_lines()), max_size=20))
    return "\n".join(body)


def blocks_and_problems(doc: Document) -> tuple[object, ...]:
    return doc.blocks, doc.problems, doc.lines, doc.body


@given(texts(), st.booleans())
def test_the_fast_path_scans_like_the_general_one(text: str, pursuit: bool) -> None:
    fast = scan(text, "MEMORY_x.md", pursuit=pursuit)
    with general_path_only():
        general = scan(text, "MEMORY_x.md", pursuit=pursuit)
    assert blocks_and_problems(fast) == blocks_and_problems(general)


def test_the_fast_path_is_taken_for_common_lines() -> None:
    text = "# T {#t}\n- `a` fact → [dep:t, ext:b]\n- `b` → []\n"
    doc = scan(text, "MEMORY.md")
    assert [type(block) for block in doc.blocks] == [document.Heading, Node, Node]
    assert doc.blocks[1] == Node(2, "a", (("dep", "t"), ("ext", "b")), (), (14, 26), 0)
    assert document._FAST_NODE.match("- `a` fact → [dep:t, ext:b]") is not None
