"""The editor: removing items (with their subtrees, backing files, edges and Focus
references) keeps a valid tree valid."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.assembly import build_graph
from memsync.validators.editor import remove_items
from memsync.validators.tree import TreeView
from tests.unit.test_graph_props import Generated, valid_graphs

FILES = {
    "MEMORY.md": (
        "# User Context {#user}\n"
        "Who we work with.\n"
        "- `tabs` prefers tabs → [dep:style]\n"
        "## Style {F#style} → [ext:tabs]\n"
        "Conventions, in detail elsewhere.\n"
        "# Tools {#tools}\n"
        "### Shell {#shell}\n"
        "- `git` uses git → [dep:user, ext:tabs, rel:lint]\n"
        "#### Bash notes {M#bash}\n"
        "#### Deploy {S#deploy}\n"
    ),
    "MEMORY_style.md": "# Lint {#lint} → [dep:tabs]\n- `width` 100 columns → [ext:user]\n"
    "## Deeper {F#deeper}\n",
    "MEMORY_deeper.md": "- `deep` a detail → [dep:git]\n",
    "MEMORY_bash.md": "free evidence\n",
    "MEMORY_SKILL_deploy.md": "skill text\n",
    "PURSUITS.md": "## Focus\n- `ship` first\n"
    "# Ship it {#ship} → [dep:lint]\n- `step` next step → [dep:tabs]\n",
}


def _tree(files: Mapping[str, str]) -> TreeView:
    return TreeView.from_bytes({p: t.encode() for p, t in files.items()})


def _apply(files: Mapping[str, str], changes: Mapping[str, bytes | None]) -> dict[str, str]:
    out = dict(files)
    for path, data in changes.items():
        if data is None:
            del out[path]
        else:
            out[path] = data.decode()
    return out


def test_the_fixture_is_valid() -> None:
    assert build_graph(_tree(FILES))[1] == []


def test_removing_a_node_removes_its_line_and_edges_to_it() -> None:
    changes = remove_items(_tree(FILES), ["tabs"])
    assert set(changes) == {"MEMORY.md", "MEMORY_style.md", "PURSUITS.md"}
    after = _apply(FILES, changes)
    assert "`tabs`" not in after["MEMORY.md"]
    assert "## Style {F#style} → []\n" in after["MEMORY.md"]
    assert "- `git` uses git → [dep:user, rel:lint]\n" in after["MEMORY.md"]
    assert after["MEMORY_style.md"].startswith("# Lint {#lint} → []\n")
    assert "- `step` next step → []\n" in after["PURSUITS.md"]
    assert build_graph(_tree(after))[1] == []


def test_removing_an_f_heading_deletes_its_detail_files_recursively() -> None:
    changes = remove_items(_tree(FILES), ["style"])
    assert changes["MEMORY_style.md"] is None and changes["MEMORY_deeper.md"] is None
    after = _apply(FILES, changes)
    assert "Style" not in after["MEMORY.md"] and "Conventions" not in after["MEMORY.md"]
    assert "- `tabs` prefers tabs → []\n" in after["MEMORY.md"]
    assert "- `git` uses git → [dep:user, ext:tabs]\n" in after["MEMORY.md"]
    assert "# Ship it {#ship} → []\n" in after["PURSUITS.md"]
    graph, problems = build_graph(_tree(after))
    assert problems == []
    assert not {"style", "lint", "width", "deeper", "deep"} & set(graph.items)


def test_removing_a_heading_removes_its_subtree_and_evidence_files() -> None:
    changes = remove_items(_tree(FILES), ["shell"])
    assert changes["MEMORY_bash.md"] is None and changes["MEMORY_SKILL_deploy.md"] is None
    after = _apply(FILES, changes)
    assert after["MEMORY.md"].endswith("# Tools {#tools}\n")
    assert after["MEMORY_deeper.md"] == "- `deep` a detail → []\n"
    assert build_graph(_tree(after))[1] == []


def test_removing_a_focused_pursuit_drops_the_focus_reference() -> None:
    after = _apply(FILES, remove_items(_tree(FILES), ["ship"]))
    assert after["PURSUITS.md"] == "## Focus\n"
    assert build_graph(_tree(after))[1] == []


def test_unchanged_files_are_not_returned_and_nothing_for_no_ids() -> None:
    assert remove_items(_tree(FILES), []) == {}
    assert set(remove_items(_tree(FILES), ["deep"])) == {"MEMORY_deeper.md"}


def test_unknown_ids_raise_key_error() -> None:
    with pytest.raises(KeyError, match="nope"):
        remove_items(_tree(FILES), ["tabs", "nope"])
    with pytest.raises(TypeError):
        remove_items(_tree(FILES), "tabs")


def test_line_endings_and_byte_order_mark_are_kept() -> None:
    files = {
        "MEMORY.md": "\ufeff# A {#a}\r\n- `x` one → [dep:y]\r\n- `y` two → []\r\n",
        "PURSUITS.md": "",
    }
    after = _apply(files, remove_items(_tree(files), ["y"]))
    assert after["MEMORY.md"] == "\ufeff# A {#a}\r\n- `x` one → []\r\n"


def _expected_survivors(generated: Generated, removed: set[str]) -> set[str]:
    return {
        item.id
        for item in generated.items.values()
        if item.id not in removed and not removed & set(item.ancestors)
    }


@given(valid_graphs(), st.data())
def test_removing_random_items_keeps_a_valid_graph_valid(
    generated: Generated, data: st.DataObject
) -> None:
    ids = sorted(generated.items)
    removed = set(data.draw(st.lists(st.sampled_from(ids), max_size=6))) if ids else set()
    changes = remove_items(generated.tree(), removed)
    after = _apply(generated.files, changes)
    graph, problems = build_graph(_tree(after))
    assert problems == []
    assert set(graph.items) == _expected_survivors(generated, removed)
    assert {entry.target for entry in graph.focus} == set(generated.focus) & set(graph.items)
