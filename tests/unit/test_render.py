"""The extractive render: each projection rule on a small provider root, and properties over
generated roots (the rendered package validates as a consumer checks it, rendering is
deterministic, and the package holds exactly the selection plus its context)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.assembly import build_graph
from memsync.validators.graphmodel import MemoryGraph
from memsync.validators.profile import MEMORY
from memsync.validators.tree import TreeView
from memsync.views.package import validate_package
from memsync.views.recipe import Recipe
from memsync.views.render import RenderError, render_dist
from tests.unit.test_graph_props import Generated, valid_graphs

FENCE = "```"
FILES = {
    "MEMORY.md": (
        "Top prose, dropped.\n"
        "\n"
        "# Project {#project} → [dep:ship]\n"
        "\n"
        "Project body.\n"
        "\n"
        "- `lang` Python 3.11 → [dep:style, ext:ship]\n"
        "\n"
        f"{FENCE}text\n"
        "# not a heading\n"
        "\n"
        "\n"
        "- `fake` not a node → []\n"
        f"{FENCE}\n"
        "\n"
        "## Notes\n"
        "\n"
        "Plain prose.\n"
        "\n"
        "- `note` under a plain heading → [rel:lang]\n"
        "\n"
        "## Style {F#style} → [ext:lang]\n"
        "\n"
        "Style summary.\n"
        "\n"
        "## Only prose\n"
        "\n"
        "Nothing addressable.\n"
        "\n"
        "# Tools {#tools}\n"
        "\n"
        "Tools intro. <!-- rightmemory:example:start -->\n"
        "- `sample-node` example → [dep:lang]\n"
        "<!-- rightmemory:example:end -->\n"
        "Tools body.\n"
        "\n"
        "### Shell {#shell} → [dep:lang]\n"
        "- `git` uses git → [dep:project, ext:deep, dep:sample-node]\n"
        "#### Bash notes {M#bash}\n"
        "Evidence summary.\n"
        "#### Deploy {S#deploy}\n"
        "\n"
        "# Shared Views {#shared-views}\n"
        "Views we import.\n"
        "### Auth API {MF#auth-api} → [dep:lang]\n"
        "Relationship text.\n"
    ),
    "MEMORY_style.md": (
        "Detail top prose.\n"
        "# Lint {#lint} → [dep:lang]\n"
        "Lint body.\n"
        "- `width` 100 columns → [ext:project]\n"
        "## Deeper {F#deeper}\n"
    ),
    "MEMORY_deeper.md": "- `deep` a detail → [dep:git]\n",
    "MEMORY_bash.md": "free evidence\r\n",
    "MEMORY_SKILL_deploy.md": "skill text\n",
    "PURSUITS.md": "## Focus\n- `ship` first\n"
    "# Ship it {#ship} → [dep:lint]\n- `step` next step → [dep:lang]\n",
}
EXAMPLE_IDS = frozenset({"sample-node"})  # what the fixture's example block holds
VIEW = "v"


def _tree(files: Mapping[str, str | bytes]) -> TreeView:
    return TreeView.from_bytes(
        {p: t if isinstance(t, bytes) else t.encode() for p, t in files.items()}
    )


def _recipe(**selection: tuple[str, ...]) -> Recipe:
    return Recipe(version=1, view_id=VIEW, kind="file", render="extractive", **selection)


def _render(
    files: Mapping[str, str | bytes] = FILES, **selection: tuple[str, ...]
) -> dict[str, str]:
    return {p: b.decode() for p, b in render_dist(_tree(files), _recipe(**selection)).items()}


def _package(dist: Mapping[str, bytes]) -> dict[str, bytes]:
    """The package as `views/build.py` assembles it around a rendered dist."""
    return {
        "view.md": b"# A view\n\nWhat it is for.\n",
        "recipe.toml": f'version = 1\nview_id = "{VIEW}"\nkind = "file"\n'.encode(),
        "rightmemory-shared-view.toml": (
            f'version = 2\nview_id = "{VIEW}"\nkind = "file"\nref = "rightmemory://mf/{VIEW}"\n'
        ).encode(),
        "dist/manifest.toml": (
            f'version = 2\nview_id = "{VIEW}"\ndocument_kind = "rightmemory-memory"\n'
        ).encode(),
        **dist,
    }


def test_the_fixture_is_valid() -> None:
    assert build_graph(_tree(FILES))[1] == []


def test_an_included_heading_brings_its_subtree_across_detail_files() -> None:
    dist = _render(include_headings=("project",))
    assert dist == {
        "dist/MEMORY.md": (
            "# Project {#project} → []\n"
            "\n"
            "Project body.\n"
            "\n"
            "- `lang` Python 3.11 → [dep:style]\n"
            "\n"
            f"{FENCE}text\n"
            "# not a heading\n"
            "\n"
            "\n"
            "- `fake` not a node → []\n"
            f"{FENCE}\n"
            "\n"
            "## Notes\n"
            "\n"
            "- `note` under a plain heading → [rel:lang]\n"
            "\n"
            "## Style {F#style} → [ext:lang]\n"
            "\n"
            "Style summary.\n"
        ),
        "dist/MEMORY_style.md": (
            "# Lint {#lint} → [dep:lang]\n"
            "Lint body.\n"
            "- `width` 100 columns → [ext:project]\n"
            "## Deeper {F#deeper}\n"
        ),
        "dist/MEMORY_deeper.md": "- `deep` a detail → []\n",
    }


def test_an_included_node_is_its_own_line_under_heading_lines_of_its_ancestors() -> None:
    assert _render(include_nodes=("git",)) == {
        "dist/MEMORY.md": "# Tools {#tools}\n\n### Shell {#shell} → []\n- `git` uses git → []\n"
    }


def test_ancestors_are_context_across_f_boundaries() -> None:
    assert _render(include_nodes=("deep", "note")) == {
        "dist/MEMORY.md": (
            "# Project {#project} → []\n\n## Notes\n\n- `note` under a plain heading → []\n\n"
            "## Style {F#style} → []\n"
        ),
        "dist/MEMORY_style.md": "# Lint {#lint} → []\n## Deeper {F#deeper}\n",
        "dist/MEMORY_deeper.md": "- `deep` a detail → []\n",
    }


def test_an_included_file_brings_its_document_and_its_owner_as_context() -> None:
    dist = _render(include_files=("MEMORY_style.md",))
    assert dist["dist/MEMORY.md"] == "# Project {#project} → []\n\n## Style {F#style} → []\n"
    assert dist["dist/MEMORY_style.md"] == (
        "# Lint {#lint} → []\nLint body.\n- `width` 100 columns → [ext:project]\n"
        "## Deeper {F#deeper}\n"
    )
    assert dist["dist/MEMORY_deeper.md"] == "- `deep` a detail → []\n"


def test_an_included_file_without_items_still_brings_its_owner() -> None:
    memory = FILES["MEMORY.md"].replace("ext:deep, ", "")
    files = {**FILES, "MEMORY.md": memory, "MEMORY_deeper.md": "Only prose.\n"}
    dist = _render(files, include_files=("MEMORY_deeper.md",))
    assert dist["dist/MEMORY_style.md"] == "# Lint {#lint} → []\n## Deeper {F#deeper}\n"
    assert dist["dist/MEMORY_deeper.md"] == ""


def test_the_root_document_can_be_included_whole() -> None:
    dist = _render(include_files=("MEMORY.md",))
    assert "Top prose" not in dist["dist/MEMORY.md"]
    assert set(dist) == {
        "dist/MEMORY.md",
        "dist/MEMORY_style.md",
        "dist/MEMORY_deeper.md",
        "dist/MEMORY_bash.md",
        "dist/MEMORY_SKILL_deploy.md",
    }


def test_excluded_ids_cut_whole_subtrees_and_their_files() -> None:
    dist = _render(include_headings=("project",), exclude_ids=("style", "note"))
    assert dist == {
        "dist/MEMORY.md": (
            "# Project {#project} → []\n\nProject body.\n\n- `lang` Python 3.11 → []\n\n"
            f"{FENCE}text\n# not a heading\n\n\n- `fake` not a node → []\n{FENCE}\n"
        )
    }
    # an exclusion wins over an explicit selection
    dist = _render(include_nodes=("note", "git"), exclude_ids=("note",))
    assert dist == _render(include_nodes=("git",))


def test_evidence_and_skill_files_are_copied_verbatim() -> None:
    dist = render_dist(_tree(FILES), _recipe(include_headings=("shell",)))
    assert dist["dist/MEMORY_bash.md"] == b"free evidence\r\n"
    assert dist["dist/MEMORY_SKILL_deploy.md"] == b"skill text\n"
    assert dist["dist/MEMORY.md"].decode() == (
        "# Tools {#tools}\n\n### Shell {#shell} → []\n- `git` uses git → []\n"
        "#### Bash notes {M#bash}\nEvidence summary.\n#### Deploy {S#deploy}\n"
    )


def test_an_evidence_heading_as_context_still_brings_its_file() -> None:
    files = {
        "MEMORY.md": "# Incident {M#incident}\nSummary.\n- `cause` a cause → [doc:incident]\n",
        "MEMORY_incident.md": "raw notes\n",
        "PURSUITS.md": "",
    }
    assert _render(files, include_nodes=("cause",)) == {
        "dist/MEMORY.md": "# Incident {M#incident}\n- `cause` a cause → [doc:incident]\n",
        "dist/MEMORY_incident.md": "raw notes\n",
    }


def test_shared_view_headings_are_dropped_with_their_subtree() -> None:
    assert _render(include_headings=("shared-views",)) == {
        "dist/MEMORY.md": "# Shared Views {#shared-views}\nViews we import.\n"
    }
    with pytest.raises(RenderError, match="empty"):
        _render(include_headings=("auth-api",))


def test_managed_example_blocks_are_stripped() -> None:
    dist = _render(include_headings=("tools",), exclude_ids=("shell",))
    assert dist == {"dist/MEMORY.md": "# Tools {#tools}\n\nTools body.\n"}
    with pytest.raises(RenderError, match="empty"):
        _render(include_nodes=("sample-node",))


def test_a_heading_inside_an_example_block_is_cut_with_its_subtree() -> None:
    files = {
        "MEMORY.md": (
            "# Real {#real} → [dep:sample]\n- `fact` real → [dep:sample-node]\n\n---\n\n"
            "> Starter template. <!-- rightmemory:example:start -->\n\n"
            "# Sample {#sample}\n\n- `sample-node` example → []\n\n"
            "<!-- rightmemory:example:end -->\n"
            "# Later {#later}\n- `later-node` kept → []\n"
        ),
        "PURSUITS.md": "",
    }
    assert build_graph(_tree(files))[1] == []
    assert _render(files, include_files=("MEMORY.md",)) == {
        "dist/MEMORY.md": (
            "# Real {#real} → []\n- `fact` real → []\n\n---\n\n"
            "# Later {#later}\n- `later-node` kept → []\n"
        )
    }


def test_fences_and_prose_outside_addressable_headings_are_dropped() -> None:
    files = {
        "MEMORY.md": (
            f"{FENCE}\ntop code\n{FENCE}\n# Plain top\ntext\n{FENCE}\ncode\n{FENCE}\n"
            "## A {#a}\nbody\n~~~\n## inside {#nope}\n~~~\n### Plain\nmore\n- `n` x → []\n"
        ),
        "PURSUITS.md": "",
    }
    assert _render(files, include_files=("MEMORY.md",)) == {
        "dist/MEMORY.md": (
            "# Plain top\n## A {#a}\nbody\n~~~\n## inside {#nope}\n~~~\n### Plain\n- `n` x → []\n"
        )
    }


def test_line_endings_and_byte_order_marks_are_normalized() -> None:
    files = {
        "MEMORY.md": "\ufeff# A {#a}\r\n\r\nbody\r\n\r\n\r\n- `x` one → []\r\n\r\n",
        "PURSUITS.md": "",
    }
    dist = render_dist(_tree(files), _recipe(include_headings=("a",)))
    assert dist == {"dist/MEMORY.md": b"# A {#a}\n\nbody\n\n- `x` one \xe2\x86\x92 []\n"}


def test_unknown_pursuit_and_misplaced_recipe_entries_are_named() -> None:
    with pytest.raises(RenderError) as caught:
        render_dist(
            _tree(FILES),
            _recipe(
                include_headings=("ship", "lang"),
                include_nodes=("nope", "project"),
                include_files=("PURSUITS.md", "MEMORY_bash.md", "MEMORY_none.md"),
                exclude_ids=("step",),
            ),
        )
    codes = [p.code for p in caught.value.problems]
    assert codes == [
        "recipe-pursuit-id",
        "recipe-wrong-kind",
        "recipe-unknown-id",
        "recipe-wrong-kind",
        "recipe-pursuit-id",
        "recipe-pursuit-file",
        "recipe-not-graph-file",
        "recipe-not-graph-file",
    ]
    assert "`ship`" in caught.value.message and "`lang`" in caught.value.message


def test_a_root_with_problems_is_not_rendered() -> None:
    files = {**FILES, "MEMORY_deeper.md": "- `deep` a detail → [dep:missing]\n"}
    with pytest.raises(RenderError, match="problem") as caught:
        _render(files, include_headings=("project",))
    assert [p.code for p in caught.value.problems] == ["dangling-edge"]


def test_graph_files_that_are_not_utf8_are_a_render_error() -> None:
    memory = FILES["MEMORY.md"].replace("ext:deep, ", "")
    files: dict[str, str | bytes] = {**FILES, "MEMORY.md": memory, "MEMORY_deeper.md": b"\xff\n"}
    with pytest.raises(RenderError) as caught:
        _render(files, include_headings=("tools",))
    assert [(p.code, p.path) for p in caught.value.problems] == [("not-utf8", "MEMORY_deeper.md")]
    with pytest.raises(RenderError) as caught:
        _render({"MEMORY.md": b"# A {#a}\n\xff\n", "PURSUITS.md": ""}, include_headings=("a",))
    assert [(p.code, p.path) for p in caught.value.problems] == [("not-utf8", "MEMORY.md")]


def test_nothing_selected_is_an_empty_view() -> None:
    with pytest.raises(RenderError, match="empty"):
        _render()
    with pytest.raises(RenderError, match="empty"):
        _render(include_headings=("project",), exclude_ids=("project",))


# -- properties ---------------------------------------------------------------------------


def _expected(graph: MemoryGraph, recipe: Recipe, example: frozenset[str]) -> set[str]:
    """The selection plus its context, computed from the rules rather than the render."""
    items = graph.items

    def chain(item_id: str) -> list[str]:
        return [item_id, *graph.ancestors(item_id)]

    def cut(item_id: str) -> bool:
        return any(
            i in recipe.exclude_ids or i in example or items[i].anchor in ("MF#", "MQ#")
            for i in chain(item_id)
        )

    def full(item_id: str) -> bool:
        return any(
            i in recipe.include_headings or items[i].file in recipe.include_files
            for i in chain(item_id)
        )

    selected = {
        i
        for i, item in items.items()
        if item.tree == MEMORY and not cut(i) and (full(i) or i in recipe.include_nodes)
    }
    for ref in graph.backing.values():
        if ref.kind == "F#" and ref.path in recipe.include_files and not cut(ref.id):
            selected.add(ref.id)
    return {i for s in selected for i in chain(s)}


def _check_render(files: Mapping[str, str], recipe: Recipe, example: frozenset[str]) -> None:
    tree = _tree(files)
    graph, problems = build_graph(tree)
    assert problems == []
    expected = _expected(graph, recipe, example)
    if not expected:
        with pytest.raises(RenderError, match="empty"):
            render_dist(tree, recipe)
        return
    dist = render_dist(tree, recipe)
    assert render_dist(_tree(files), recipe) == dist
    report = validate_package(_package(dist), view_id=VIEW, heading="imported")
    assert report.problems == ()
    rendered, _ = build_graph(TreeView.from_bytes(dist), "mf", root_path="dist/MEMORY.md")
    assert set(rendered.items) == expected
    for path, data in dist.items():
        source = files[path.removeprefix("dist/")]
        if path.removeprefix("dist/") not in graph.files:
            assert data == source.encode()  # M# and S# bodies: verbatim
            continue
        text = data.decode()
        assert "\r" not in text and (text == "" or (text.endswith("\n") and text[-2:] != "\n\n"))
        lines = set(source.split("\n"))
        for line in text.split("\n"):  # extractive: source lines, edge lists aside
            assert line in lines or any(s.startswith(line[: line.rfind("[")]) for s in lines)


def _selection(data: st.DataObject, graph: MemoryGraph) -> Recipe:
    memory = [i for i in sorted(graph.items) if graph.items[i].tree == MEMORY]
    headings = [i for i in memory if graph.items[i].kind == "heading"]
    nodes = [i for i in memory if graph.items[i].kind == "node"]
    files = [p for p in graph.files if not graph.documents[p].pursuit]

    def some(values: list[str], most: int) -> tuple[str, ...]:
        return tuple(data.draw(st.lists(st.sampled_from(values), max_size=most))) if values else ()

    return _recipe(
        include_headings=some(headings, 3),
        include_nodes=some(nodes, 4),
        include_files=some(files, 2),
        exclude_ids=some(memory, 2),
    )


@given(valid_graphs(), st.data())
def test_any_selection_of_a_generated_root_renders_a_valid_package(
    generated: Generated, data: st.DataObject
) -> None:
    graph, _ = build_graph(generated.tree())
    _check_render(generated.files, _selection(data, graph), frozenset())


@given(st.data())
def test_any_selection_of_the_fixture_renders_a_valid_package(data: st.DataObject) -> None:
    graph, _ = build_graph(_tree(FILES))
    _check_render(FILES, _selection(data, graph), EXAMPLE_IDS)
