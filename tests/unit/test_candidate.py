"""The candidate check: the one gate every caller's policy runs, never weaker than its parts."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from memsync.validators.candidate import History, check_candidate
from memsync.validators.gate import validate_changes, validate_tree
from memsync.validators.grants import INSIGHT, PRUNE, REPAIR, check_grants
from memsync.validators.policy import DEFAULT_POLICY
from memsync.validators.problems import Problem
from memsync.validators.tree import MODE_FILE, Change, Entry, NoBlobs, TreeView

P = DEFAULT_POLICY
GOOD = {"MEMORY.md": b"# Memory\n", "PURSUITS.md": b"# Pursuits\n"}
C1, C2 = "1" * 40, "2" * 40
UNSIGNED = Problem("unsigned-commit", None, None, f"commit {C1}: no signature")
LATE = Problem("prune-grace", "MEMORY.md", None, "removed within its revival grace")

# Paths a role or a person might write: allowed, granted to one role only, forbidden.
PATHS = st.sampled_from(
    ["MEMORY_a.md", "insight_logs/x.md", "notes.txt", ".git/config", "MEMORY.md", "MEMORY_B.md"]
)
BYTES = st.sampled_from([b"# A\n", b"# B\n\n- [x](MEMORY.md)\n", b"\xff\xfe not utf-8\n"])


def _entry(data: bytes) -> Entry:
    return Entry(mode=MODE_FILE, size=len(data), data=data)


@st.composite
def candidates(draw: st.DrawFn) -> tuple[TreeView, list[Change], list[tuple[str, str]]]:
    """A candidate tree, the two commits that made it, and its diff from the start."""
    added = draw(st.dictionaries(PATHS, BYTES, max_size=3))
    dropped = draw(st.dictionaries(PATHS, BYTES, max_size=2))  # added by C1, deleted by C2
    changes = [Change(C1, path, _entry(data)) for path, data in {**dropped, **added}.items()]
    changes += [Change(C2, path, None) for path in dropped if path not in added]
    files = {**GOOD, **added}
    tree = TreeView({path: _entry(data) for path, data in files.items()})
    diff = [("A" if path not in GOOD else "M", path) for path in sorted(added)]
    return tree, changes, diff


@settings(max_examples=150, deadline=None)
@given(
    candidates(),
    st.sampled_from([None, INSIGHT, PRUNE, REPAIR]),
    st.booleans(),
    st.booleans(),
)
def test_the_verdict_is_every_asked_check_passing(
    made: tuple[TreeView, list[Change], list[tuple[str, str]]],
    grants: str | None,
    late: bool,
    unsigned: bool,
) -> None:
    """Refused exactly when one of the checks asked for refuses, alone: the one gate
    relaxes none of the chains the callers used to build by hand. The first problems are
    the earliest failing check's (grants, then history, then tree), signatures last."""
    tree, changes, diff = made
    also = (LATE,) if late else ()
    signatures = (UNSIGNED,) if unsigned else ()
    report = check_candidate(
        tree,
        P,
        history=History(changes, NoBlobs()),
        grants=grants,
        diff=diff,
        also=also,
        signatures=signatures,
    )
    granted = check_grants(grants, diff, P) if grants is not None else []
    history = validate_changes(changes, NoBlobs(), P)
    whole = validate_tree(tree, P)
    alone = [*granted, *also]
    assert report.ok == (not alone and history.ok and whole.ok and not unsigned)
    if alone:
        assert list(report.problems) == alone
    elif not history.ok:
        assert report.problems == (*history.problems, *signatures)
    else:
        assert report.problems == (*whole.problems, *signatures)
        assert (report.files, report.items) == (whole.files, whole.items)


def test_a_history_that_dropped_a_forbidden_file_is_refused_with_a_valid_tree() -> None:
    """The candidate's tree is clean; one of its commits is not: the history check asked
    for still refuses (what a tree-only gate would let through)."""
    tree = TreeView({path: _entry(data) for path, data in GOOD.items()})
    changes = [Change(C1, "notes.txt", _entry(b"x\n")), Change(C2, "notes.txt", None)]
    assert check_candidate(tree, P).ok
    report = check_candidate(tree, P, history=History(changes, NoBlobs()))
    assert [(p.code, p.path) for p in report.problems] == [("path-not-allowed", "notes.txt")]


def test_a_refused_history_reads_no_tree() -> None:
    """The tree is the costliest check: after a refused history it is not even read."""
    read: list[str] = []

    def tree() -> TreeView:
        read.append("tree")
        return TreeView({path: _entry(data) for path, data in GOOD.items()})

    bad = [Change(C1, "notes.txt", _entry(b"x\n"))]
    assert not check_candidate(tree, P, history=History(bad, NoBlobs())).ok
    assert read == []
    assert check_candidate(tree, P, history=History([], NoBlobs())).ok
    assert read == ["tree"]


def test_a_change_outside_the_grants_reads_no_history_nor_tree() -> None:
    read: list[str] = []

    def history() -> History:
        read.append("history")
        return History([], NoBlobs())

    def tree() -> TreeView:
        read.append("tree")
        return TreeView({path: _entry(data) for path, data in GOOD.items()})

    refused = check_candidate(tree, P, history=history, grants=INSIGHT, diff=[("M", "MEMORY.md")])
    assert [p.code for p in refused.problems] == ["grant-violation"] and read == []
    assert check_candidate(tree, P, history=history, grants=PRUNE, diff=[("M", "MEMORY.md")]).ok
    assert read == ["history", "tree"]
