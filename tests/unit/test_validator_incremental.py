"""The incremental join never changes a verdict: a sequence of edits validated one after the
other through one parse cache (which keeps the previous tree's cross-file state and applies
only the changed files) gives, after every edit, exactly the verdict of a fresh full parse
(`build_graph`): every problem's code, path, line and message, the files and the item count.

Roots here are mostly valid (distinct ids, F# detail files, Focus) so that the incremental
step is taken; edits add, move and delete nodes and edges, break and mend edge targets, add
duplicates and change F# structure (which must fall back to the full pass).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.cache import ParseCache, Uncached
from memsync.validators.graph import validate_graph
from tests.unit.test_validator_equivalence import git_tree, reference

POOL = [f"i{n}" for n in range(24)]
TYPES = ("dep", "rel", "ext", "rel")
DETAILS = ("a", "b", "c")


def node(item: str, edges: list[tuple[str, str]]) -> str:
    listed = ", ".join(f"{kind}:{target}" for kind, target in edges)
    return f"- `{item}` a fact → [{listed}]"


def base_root() -> dict[str, list[str]]:
    """A valid root: MEMORY.md with three F# topics, each with a heading and nodes."""
    memory = ["# Memory {#top}", ""]
    files: dict[str, list[str]] = {}
    for detail in DETAILS:
        memory += [f"## Topic {{F#{detail}}}", ""]
        files[f"MEMORY_{detail}.md"] = [
            f"# Head {{#h-{detail}}} → [dep:top]",
            node(f"n-{detail}", [("dep", "top")]),
            f"## Sub {{#s-{detail}}}",
            node(f"m-{detail}", [("dep", f"h-{detail}"), ("dep", "n-a")]),
        ]
    files["MEMORY.md"] = memory
    files["PURSUITS.md"] = ["# Goals {#goal}", "## Focus", "- `goal` because"]
    return files


TARGETS = [*POOL, "top", "goal", *(f"{p}-{d}" for p in "nmhs" for d in DETAILS)]
# The strategies `edit` draws from, made once: Hypothesis validates each new strategy object
# on its first draw, which cost more than the checks. The examples drawn are the same.
_PATHS: dict[tuple[str, ...], st.SearchStrategy[str]] = {}
_ACTION = st.integers(0, 9)
_AT = [st.integers(0, n) for n in range(64)]
_EDGES = st.lists(st.tuples(st.sampled_from(TYPES), st.sampled_from(TARGETS)), max_size=3)
_ID = st.sampled_from(POOL)
_KIND = st.sampled_from(["#", "#", "F#", "M#"])
_DEPTH = st.integers(1, 3)
_TARGET = st.sampled_from(TARGETS)
_PROSE = st.sampled_from(["", "some prose"])
_BROKEN = st.sampled_from(["- `bad id` x → []", "# T {#a} → [dep=x]"])


@st.composite
def edit(draw: st.DrawFn, files: dict[str, list[str]]) -> dict[str, list[str]]:
    out = {path: list(text) for path, text in files.items()}
    paths = tuple(sorted(out))
    if paths not in _PATHS:
        _PATHS[paths] = st.sampled_from(paths)
    path = draw(_PATHS[paths])
    text = out[path]
    action = draw(_ACTION)
    at = draw(_AT[len(text)] if len(text) < len(_AT) else st.integers(0, len(text)))
    edges = draw(_EDGES)
    if action <= 3:  # a new node (its id may already exist: a duplicate)
        text.insert(at, node(draw(_ID), edges))
    elif action <= 5 and text:  # a line goes
        del text[min(at, len(text) - 1)]
    elif action == 6:  # a plain or addressable heading, maybe of another kind
        kind = draw(_KIND)
        depth = draw(_DEPTH)
        text.insert(at, f"{'#' * depth} New {{{kind}{draw(_ID)}}}")
    elif action == 7:  # Focus moves
        focus = out["PURSUITS.md"]
        focus.insert(len(focus), f"- `{draw(_TARGET)}` matters")
    elif action == 8:  # prose, or a blank line that shifts every line below
        text.insert(at, draw(_PROSE))
    else:  # a broken line
        text.insert(at, draw(_BROKEN))
    return out


def encoded(files: dict[str, list[str]]) -> dict[str, bytes | None]:
    return {path: ("\n".join(text) + "\n").encode() for path, text in files.items()}


STEPS: list[int] = []


@given(st.data())
def test_edits_validated_incrementally_equal_fresh_full_passes(data: st.DataObject) -> None:
    cache = ParseCache()
    files = base_root()
    for _ in range(data.draw(st.integers(1, 8))):
        tree, _source = git_tree(encoded(files))
        want = reference(tree, "local", None)
        assert validate_graph(tree, cache=cache) == want
        assert validate_graph(tree, cache=Uncached()) == want
        files = data.draw(edit(files))
    STEPS.append(cache.steps)


def test_a_content_edit_takes_the_incremental_step() -> None:
    cache = ParseCache()
    files = base_root()
    tree, _ = git_tree(encoded(files))
    assert validate_graph(tree, cache=cache).problems == ()
    files["MEMORY_b.md"].append(node("fresh", [("dep", "nowhere"), ("rel", "h-b")]))
    tree, _ = git_tree(encoded(files))
    verdict = validate_graph(tree, cache=cache)
    assert (cache.joins, cache.steps) == (1, 1)
    assert [(p.code, p.path, p.line) for p in verdict.problems] == [
        ("containment-edge", "MEMORY_b.md", 5),
        ("dangling-edge", "MEMORY_b.md", 5),
    ]
    assert verdict == reference(tree, "local", None)
    # Another file defines the missing target: the first file's edge is judged again.
    files["MEMORY_c.md"].append(node("nowhere", []))
    tree, _ = git_tree(encoded(files))
    verdict = validate_graph(tree, cache=cache)
    assert cache.steps == 2
    assert [p.code for p in verdict.problems] == ["containment-edge"]
    assert verdict == reference(tree, "local", None) and verdict.items == 19
    # ... and takes it away again.
    files["MEMORY_c.md"].pop()
    tree, _ = git_tree(encoded(files))
    assert validate_graph(tree, cache=cache) == reference(tree, "local", None)
    assert cache.steps == 3
    # A duplicate id across files: the full pass decides which occurrence is kept.
    files["MEMORY_c.md"].append(node("n-a", []))
    tree, _ = git_tree(encoded(files))
    verdict = validate_graph(tree, cache=cache)
    assert (cache.joins, cache.steps) == (2, 3)
    assert "duplicate-id" in [p.code for p in verdict.problems]
    assert verdict == reference(tree, "local", None)


def test_the_incremental_step_was_taken_by_the_property() -> None:
    """The property above is only worth something if it exercised the step."""
    if STEPS:
        print("incremental steps per example:", STEPS)
        assert sum(STEPS) > 0
