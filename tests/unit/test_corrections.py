"""corrections.md shape and capacity (rules 34-35) and the Agent Correction collections (36)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.corrections import (
    COLLECTION_PATHS,
    check_collections,
    check_corrections,
    fence_mask,
    split_lines,
)
from memsync.validators.problems import Problem
from memsync.validators.tree import MODE_FILE, MODE_SYMLINK, Entry, TreeView

WRITING, DESIGN = COLLECTION_PATHS


def entry(title: str = "Entry") -> str:
    return (
        f"## {title}\n\n### Candidate\n\ncandidate text\n\n"
        "### Proposed edit\n\nproposed\n\n### Accepted edit\n\naccepted\n\n"
    )


def corrections(text: str, *, enforce: bool = True) -> list[Problem]:
    tree = TreeView.from_bytes({"corrections.md": text.encode()})
    return check_corrections(tree, enforce_capacity=enforce)


def shape(text: str) -> list[tuple[str, int | None]]:
    return [(p.code, p.line) for p in corrections(text)]


def test_valid_corrections_are_clean() -> None:
    text = "# RightMemory Edit Feedback\n\nIntro prose.\n\n" + entry("A") + entry("B")
    assert corrections(text) == []


def test_absent_symlinked_or_binary_file_is_skipped() -> None:
    assert check_corrections(TreeView({}), enforce_capacity=True) == []
    link = TreeView({"corrections.md": Entry(MODE_SYMLINK, 5, data=b"x\n")})
    assert check_corrections(link, enforce_capacity=True) == []
    binary = TreeView.from_bytes({"corrections.md": b"## A\n### Candidate\n\xff\xfe\n"})
    assert check_corrections(binary, enforce_capacity=True) == []


def test_capacity_only_when_enforced() -> None:
    ten = "".join(entry(f"E{n}") for n in range(10))
    assert corrections(ten) == []
    eleven = ten + entry("E10")
    problems = corrections(eleven)
    assert [p.code for p in problems] == ["corrections-capacity"]
    assert problems[0].line == ten.count("\n") + 1
    assert "11 entries" in problems[0].message
    assert corrections(eleven, enforce=False) == []


def test_missing_section() -> None:
    text = "## A\n### Candidate\nc\n### Accepted edit\na\n"
    assert shape(text) == [("corrections-shape", 1)]
    assert "Proposed edit" in corrections(text)[0].message


def test_entry_without_sections_reports_each_missing_one() -> None:
    assert shape("## A\n\nprose only\n") == [("corrections-shape", 1)] * 3


def test_repeated_section() -> None:
    text = "## A\n### Candidate\nc\n### Candidate\nc2\n### Proposed edit\np\n### Accepted edit\na\n"
    assert shape(text) == [("corrections-shape", 4)]
    assert "repeats" in corrections(text)[0].message


def test_unexpected_section() -> None:
    text = "## A\n### Candidate\nc\n### Notes\nn\n### Proposed edit\np\n### Accepted edit\na\n"
    assert shape(text) == [("corrections-shape", 4)]
    assert "unexpected" in corrections(text)[0].message


def test_out_of_order_sections() -> None:
    text = "## A\n### Proposed edit\np\n### Candidate\nc\n### Accepted edit\na\n"
    assert shape(text) == [("corrections-shape", 2)]
    assert "out of order" in corrections(text)[0].message


@pytest.mark.parametrize("body", ["", "\n\n", "   \n\t\n"])
def test_empty_section(body: str) -> None:
    text = f"## A\n### Candidate\n{body}### Proposed edit\np\n### Accepted edit\na\n"
    assert shape(text) == [("corrections-shape", 2)]
    assert "empty" in corrections(text)[0].message


def test_empty_last_section_at_end_of_file() -> None:
    text = "## A\n### Candidate\nc\n### Proposed edit\np\n### Accepted edit\n\n"
    assert shape(text) == [("corrections-shape", 6)]


def test_section_before_any_entry() -> None:
    text = "### Candidate\nstray\n" + entry("A")
    assert shape(text) == [("corrections-shape", 1)]
    assert "before any" in corrections(text)[0].message


def test_one_problem_per_violation_across_entries() -> None:
    text = entry("Good") + "## Bad\n### Candidate\n\n### Extra\nx\n"
    start = entry("Good").count("\n") + 1
    assert sorted(shape(text)) == sorted(
        [
            ("corrections-shape", start + 1),  # empty Candidate
            ("corrections-shape", start + 3),  # unexpected Extra
            ("corrections-shape", start),  # missing Proposed edit
            ("corrections-shape", start),  # missing Accepted edit
        ]
    )


def test_fenced_headings_are_opaque() -> None:
    fenced = "```md\n## Not an entry\n### Candidate\n```\n"
    text = "## A\n### Candidate\n" + fenced + "### Proposed edit\np\n### Accepted edit\na\n"
    assert corrections(text) == []
    tilde = "~~~~\n### Candidate\n~~~\nstill fenced\n~~~~\n"
    assert corrections(entry("A") + tilde) == []


def test_deeper_and_top_headings_are_section_content() -> None:
    text = "## A\n### Candidate\n#### detail\n### Proposed edit\n# Big\n### Accepted edit\na\n"
    assert corrections(text) == []


def test_closing_hashes_and_indentation_are_allowed() -> None:
    text = "## A ##\n   ### Candidate ###\nc\n### Proposed edit\np\n### Accepted edit #\na\n"
    assert corrections(text) == []
    # Four spaces make an indented code line, not a heading.
    assert corrections(entry("A") + "    ### Candidate\n") == []


def collection(text: str, path: str = WRITING) -> list[Problem]:
    return check_collections(TreeView.from_bytes({path: text.encode()}))


def ac_entry(n: int, lines: int = 3) -> str:
    return f"### Correction {n}\n" + "".join(f"line {i}\n" for i in range(lines - 1)) + "\n"


def test_valid_collections_are_clean() -> None:
    full = "# Agent corrections\n\n" + "".join(ac_entry(n, 16) for n in range(10))
    assert full.count("\n") - full.count("\n\n") <= 180
    tree = TreeView.from_bytes({WRITING: full.encode(), DESIGN: ac_entry(1).encode()})
    assert check_collections(tree) == []
    assert check_collections(TreeView({})) == []


def test_too_many_collection_entries() -> None:
    text = "".join(ac_entry(n) for n in range(11))
    problems = collection(text, DESIGN)
    assert [(p.code, p.path, p.line) for p in problems] == [("collection-capacity", DESIGN, 41)]


def test_too_many_collection_lines() -> None:
    text = "prose\n" * 181
    problems = collection(text)
    assert [(p.code, p.line) for p in problems] == [("collection-capacity", 181)]
    assert collection("prose\n" * 180 + "\n\n") == []


def test_entry_with_too_many_lines() -> None:
    text = ac_entry(1, 16) + ac_entry(2, 17)
    problems = collection(text)
    assert [(p.code, p.line) for p in problems] == [("collection-capacity", 18)]
    assert "17 non-empty lines" in problems[0].message


def test_over_long_lines_are_reported_once() -> None:
    text = "ok\n" + "x" * 201 + "\n" + "y" * 300 + "\n" + "z" * 200 + "\n"
    problems = collection(text)
    assert [(p.code, p.line) for p in problems] == [("collection-capacity", 2)]
    assert "2 line(s)" in problems[0].message


def test_fenced_collection_headings_are_not_entries() -> None:
    text = "```\n" + "### fenced\n" * 11 + "```\n"
    assert collection(text) == []


def test_collection_not_utf8_is_skipped() -> None:
    assert check_collections(TreeView.from_bytes({WRITING: b"\xff" * 300})) == []
    tree = TreeView({WRITING: Entry(MODE_FILE, 3, data=b"###\n")})
    assert check_collections(tree) == []


def test_split_lines_counts_like_git() -> None:
    assert split_lines("a\r\nb\n") == ["a", "b"]
    assert split_lines("a\u2028b") == ["a\u2028b"]
    assert split_lines("") == []


def test_fence_mask_reports_an_unclosed_fence() -> None:
    assert fence_mask(["a", "```", "b", "```", "c"]) == ([False, True, True, True, False], None)
    assert fence_mask(["```py", "x"])[1] == 1
    # A backtick info string may not hold a backtick: that line is inline code, not a fence.
    assert fence_mask(["```a`b```"]) == ([False], None)
    # A shorter or different closing run does not close the fence.
    assert fence_mask(["````", "```", "~~~~"])[1] == 1


@given(st.text())
def test_arbitrary_text_never_crashes(text: str) -> None:
    tree = TreeView.from_bytes(
        {
            "corrections.md": text.encode("utf-8", "surrogatepass"),
            WRITING: text.encode("utf-8", "surrogatepass"),
        }
    )
    assert isinstance(check_corrections(tree, enforce_capacity=True), list)
    assert isinstance(check_collections(tree), list)


def test_long_blank_runs_stay_linear() -> None:
    # A backtracking heading pattern would take minutes on this line; the scanner must not.
    line = "## " + " #" * 200_000 + " x\n"
    tree = TreeView.from_bytes({"corrections.md": line.encode(), WRITING: line.encode()})
    assert [p.code for p in check_corrections(tree, enforce_capacity=True)] == [
        "corrections-shape"
    ] * 3
    assert [p.code for p in check_collections(tree)] == ["collection-capacity"]
