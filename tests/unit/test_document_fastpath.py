"""The scanner's fast path for common node lines (runs of them found by `nodelines.FAST_RUN`
over the whole text, read by `_Scanner.fast_nodes`) yields exactly what the general path
(`BULLET` then `_Scanner.node`) yields for the same document: every block (with its edges
and spans) and every problem; and the summary pass, which takes those runs as `NodeRun`
blocks, summarizes exactly what the general path's blocks say. The general path is the
reference: the fast one is switched off by a pattern that matches nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager

from hypothesis import example, given
from hypothesis import strategies as st

from memsync.validators import nodelines
from memsync.validators.blocks import Heading, Node, NodeRun, Prose
from memsync.validators.document import Document, scan, scan_blocks
from memsync.validators.summary import summarize, summarize_bytes
from tests.unit.test_validator_equivalence import lines as soup_lines

NEVER = re.compile(r"(?!)")


@contextmanager
def general_path_only() -> Iterator[None]:
    saved = nodelines.FAST_RUN
    nodelines.FAST_RUN = NEVER
    try:
        yield
    finally:
        nodelines.FAST_RUN = saved


@st.composite
def node_lines(draw: st.DrawFn) -> str:
    """Node lines; half of them common ones (the fast path's), with tricky text before the
    edge list (backquotes, brackets, arrows, other lists)."""
    common = draw(st.booleans())

    def part(usual: tuple[str, ...], *odd: str) -> str:
        return draw(st.sampled_from(usual if common else usual + odd))

    indent = part(("", "  ", "\t", " \t"))
    gap = part((" ", "\t", "  "), "")
    item = part(("a", "b-1", "x.y_z"), "bad id", "", "a`b")
    after = part((" ", "\t"), "", "x ")
    filler = draw(
        st.sampled_from(
            [
                "",
                "text ",
                "text",
                "a → b ",
                "see [dep:q] ",
                "x -> [dep:z] ",
                "`c` ",
                "[x] `y` ",
                "\t→ [] ",
            ]
        )
    )
    arrow = part(("→", "->"), "-->", "→→", "")
    inner = part(
        (
            *("", " ", "dep:b", "dep:b, rel:c", " dep: b , ext:c ", "dep:b-1", "up:x.y_z, dep:a"),
            # edges the summary's bulk read leaves to the item-by-item pass: a third edge,
            # an edge twice, an edge to itself (for item `a`), an unknown type
            *("dep:b, ext:c, up:x.y_z", "dep:b , dep: b", "rel:a", "bogus:b", "ext:b, rel:b"),
        ),
        "dep:b,",
        "dep=b",
        "dep:b]",
        "[dep:b",
    )
    end = part(("]", "] ", "]\t"), "", "] tail", "]]")
    space = part((" ", "", "\t"))
    return f"{indent}-{gap}`{item}`{after}{filler}{arrow}{space}[{inner}{end}"


@st.composite
def texts(draw: st.DrawFn) -> str:
    body = draw(
        st.lists(
            st.one_of(node_lines(), soup_lines(), st.sampled_from(["", " ", "\r"])), max_size=20
        )
    )
    end = draw(st.sampled_from(["", "\n", "\r\n", "\n\n", "\r"]))
    return draw(st.sampled_from(["\n", "\r\n", "\n\n"])).join(body) + end


def blocks_and_problems(doc: Document) -> tuple[object, ...]:
    return doc.blocks, doc.problems, doc.lines, doc.body


# Runs the fast path must pass over (in a fence, a Focus section, a `**Next:**` field), then
# one it takes.
PASSED_OVER = (
    "```\n- `a` x → []\n```\n- `b` y → [dep:a]",
    "## Focus\n- `a` x → []\n## Other\n- `b` y → [dep:a]",
    "**Next:**\n- `a` x → []\n# H\n\n- `b` → []",
)


@example(PASSED_OVER[0], False)
@example(PASSED_OVER[1], True)
@example(PASSED_OVER[2], True)
@given(texts(), st.booleans())
def test_the_fast_path_scans_like_the_general_one(text: str, pursuit: bool) -> None:
    fast = scan(text, "MEMORY_x.md", pursuit=pursuit)
    with general_path_only():
        general = scan(text, "MEMORY_x.md", pursuit=pursuit)
    assert blocks_and_problems(fast) == blocks_and_problems(general)


@example(PASSED_OVER[0], False)
@example(PASSED_OVER[1], True)
@example(PASSED_OVER[2], True)
@given(texts(), st.booleans())
def test_the_summary_of_node_runs_is_the_summary_of_the_general_blocks(
    text: str, pursuit: bool
) -> None:
    fast = summarize_bytes(text.encode(), "MEMORY_x.md", pursuit=pursuit)
    with general_path_only():
        general = summarize(scan(text, "MEMORY_x.md", pursuit=pursuit))
    assert fast == general


def test_a_run_of_common_lines_is_one_node_run_for_the_summary() -> None:
    text = "# T {#t}\n- `a` fact → [dep:t, ext:b]\n\n- `b` → []\nprose\n- `c` → [up:a]\n"
    blocks, problems = scan_blocks(text, "MEMORY.md")
    assert problems == []
    assert blocks[1:3] == [
        NodeRun([2, 4], ("a", "b"), ("dep:t, ext:b", ""), 0),
        Prose(5, 5, 0),
    ]
    assert blocks[3] == NodeRun([6], ("c",), ("up:a",), 0)


def test_the_fast_path_is_taken_for_common_lines() -> None:
    text = "# T {#t}\n- `a` fact → [dep:t, ext:b]\n- `b` → []\n"
    doc = scan(text, "MEMORY.md")
    assert [type(block) for block in doc.blocks] == [Heading, Node, Node]
    assert doc.blocks[1] == Node(2, "a", (("dep", "t"), ("ext", "b")), (), (14, 26), 0)
    assert nodelines.FAST_RUN.match("- `a` fact → [dep:t, ext:b]") is not None
    assert any(isinstance(block, NodeRun) for block in scan_blocks(text, "MEMORY.md")[0])
    with general_path_only():  # the switch reaches the scanner: the reference takes no run
        assert not any(isinstance(b, NodeRun) for b in scan_blocks(text, "MEMORY.md")[0])
