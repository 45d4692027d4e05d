"""The RightMemory graph parser and validator: one small corpus case per rule, then the
document grammar (fences, Focus, legacy fields), parents, hashes, profiles and counts."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest

from memsync.roots.create import MEMORY_TEMPLATE, PURSUITS_TEMPLATE
from memsync.validators.assembly import build_graph
from memsync.validators.blocks import Fence, FocusRef, Heading, Node, Prose
from memsync.validators.document import scan
from memsync.validators.gate import validate_tree
from memsync.validators.graph import MemoryGraphValidator
from memsync.validators.policy import DEFAULT_POLICY
from memsync.validators.problems import Problem
from memsync.validators.rightmemory import default_graph_validator
from memsync.validators.tree import MODE_FILE, MODE_GITLINK, MODE_SYMLINK, Entry, TreeView

BASE = {"MEMORY.md": "# Memory\n", "PURSUITS.md": "# Pursuits\n"}


def _tree(files: Mapping[str, str | bytes], extra: Mapping[str, Entry] | None = None) -> TreeView:
    merged = {**BASE, **files}
    data = {p: t.encode() if isinstance(t, str) else t for p, t in merged.items()}
    entries = {p: Entry(MODE_FILE, len(b), data=b) for p, b in data.items()}
    return TreeView({**entries, **(extra or {})})


def _problems(files: Mapping[str, str | bytes], **kwargs: str) -> list[Problem]:
    return build_graph(_tree(files), **kwargs)[1]


def _found(files: Mapping[str, str], **kwargs: str) -> set[tuple[str, str | None, int | None]]:
    return {(p.code, p.path, p.line) for p in _problems(files, **kwargs)}


# --- the corpus: a valid neighbour and one violation per rule -------------------------------


@dataclass(frozen=True)
class Case:
    name: str
    valid: Mapping[str, str]
    invalid: Mapping[str, str]
    expected: frozenset[tuple[str, str | None, int | None]]
    profile: str = "local"


def _case(
    name: str,
    valid: Mapping[str, str],
    invalid: Mapping[str, str],
    *expected: tuple[str, str | None, int | None],
    profile: str = "local",
) -> Case:
    return Case(name, valid, invalid, frozenset(expected), profile)


M, P, MF = "MEMORY.md", "PURSUITS.md", "dist/MEMORY.md"
A = "# A {#a}\n"

CORPUS = [
    _case("invalid-id", {M: "# A {#good-id}\n"}, {M: "# A {#bad id}\n"}, ("invalid-id", M, 1)),
    _case(
        "malformed-edge-list",
        {M: A + "# B {#b} → [dep:a]\n"},
        {M: A + "# B {#b} dep:a\n"},
        ("malformed-edge-list", M, 2),
    ),
    _case("unsupported-marker", {M: A}, {M: "# A {X#a}\n"}, ("unsupported-marker", M, 1)),
    _case(
        "heading-under-f",
        {M: "# A {F#a}\nbody\n", "MEMORY_a.md": "## B\n"},
        {M: "# A {F#a}\nbody\n## B\n", "MEMORY_a.md": ""},
        ("heading-under-f", M, 3),
    ),
    _case(
        "heading-under-terminal",  # a child of `####` is always also too deep
        {M: "### C\n#### T {M#t}\nbody\n", "MEMORY_t.md": ""},
        {M: "### C\n#### T {M#t}\n##### D\n", "MEMORY_t.md": ""},
        ("heading-under-terminal", M, 3),
        ("heading-too-deep", M, 3),
    ),
    _case("heading-too-deep", {M: "### Deep\n"}, {M: "##### Deep\n"}, ("heading-too-deep", M, 1)),
    _case(
        "terminal-kind",
        {M: "### C\n#### T {S#t}\n", "MEMORY_SKILL_t.md": ""},
        {M: "### C\n#### T {#t}\n"},
        ("terminal-kind", M, 2),
    ),
    _case(
        "terminal-parent",
        {M: "## B\n### C\n#### T {MQ#t}\n"},
        {M: "## B\n#### T {MQ#t}\n"},
        ("terminal-parent", M, 2),
    ),
    _case(
        "kind-not-allowed",
        {MF: "# A {#x}\n"},
        {MF: "# A {MF#x}\n"},
        ("kind-not-allowed", MF, 1),
        profile="mf",
    ),
    _case("memory-only-kind", {P: "# P {#p}\n"}, {P: "# P {M#p}\n"}, ("memory-only-kind", P, 1)),
    _case(
        "reserved-id",
        {P: "# P {F#rule}\n", "PURSUIT_rule.md": ""},
        {P: "# P {F#Rules}\n", "PURSUIT_Rules.md": ""},
        ("reserved-id", P, 1),
    ),
    _case("duplicate-id", {M: A, P: "# P {#p}\n"}, {M: A, P: "# P {#a}\n"}, ("duplicate-id", P, 1)),
    _case(
        "backing-collision",
        {M: "# A {F#a}\n# B {M#b}\n", "MEMORY_a.md": "", "MEMORY_b.md": ""},
        {M: "# A {F#a}\n# B {M#A}\n", "MEMORY_a.md": "", "MEMORY_A.md": ""},
        ("backing-collision", M, 2),
    ),
    _case(
        "backing-collision-skill",
        {M: "# A {S#x}\n# B {M#y}\n", "MEMORY_SKILL_x.md": "", "MEMORY_y.md": ""},
        {M: "# A {S#x}\n# B {M#SKILL_x}\n", "MEMORY_SKILL_x.md": ""},
        ("backing-collision", M, 2),
    ),
    _case(
        "missing-backing-file",
        {M: "# A {F#a}\n", "MEMORY_a.md": ""},
        {M: "# A {F#a}\n"},
        ("missing-backing-file", M, 1),
    ),
    _case(
        "missing-skill-file",
        {M: "# A {S#a}\n", "MEMORY_SKILL_a.md": ""},
        {M: "# A {S#a}\n", "MEMORY_a.md": ""},
        ("missing-backing-file", M, 1),
    ),
    _case(
        "backing-cycle",  # the F# id that closes the loop is necessarily a duplicate too
        {M: "# A {F#a}\n", "MEMORY_a.md": "# B {F#b}\n", "MEMORY_b.md": "# C {#c}\n"},
        {M: "# A {F#a}\n", "MEMORY_a.md": "# B {F#b}\n", "MEMORY_b.md": "# C {F#a}\n"},
        ("backing-cycle", "MEMORY_b.md", 1),
        ("duplicate-id", "MEMORY_b.md", 1),
    ),
    _case(
        "backing-multi-owner",  # two F# owners of one file share its id
        {M: "# A {F#a}\n# B {#b}\n", "MEMORY_a.md": "- `n` → []\n"},
        {M: "# A {F#a}\n# B {F#a}\n", "MEMORY_a.md": "- `n` → []\n"},
        ("backing-multi-owner", M, 2),
        ("duplicate-id", M, 2),
    ),
    _case(
        "node-under-terminal",
        {M: "### C\n- `n` → []\n#### T {MF#t}\n"},
        {M: "### C\n#### T {MF#t}\n- `n` → []\n"},
        ("node-under-terminal", M, 3),
    ),
    _case(
        "node-under-f",
        {M: "# A {F#a}\n", "MEMORY_a.md": "- `n` → []\n"},
        {M: "# A {F#a}\n- `n` → []\n", "MEMORY_a.md": ""},
        ("node-under-f", M, 2),
    ),
    _case(
        "invalid-node-id",
        {M: "- `n.1` x → []\n"},
        {M: "- `n 1` x → []\n"},
        ("invalid-node-id", M, 1),
    ),
    _case(
        "node-missing-edges",
        {M: "- `n` text -> []\n"},
        {M: "- `n` text\n"},
        ("node-missing-edges", M, 1),
    ),
    _case(
        "invalid-focus-id",
        {P: "# P {#p}\n## Focus\n- `p` now\n"},
        {P: "# P {#p}\n## Focus\n- `p!` now\n"},
        ("invalid-focus-id", P, 3),
    ),
    _case(
        "mf-orphan-prose",
        {MF: "# A {#a}\nintro\n"},
        {MF: "intro\n# A {#a}\n"},
        ("mf-orphan-prose", MF, 1),
        profile="mf",
    ),
    _case(
        "mf-orphan-prose-plain-heading",
        {MF: "# Plain\n## A {#a}\ntext\n"},
        {MF: "# Plain\ntext\n## A {#a}\n"},
        ("mf-orphan-prose", MF, 2),
        profile="mf",
    ),
    _case(
        "malformed-edge",
        {M: A + "- `n` → [dep:a]\n"},
        {M: A + "- `n` → [dep-a]\n"},
        ("malformed-edge", M, 2),
    ),
    _case(
        "duplicate-edge",
        {M: A + "- `n` → [dep:a, ext:a]\n"},
        {M: A + "- `n` → [dep:a, dep:a]\n"},
        ("duplicate-edge", M, 2),
    ),
    _case("self-edge", {M: A + "- `n` → [dep:a]\n"}, {M: "- `n` → [dep:n]\n"}, ("self-edge", M, 1)),
    _case(
        "unknown-edge-type",
        {M: A + "- `n` → [todo:a]\n"},
        {M: A + "- `n` → [ref:a]\n"},
        ("unknown-edge-type", M, 2),
    ),
    _case(
        "dangling-edge",
        {M: A + "- `n` → [dep:a]\n"},
        {M: "- `n` → [dep:a]\n"},
        ("dangling-edge", M, 1),
    ),
    _case(
        "dangling-edge-into-evidence",
        {M: "# E {M#ev}\n- `n` → [dep:ev]\n", "MEMORY_ev.md": "- `inner` → []\n"},
        {M: "# E {M#ev}\n- `n` → [dep:inner]\n", "MEMORY_ev.md": "- `inner` → []\n"},
        ("dangling-edge", M, 2),
    ),
    _case(
        "dangling-edge-into-mf-package",
        {M: A + "- `n` → [dep:a]\n", MF: "# X {#x}\n"},
        {M: "- `n` → [dep:x]\n", MF: "# X {#x}\n"},
        ("dangling-edge", M, 1),
    ),
    _case(
        "containment-edge",
        {M: A + "- `n` → [dep:a]\n"},
        {M: A + "- `n` → [rel:a]\n"},
        ("containment-edge", M, 2),
    ),
    _case(
        "containment-edge-across-f",
        {M: "# A {F#a}\n", "MEMORY_a.md": "## B {#b}\n- `n` → [dep:a]\n"},
        {M: "# A {F#a}\n", "MEMORY_a.md": "## B {#b}\n- `n` → [rel:a]\n"},
        ("containment-edge", "MEMORY_a.md", 2),
    ),
    _case(
        "duplicate-focus",
        {P: "# P {#p}\n# Q {#q}\n## Focus\n- `p`\n- `q`\n"},
        {P: "# P {#p}\n# Q {#q}\n## Focus\n- `p`\n- `p`\n"},
        ("duplicate-focus", P, 5),
    ),
    _case(
        "dangling-focus",
        {P: "# P {#p}\n## focus\n- `p`\n"},
        {P: "# P {#p}\n## focus\n- `q`\n"},
        ("dangling-focus", P, 3),
    ),
    _case(
        "focus-not-heading",
        {M: A, P: "# P {#p}\n- `n` → []\n## Focus\n- `p`\n"},
        {M: A, P: "# P {#p}\n- `n` → []\n## Focus\n- `n`\n- `a`\n"},
        ("focus-not-heading", P, 4),
        ("focus-not-heading", P, 5),
    ),
]


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_corpus_valid_neighbour_is_clean(case: Case) -> None:
    assert _problems(case.valid, profile=case.profile) == []


@pytest.mark.parametrize("case", CORPUS, ids=[c.name for c in CORPUS])
def test_corpus_violation_yields_exactly_its_code(case: Case) -> None:
    assert _found(case.invalid, profile=case.profile) == case.expected


def test_every_graph_code_of_the_contract_is_in_the_corpus() -> None:
    covered = {code for case in CORPUS for code, _, _ in case.expected}
    graph_codes = {
        "invalid-id", "malformed-edge-list", "unsupported-marker", "heading-under-f",
        "heading-under-terminal", "heading-too-deep", "terminal-kind", "terminal-parent",
        "kind-not-allowed", "memory-only-kind", "reserved-id", "duplicate-id",
        "backing-collision", "missing-backing-file", "backing-cycle", "backing-multi-owner",
        "node-under-terminal", "node-under-f", "invalid-node-id", "node-missing-edges",
        "invalid-focus-id", "mf-orphan-prose", "malformed-edge", "duplicate-edge", "self-edge",
        "unknown-edge-type", "dangling-edge", "containment-edge", "duplicate-focus",
        "dangling-focus", "focus-not-heading",
    }  # fmt: skip
    assert graph_codes <= covered


# --- root documents -------------------------------------------------------------------------


@pytest.mark.parametrize("missing", ["MEMORY.md", "PURSUITS.md"])
def test_missing_root_document(missing: str) -> None:
    files = {p: t.encode() for p, t in BASE.items() if p != missing}
    [problem] = build_graph(TreeView.from_bytes(files))[1]
    assert (problem.code, problem.path, problem.line) == ("missing-root-document", missing, None)
    assert "missing" in problem.message


@pytest.mark.parametrize(
    ("entry", "what"),
    [(Entry(MODE_SYMLINK, data=b"x.md"), "symbolic link"), (Entry(MODE_GITLINK), "submodule")],
)
def test_root_document_that_is_not_a_regular_file(entry: Entry, what: str) -> None:
    [problem] = build_graph(_tree({}, {"PURSUITS.md": entry}))[1]
    assert problem.code == "missing-root-document" and what in problem.message


def test_backing_file_that_is_a_symlink_is_missing() -> None:
    extra = {"MEMORY_a.md": Entry(MODE_SYMLINK, data=b"/etc/passwd")}
    [problem] = build_graph(_tree({M: "# A {F#a}\n"}, extra))[1]
    assert (problem.code, problem.line) == ("missing-backing-file", 1)
    assert "symbolic link" in problem.message


def test_a_file_that_is_not_utf8_is_skipped_without_problems() -> None:
    graph, problems = build_graph(_tree({M: "# A {F#a}\n", "MEMORY_a.md": b"# B {#b}\xff\n"}))
    assert problems == [] and graph.files == ("MEMORY.md", "PURSUITS.md")
    graph, problems = build_graph(_tree({M: b"\xff\xfe"}))
    assert problems == [] and graph.files == ("PURSUITS.md",)


def test_memsync_init_templates_validate_clean() -> None:
    tree = TreeView.from_bytes(
        {"MEMORY.md": MEMORY_TEMPLATE.encode(), "PURSUITS.md": PURSUITS_TEMPLATE.encode()}
    )
    report = default_graph_validator().validate(tree)
    assert report.ok and (report.files, report.items) == (2, 0)
    assert validate_tree(tree, DEFAULT_POLICY).ok


# --- document grammar -----------------------------------------------------------------------


def test_fenced_code_is_opaque() -> None:
    text = (
        "# A {#a}\n"
        "```python\n# B {#b}\n- `x` → [dep:nowhere]\n~~~\n``\n```\n"  # 2-7
        "   ~~~~\n```\n- `y` → []\n~~~\n~~~~\n"  # 8-12: indented opener, shorter closer
        "    ```\n- `z` → []\n"  # 13-14: four spaces is not a fence
        "```\n# C {#c}\n"  # 15-16: unclosed, runs to the end
    )
    doc = scan(text, M)
    assert [(type(b).__name__, b.line) for b in doc.blocks] == [
        ("Heading", 1),
        ("Fence", 2),
        ("Fence", 8),
        ("Prose", 13),
        ("Node", 14),
        ("Fence", 15),
    ]
    assert [(b.end_line, b.closed) for b in doc.blocks if isinstance(b, Fence)] == [
        (7, True),
        (12, True),
        (16, False),
    ]
    heading = doc.blocks[0]
    assert isinstance(heading, Heading) and heading.end_line == 16 and heading.body == (2, 16)


def test_backtick_fence_info_with_backticks_is_not_a_fence() -> None:
    doc = scan("```not `a` fence```\n- `n` → []\n", M)
    assert [type(b) for b in doc.blocks] == [Prose, Node]


def test_headings_nodes_and_spans() -> None:
    text = "intro\n# A {#a} -> [dep:b]\nbody\n\n## B {#b}\n  - `n` said → [ext:a]\n# C\n"
    doc = scan(text, M)
    assert doc.body == (1, 1)
    a, b = (blk for blk in doc.blocks if isinstance(blk, Heading) and blk.item_id)
    assert (a.line, a.end_line, a.body, a.edges, a.parent) == (2, 6, (3, 4), (("dep", "b"),), -1)
    assert (b.depth, b.end_line, b.body, b.title) == (2, 6, (6, 6), "B")
    [node] = [blk for blk in doc.blocks if isinstance(blk, Node)]
    assert (node.item_id, node.edges, doc.blocks[node.parent]) == ("n", (("ext", "a"),), b)
    line = doc.lines[node.line - 1]
    assert line[node.edge_span[0] : node.edge_span[1]] == "ext:a"


def test_only_dash_bullets_are_nodes_and_the_last_edge_list_counts() -> None:
    doc = scan("* `a` → []\n+ `b` → []\n- `c` a → b → [dep:x]\n- `d`→ []\n", M)
    [node] = [blk for blk in doc.blocks if isinstance(blk, Node)]
    assert (node.item_id, node.edges) == ("c", (("dep", "x"),))


def test_focus_bullets_are_references_only_in_pursuit_focus_sections() -> None:
    text = "## Focus\n- `p` soon\n### Sub\n- `q`\n# Next {#n}\n- `r` → []\n"
    pursuit = scan(text, P, pursuit=True)
    assert [(type(b).__name__, b.line) for b in pursuit.blocks if not isinstance(b, Heading)] == [
        ("FocusRef", 2),
        ("FocusRef", 4),
        ("Node", 6),
    ]
    memory = scan(text, M)
    assert not any(isinstance(b, FocusRef) for b in memory.blocks)
    assert {p.code for p in memory.problems} == {"node-missing-edges"}
    assert not any(
        isinstance(b, FocusRef) for b in scan("### Focus\n- `p` → []\n", P, pursuit=True).blocks
    )


def test_lines_after_legacy_next_are_prose_until_the_next_field_or_heading() -> None:
    text = (
        "# P {#p}\n**State:** active\n**Next:**\n- `do` write\n- `n1` real-looking → []\n"
        "text\n**Status:** fine\n- `n2` → []\n## Q {#q}\n**Next:**\n- `n3` → []\n# R\n- `n4` → []\n"
    )
    graph, problems = build_graph(_tree({P: text}))
    assert problems == []
    assert {"n2", "n4"} <= set(graph.items) and not {"n1", "n3", "do"} & set(graph.items)
    memory_graph, _ = build_graph(_tree({M: text.replace("{#", "{#m")}))
    assert {"n1", "n3"} <= set(memory_graph.items)


def test_crlf_and_byte_order_mark() -> None:
    text = "\ufeff# A {#a} → [dep:n]\r\n- `n` x → [ext:a]\r\n"
    graph, problems = build_graph(_tree({M: text}))
    assert problems == [] and graph.items["a"].edges == (("dep", "n"),)


# --- the assembled graph --------------------------------------------------------------------

LAYERED = {
    M: "# Top {#top}\n## Area {F#area}\nwhy\n# Other {#other}\n",
    "MEMORY_area.md": "intro\n# Sub {#sub}\n- `leaf` → [dep:top]\n### Plain\n- `deep` → []\n",
    P: "# Goal {F#goal}\n",
    "PURSUIT_goal.md": "- `step` → [dep:leaf]\n",
}


def test_physical_and_logical_parents() -> None:
    items = build_graph(_tree(LAYERED))[0].items
    assert (items["area"].parent, items["area"].logical_parent) == ("top", "top")
    assert (items["sub"].parent, items["sub"].logical_parent) == (None, "area")
    assert (items["leaf"].parent, items["leaf"].logical_parent) == ("sub", "sub")
    assert (items["deep"].parent, items["deep"].logical_parent) == ("sub", "sub")
    assert (items["step"].tree, items["step"].logical_parent) == ("pursuit", "goal")
    assert items["top"].end_line == 3 and items["area"].anchor == "F#"


def test_graph_files_backing_and_counts() -> None:
    files = {**LAYERED, M: LAYERED[M] + "### S\n#### Skill {S#sk}\n", "MEMORY_SKILL_sk.md": ""}
    graph, problems = build_graph(_tree(files))
    assert problems == []
    assert graph.files == ("MEMORY.md", "MEMORY_area.md", "PURSUITS.md", "PURSUIT_goal.md")
    assert graph.evidence_files == ("MEMORY_SKILL_sk.md",)
    assert graph.backing["area"].path == "MEMORY_area.md" and graph.backing["sk"].kind == "S#"
    assert graph.attached[("MEMORY.md", 2)] == "MEMORY_area.md"
    assert graph.ancestors("deep") == ["sub", "area", "top"]
    report = MemoryGraphValidator().validate(_tree(files))
    assert (report.files, report.items) == (5, 9)


def test_content_hash_covers_the_logical_block() -> None:
    before = build_graph(_tree(LAYERED))[0].items
    changed = {
        **LAYERED,
        "MEMORY_area.md": LAYERED["MEMORY_area.md"].replace("`deep` →", "`deep` x →"),
    }
    after = build_graph(_tree(changed))[0].items
    moved = {i for i in before if before[i].content_hash != after[i].content_hash}
    assert moved == {"top", "area", "sub", "deep"}
    assert len(before["top"].content_hash) == 64


def test_duplicate_message_names_the_first_location() -> None:
    [problem] = _problems({M: "- `x` → []\n", "PURSUITS.md": "# X {#x}\n"})
    assert problem.code == "duplicate-id" and "MEMORY.md:1" in problem.message


def test_edge_checks_report_only_the_first_failure_per_edge() -> None:
    problems = _problems({M: "- `n` → [foo:n, dep:n, foo:zz, bad, ,]\n"})
    assert [(p.code, p.message.split("`")[1]) for p in problems] == [
        ("malformed-edge", "bad"),
        ("self-edge", "n"),
        ("self-edge", "n"),
        ("unknown-edge-type", "foo"),
    ]


def test_problems_are_sorted_by_path_line_code() -> None:
    problems = _problems({M: "- `b` → [x:y]\n- `a`\n", P: "- `c` → [dep:q]\n"})
    keys = [(p.path, p.line, p.code) for p in problems]
    assert keys == sorted(keys) and len(keys) == 3


def test_mf_profile_reads_only_its_root_and_resolves_backing_beside_it() -> None:
    files = {
        "views/auth/MEMORY.md": "# Auth {F#auth}\n# Run {S#run}\n",
        "views/auth/MEMORY_auth.md": "# Tokens {#tokens}\n- `ttl` → [dep:tokens]\n",
        "views/auth/MEMORY_SKILL_run.md": "",
        M: "# Mine {#mine}\n",
    }
    graph, problems = build_graph(
        _tree(files), "mf", root_path="views/auth/MEMORY.md", namespace="MF#auth"
    )
    assert problems == [] and set(graph.items) == {"auth", "run", "tokens", "ttl"}
    assert graph.namespace == "MF#auth" and graph.files[0] == "views/auth/MEMORY.md"
    [missing] = build_graph(_tree({}), "mf")[1]
    assert (missing.code, missing.path) == ("missing-root-document", "dist/MEMORY.md")
    [kind] = _problems({MF: "# Q {MQ#q}\n"}, profile="mf", namespace="MF#team")
    assert "MF#team" in kind.message


def test_unknown_profile_is_refused() -> None:
    with pytest.raises(ValueError, match="profile"):
        MemoryGraphValidator("shared")
    with pytest.raises(ValueError, match="local"):
        build_graph(_tree({}), root_path="x/MEMORY.md")


def test_ten_thousand_items_in_one_detail_file_validate() -> None:
    detail = "".join(f"- `n{i}` fact {i} → [dep:n{i + 1}, ext:top]\n" for i in range(9_999))
    files = {M: "# Top {F#top}\n", "MEMORY_top.md": detail + "- `n9999` end → [dep:n0]\n"}
    report = default_graph_validator().validate(_tree(files))
    assert report.ok and report.items == 10_001  # speed is measured by bench B1, not here
