"""The gate: whole-tree and per-commit validation, and the root-document graph check."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.collisions import case_collisions
from memsync.validators.gate import (
    _creates_nothing,
    _replayed,
    _shapes,
    validate_changes,
    validate_tree,
)
from memsync.validators.policy import DEFAULT_POLICY, SyncPolicy
from memsync.validators.problems import Report
from memsync.validators.rightmemory import default_graph_validator
from memsync.validators.tree import (
    MODE_EXECUTABLE,
    MODE_FILE,
    MODE_GITLINK,
    MODE_SPECIAL,
    MODE_SYMLINK,
    Change,
    Entry,
    Listing,
    TreeView,
)

P = DEFAULT_POLICY
GOOD = {"MEMORY.md": b"# Memory\n", "PURSUITS.md": b"# Pursuits\n"}
C1 = "1" * 40
C2 = "2" * 40
C3 = "3" * 40
BASE = "b" * 40


class DictBlobs:
    """An in-memory blob store standing in for the git adapter; it counts its reads."""

    def __init__(self, blobs: Mapping[str, bytes]) -> None:
        self.blobs = dict(blobs)
        self.calls: list[list[str]] = []

    def read_many(self, oids: Sequence[str]) -> Mapping[str, bytes]:
        self.calls.append(list(oids))
        return {oid: self.blobs[oid] for oid in oids}


def _tree(extra: Mapping[str, Entry] | None = None, files: Mapping[str, bytes] = GOOD) -> TreeView:
    everything = {**GOOD, **files}
    entries = {p: Entry(mode=MODE_FILE, size=len(b), data=b) for p, b in everything.items()}
    entries.update(extra or {})
    return TreeView(entries)


def _validate(tree: TreeView, policy: SyncPolicy = P) -> Report:
    return validate_tree(tree, policy, default_graph_validator())


def test_clean_tree_passes() -> None:
    tree = TreeView.from_bytes(
        {**GOOD, "MEMORY_x.md": b"x", "shared_views/a/view.md": b"v", "insight_logs/a.md": b"i"}
    )
    report = _validate(tree)
    assert report.ok and report.problems == ()
    assert report.files == 2 and report.items == 0  # RightMemory files read: the two roots


@pytest.mark.parametrize(
    ("entries", "code"),
    [
        ({"rightmemory.toml": Entry(mode=MODE_FILE, data=b"x=1\n")}, "path-not-allowed"),
        ({"PURSUIT_RULES.md": Entry(mode=MODE_FILE, data=b"x\n")}, "legacy-reference"),
        ({"insight_logs/a..md ": Entry(mode=MODE_FILE, data=b"x\n")}, "unsafe-path"),
        ({"shared_views/.GIT/view.md": Entry(mode=MODE_FILE, data=b"x\n")}, "dotgit-path"),
        ({"insight_logs/a.md": Entry(mode=MODE_SYMLINK, data=b"../x")}, "symlink"),
        ({"shared_views/a/view.md": Entry(mode=MODE_GITLINK, oid="a" * 40)}, "gitlink"),
        ({"insight_logs/a.md": Entry(mode=MODE_SPECIAL)}, "special-file"),
        ({"insight_logs/a.md": Entry(mode=MODE_EXECUTABLE, data=b"#!/bin/sh\n")}, "executable"),
        ({"insight_logs/a.md": Entry(mode=MODE_FILE, size=5 * 1024 * 1024)}, "too-large"),
        ({"MEMORY_x.md": Entry(mode=MODE_FILE, data=b"ok\n\xc3(\n")}, "not-utf8"),
        (
            {
                "shared_views/A/view.md": Entry(mode=MODE_FILE, data=b"a"),
                "shared_views/a/view.md": Entry(mode=MODE_FILE, data=b"b"),
            },
            "case-collision",
        ),
        ({".gitmodules": Entry(mode=MODE_FILE, data=b"x\n")}, "dotgit-path"),
        ({"shared_views/a/GITATT~1/x": Entry(mode=MODE_FILE, data=b"x\n")}, "dotgit-path"),
    ],
)
def test_each_problem_yields_exactly_its_code(entries: Mapping[str, Entry], code: str) -> None:
    report = _validate(_tree(entries))
    assert report.codes() == {code}, report.problems


def test_too_large_file_is_not_read() -> None:
    source = DictBlobs({})
    entries = {p: Entry(mode=MODE_FILE, size=len(b), data=b) for p, b in GOOD.items()}
    entries["MEMORY_big.md"] = Entry(mode=MODE_FILE, size=11, oid="b" * 40)
    report = validate_tree(TreeView(entries, source), SyncPolicy(max_file_size=10))
    assert report.codes() == {"too-large"}
    assert source.calls == []


def test_not_utf8_reports_the_line() -> None:
    report = _validate(_tree(files={"MEMORY_x.md": b"one\ntwo\n\xff\n"}))
    [problem] = report.problems
    assert (problem.code, problem.path, problem.line) == ("not-utf8", "MEMORY_x.md", 3)


@pytest.mark.parametrize("missing", ["MEMORY.md", "PURSUITS.md"])
def test_missing_root_document(missing: str) -> None:
    files = {p: b for p, b in GOOD.items() if p != missing}
    report = _validate(TreeView.from_bytes(files))
    [problem] = report.problems
    assert (problem.code, problem.path) == ("missing-root-document", missing)
    assert "missing" in problem.message


def test_root_document_that_is_a_symlink() -> None:
    tree = _tree({"MEMORY.md": Entry(mode=MODE_SYMLINK, data=b"elsewhere.md")})
    report = _validate(tree)
    assert report.codes() == {"symlink", "missing-root-document"}
    [root] = [p for p in report.problems if p.code == "missing-root-document"]
    assert "not a regular file" in root.message and "symbolic link" in root.message


def test_tree_blobs_are_read_in_one_batch() -> None:
    source = DictBlobs({"a" * 40: b"# Memory\n", "b" * 40: b"# Pursuits\n", "c" * 40: b"\xff"})
    entries = {
        "MEMORY.md": Entry(mode=MODE_FILE, size=9, oid="a" * 40),
        "PURSUITS.md": Entry(mode=MODE_FILE, size=11, oid="b" * 40),
        "MEMORY_copy.md": Entry(mode=MODE_FILE, size=9, oid="a" * 40),
        "insight_logs/x.md": Entry(mode=MODE_FILE, size=1, oid="c" * 40),
        "dream_logs/x.md": Entry(mode=MODE_FILE, size=1, oid="c" * 40),
    }
    report = _validate(TreeView(entries, source))
    assert [(p.code, p.path) for p in report.problems] == [
        ("path-not-allowed", "dream_logs/x.md"),
        ("not-utf8", "insight_logs/x.md"),
    ]
    assert source.calls == [["a" * 40, "b" * 40, "c" * 40]]


def test_problem_order_is_by_path_then_code() -> None:
    entries = {
        "zeta.md": Entry(mode=MODE_EXECUTABLE, data=b"x"),
        "alpha.md": Entry(mode=MODE_SYMLINK, data=b"x"),
        "insight_logs/a.md": Entry(mode=MODE_EXECUTABLE, size=10**9),
    }
    report = _validate(_tree(entries))
    assert [(p.path, p.code) for p in report.problems] == [
        ("alpha.md", "path-not-allowed"),
        ("alpha.md", "symlink"),
        ("insight_logs/a.md", "executable"),
        ("insight_logs/a.md", "too-large"),
        ("zeta.md", "executable"),
        ("zeta.md", "path-not-allowed"),
    ]
    assert report == _validate(TreeView(dict(reversed(list(_tree(entries).entries.items())))))


def test_graph_validator_defaults_to_root_documents_and_can_be_replaced() -> None:
    tree = TreeView.from_bytes({"insight_logs/a.md": b"x"})
    assert validate_tree(tree, P).codes() == {"missing-root-document"}

    class Counting:
        def validate(self, tree: TreeView) -> Report:
            return Report(files=len(tree.entries), items=7)

    report = validate_tree(tree, P, Counting())
    assert report.ok and (report.files, report.items) == (1, 7)


# --- validate_changes ------------------------------------------------------------------


def _blob(oid: str, size: int = 3, mode: int = MODE_FILE) -> Entry:
    return Entry(mode=mode, size=size, oid=oid)


def test_changes_every_commit_is_checked_and_blobs_read_once() -> None:
    source = DictBlobs({"a" * 40: b"ok\n", "b" * 40: b"\xff\xfe", "c" * 40: b"fine\n"})
    changes = [
        Change(C1, "MEMORY.md", _blob("a" * 40)),
        Change(C1, "rightmemory.toml", _blob("c" * 40)),
        Change(C1, "insight_logs/bad.md", _blob("b" * 40)),
        Change(C2, "rightmemory.toml", None),  # deleted later: still refused
        Change(C2, "insight_logs/bad.md", _blob("b" * 40)),
        Change(C2, "PURSUITS.md", _blob("a" * 40)),
        Change(C2, "shared_views/a/view.md", Entry(mode=MODE_FILE, data=b"inline\n")),
    ]
    report = validate_changes(changes, source, P)
    assert [(p.code, p.path) for p in report.problems] == [
        ("not-utf8", "insight_logs/bad.md"),
        ("path-not-allowed", "rightmemory.toml"),
    ]
    assert all(f"(in commit {C1[:12]})" in p.message for p in report.problems)
    assert source.calls == [["a" * 40, "b" * 40]]
    assert report.files == 5


def test_changes_deletions_are_checked_by_name_only() -> None:
    changes = [
        Change(C1, ".git/config", None),
        Change(C1, "MEMORY.md", None),
        Change(C2, "insight_logs/a.md", None),
    ]
    report = validate_changes(changes, DictBlobs({}), P)
    assert [(p.code, p.path) for p in report.problems] == [("dotgit-path", ".git/config")]


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        (Entry(mode=MODE_SYMLINK, oid="d" * 40), "symlink"),
        (Entry(mode=MODE_GITLINK, oid="d" * 40), "gitlink"),
        (Entry(mode=MODE_EXECUTABLE, size=3, oid="d" * 40), "executable"),
        (Entry(mode=MODE_SPECIAL), "special-file"),
        (Entry(mode=MODE_FILE, size=5 * 1024 * 1024, oid="e" * 40), "too-large"),
    ],
)
def test_changes_entry_rules(entry: Entry, code: str) -> None:
    source = DictBlobs({"d" * 40: b"ok\n"})
    report = validate_changes([Change(C2, "insight_logs/a.md", entry)], source, P)
    assert report.codes() == {code}
    assert C2[:12] in report.problems[0].message
    assert "e" * 40 not in [oid for call in source.calls for oid in call]


def test_changes_unsafe_names_are_not_read() -> None:
    source = DictBlobs({})
    changes = [
        Change(C1, "insight_logs/\udcff.md", _blob("f" * 40)),
        Change(C1, "a\\b", _blob("f" * 40)),
    ]
    report = validate_changes(changes, source, P)
    assert report.codes() == {"unsafe-path"}
    assert [p.path for p in report.problems] == ["a\\\\b", "insight_logs/\\udcff.md"]
    assert source.calls == []


def test_changes_same_path_and_code_kept_from_first_commit() -> None:
    changes = [
        Change(C1, "dream_logs/a.md", Entry(mode=MODE_FILE, data=b"x")),
        Change(C2, "dream_logs/a.md", Entry(mode=MODE_EXECUTABLE, data=b"y")),
    ]
    report = validate_changes(changes, DictBlobs({}), P)
    assert [(p.code, p.message[-13:-1]) for p in report.problems] == [
        ("executable", C2[:12]),
        ("path-not-allowed", C1[:12]),
    ]


def test_changes_missing_blob_fails_closed() -> None:
    class Forgetful(DictBlobs):
        def read_many(self, oids: Sequence[str]) -> Mapping[str, bytes]:
            return {}

    with pytest.raises(KeyError):
        validate_changes([Change(C1, "MEMORY.md", _blob("a" * 40))], Forgetful({}), P)


def test_a_file_that_is_also_a_directory_is_a_duplicate_entry() -> None:
    report = _validate(_tree({"MEMORY.md/x": Entry(mode=MODE_FILE, data=b"x")}))
    assert report.codes() == {"duplicate-entry", "path-not-allowed"}
    [duplicate] = [p for p in report.problems if p.code == "duplicate-entry"]
    assert duplicate.path == "MEMORY.md" and "both a file and a directory" in duplicate.message


def test_tree_duplicates_from_a_listing() -> None:
    entries = {p: Entry(mode=MODE_FILE, size=len(b), data=b) for p, b in GOOD.items()}
    report = _validate(TreeView(Listing(entries.items(), ["MEMORY.md"])))
    assert [(p.code, p.path) for p in report.problems] == [("duplicate-entry", "MEMORY.md")]
    report = _validate(TreeView(entries, duplicates=["PURSUITS.md"]))
    assert [(p.code, p.path) for p in report.problems] == [("duplicate-entry", "PURSUITS.md")]


# --- per-commit tree shapes ------------------------------------------------------------


def _add(commit: str, path: str, **known: object) -> Change:
    return Change(commit, path, Entry(mode=MODE_FILE, data=b"x\n"), **known)  # type: ignore[arg-type]


def _delete(commit: str, path: str, **known: object) -> Change:
    return Change(commit, path, None, **known)  # type: ignore[arg-type]


def _shape_codes(report: Report) -> list[tuple[str, str | None, str]]:
    return [
        (p.code, p.path, p.message[-13:-1])
        for p in report.problems
        if p.code in ("case-collision", "duplicate-entry")
    ]


def test_a_collision_that_a_later_commit_removes_is_refused() -> None:
    changes = [
        _add(C1, "MEMORY_x.md"),
        _add(C1, "MEMORY_X.md"),
        _delete(C2, "MEMORY_X.md"),
    ]
    report = validate_changes(changes, DictBlobs({}), P)
    assert _shape_codes(report) == [
        ("case-collision", "MEMORY_X.md", C1[:12]),
        ("case-collision", "MEMORY_x.md", C1[:12]),
    ]
    assert "'MEMORY_X.md' collides with 'MEMORY_x.md'" in report.problems[0].message


def test_a_collision_with_an_untouched_base_path_is_refused() -> None:
    changes = [_add(C1, "MEMORY_X.md"), _delete(C2, "MEMORY_x.md")]
    report = validate_changes(changes, DictBlobs({}), P, base={"MEMORY_x.md", "MEMORY.md"})
    assert _shape_codes(report) == [("case-collision", "MEMORY_X.md", C1[:12])]
    assert validate_changes(changes, DictBlobs({}), P).ok  # without the base it is unseen


def test_a_rename_by_case_is_not_a_collision() -> None:
    changes = [
        _add(C1, "MEMORY_X.md", created=True),
        _delete(C1, "MEMORY_x.md"),
        _add(C2, "shared_views/A/view.md", created=True),
        _delete(C2, "shared_views/a/view.md"),
    ]
    base = {"MEMORY_x.md", "shared_views/a/view.md"}
    assert validate_changes(changes, DictBlobs({}), P, base=base).ok


def test_duplicate_entries_in_the_history() -> None:
    # A commit listing one path twice (both entries new) or as a file and a directory.
    changes = [
        _add(C1, "MEMORY_a.md", created=True),
        _add(C1, "MEMORY_a.md", created=True),
        _add(C2, "insight_logs", created=True),
        _add(C2, "insight_logs/x.md", created=True),
    ]
    report = validate_changes(changes, DictBlobs({}), P)
    assert ("duplicate-entry", "MEMORY_a.md", C1[:12]) in _shape_codes(report)
    assert ("duplicate-entry", "insight_logs/x.md", C2[:12]) in _shape_codes(report)
    # A second `MEMORY.md` next to the base's one is visible once parents are known.
    second = [_add(C1, "MEMORY.md", created=True, parents=(BASE,))]
    assert validate_changes(second, DictBlobs({}), P, base={"MEMORY.md"}).ok is False
    assert validate_changes(
        [_add(C1, "MEMORY.md", created=False, parents=(BASE,))],
        DictBlobs({}),
        P,
        base={"MEMORY.md"},
    ).ok


class Trees:
    """Commit trees outside the changes, by id; it records which it was asked for."""

    def __init__(self, trees: Mapping[str, Collection[str]]) -> None:
        self.trees = trees
        self.asked: list[str] = []

    def __call__(self, commit: str) -> Collection[str]:
        self.asked.append(commit)
        return self.trees[commit]


def test_merges_replay_the_first_parent_diff() -> None:
    # BASE -> C1 (adds x.md) and BASE -> C2 (adds X.md); C3 merges them: only C3 has both.
    a, b = "insight_logs/x.md", "insight_logs/X.md"
    changes = [
        _add(C1, a, created=True, parents=(BASE,)),
        _add(C2, b, created=True, parents=(BASE,)),
        _add(C3, b, created=True, parents=(C1, C2)),
        _add(C3, a, created=True, parents=(C1, C2), diff=1),
    ]
    trees = Trees({BASE: ["MEMORY.md"]})
    report = validate_changes(changes, DictBlobs({}), P, trees=trees)
    assert _shape_codes(report) == [("case-collision", b, C3[:12])]
    assert trees.asked == [BASE]  # loaded once, shared by both branches
    # Without parents the commits are read as one line: the collision is seen earlier.
    plain = [Change(c.commit, c.path, c.entry, c.diff) for c in changes]
    assert _shape_codes(validate_changes(plain, DictBlobs({}), P)) == [
        ("case-collision", b, C2[:12])
    ]


def test_an_everyday_merge_is_clean_with_or_without_parents() -> None:
    changes = [
        _add(C1, "MEMORY_a.md", created=True, parents=(BASE,)),
        _add(C2, "MEMORY_b.md", created=True, parents=(BASE,)),
        _add(C3, "MEMORY_b.md", created=True, parents=(C1, C2)),
        _add(C3, "MEMORY_a.md", created=True, parents=(C1, C2), diff=1),
    ]
    assert validate_changes(changes, DictBlobs({}), P, base={"MEMORY.md"}).ok
    plain = [Change(c.commit, c.path, c.entry, c.diff, created=c.created) for c in changes]
    assert validate_changes(plain, DictBlobs({}), P, base={"MEMORY.md"}).ok


def test_a_merge_equal_to_a_parent_adds_no_shape_and_its_child_looks_its_tree_up() -> None:
    # C2 merges BASE's sibling in with an empty diff against one parent: one diff listed.
    changes = [
        _add(C1, "MEMORY_x.md", created=True, parents=(BASE,)),
        _add(C2, "MEMORY_y.md", created=True, parents=(C1, "f" * 40)),
        _add(C3, "MEMORY_Y.md", created=True, parents=(C2,)),
    ]
    trees = Trees({BASE: [], C2: ["MEMORY_x.md", "MEMORY_y.md"]})
    report = validate_changes(changes, DictBlobs({}), P, trees=trees)
    assert _shape_codes(report) == [("case-collision", "MEMORY_Y.md", C3[:12])]
    assert trees.asked == [BASE, C2]


def test_commits_listed_before_their_parents_are_replayed_after_them() -> None:
    changes = [
        _add(C2, "MEMORY_X.md", created=True, parents=(C1,)),
        _add(C1, "MEMORY_x.md", created=True, parents=(BASE,)),
        _delete(C3, "MEMORY_x.md", parents=(C2,)),
    ]
    report = validate_changes(changes, DictBlobs({}), P, trees=Trees({BASE: []}))
    assert _shape_codes(report) == [("case-collision", "MEMORY_X.md", C2[:12])]


SHAPE_NAMES = st.lists(
    st.sampled_from(["a", "A", "b", "\u00e9", "E\u0301", "\u00df", "ss"]), min_size=1, max_size=2
).map(lambda parts: "insight_logs/" + "/".join(parts))


@given(st.data())
def test_per_commit_check_sees_exactly_the_colliding_intermediate_trees(
    data: st.DataObject,
) -> None:
    base = set(data.draw(st.lists(SHAPE_NAMES, max_size=4)))
    if case_collisions(base):
        base = set()
    present = set(base)
    changes: list[Change] = []
    collided = False
    parent = BASE
    trees = {BASE: frozenset(base)}
    for number in range(data.draw(st.integers(1, 5))):
        commit = f"{number + 1:040x}"
        deleted = (
            data.draw(st.lists(st.sampled_from(sorted(present)), unique=True)) if present else []
        )
        present -= set(deleted)
        added = data.draw(
            st.lists(
                SHAPE_NAMES.filter(lambda p, held=frozenset(present): p not in held), unique=True
            )
        )
        present |= set(added)
        for path in deleted:
            changes.append(_delete(commit, path, parents=(parent,), created=False))
        for path in added:
            changes.append(_add(commit, path, parents=(parent,), created=True))
        collided = collided or bool(case_collisions(present))
        parent = commit
        trees[commit] = frozenset(present)  # an empty commit's child looks its tree up
    plain = [Change(c.commit, c.path, c.entry, created=c.created) for c in changes]
    for listed, known in ((changes, {"trees": Trees(trees)}), (plain, {"base": base})):
        report = validate_changes(listed, DictBlobs({}), P, **known)  # type: ignore[arg-type]
        assert bool(_shape_codes(report)) == collided, (base, listed)


@given(st.data())
def test_a_history_that_creates_no_path_needs_no_parent_tree(data: st.DataObject) -> None:
    # Histories as git lists them (each diff against its parent; `created` is git's word,
    # or unknown), from a start that may hold clashes already, with merges. Whatever the
    # short cut skips, the full replay (`_replayed`) over the true trees reports the same.
    base = frozenset(data.draw(st.lists(SHAPE_NAMES, max_size=5)))
    trees: dict[str, frozenset[str]] = {BASE: base}
    tips = [BASE]
    changes: list[Change] = []
    for number in range(data.draw(st.integers(1, 4))):
        commit = f"{number + 1:040x}"
        parents = tuple(data.draw(st.lists(st.sampled_from(tips), min_size=1, max_size=2)))
        parents = tuple(dict.fromkeys(parents))
        tree = set(trees[parents[0]])
        if data.draw(st.booleans()):  # edits and deletions only
            touched = (
                data.draw(st.lists(st.sampled_from(sorted(tree)), unique=True)) if tree else []
            )
            for path in touched:
                if data.draw(st.booleans()):
                    tree.discard(path)
        else:
            touched = data.draw(st.lists(SHAPE_NAMES, unique=True))
            tree ^= {p for p in touched if data.draw(st.booleans())} | (set(touched) - tree)
        for diff, parent in enumerate(parents):
            before = trees[parent]
            for path in sorted((set(touched) | before | tree) if diff else touched):
                if path not in tree and path in before:
                    changes.append(_delete(commit, path, diff=diff, parents=parents))
                elif path in tree and (diff == 0 or path not in before):
                    created = data.draw(st.sampled_from([path not in before, None]))
                    changes.append(_add(commit, path, diff=diff, parents=parents, created=created))
        trees[commit] = frozenset(tree)
        tips.append(commit)
    short = Trees(trees)
    found = list(_shapes(changes, (), short, P))
    assert found == list(_replayed(changes, (), Trees(trees), P))
    if _creates_nothing(changes):
        assert found == [] and short.asked == []
    # A parent's tree unknown (no `trees`: the start taken to be `base`, right or not) or
    # the parents unnamed: the full replay, as before.
    plain = [Change(c.commit, c.path, c.entry, c.diff, created=c.created) for c in changes]
    for start in (base, frozenset()):
        assert list(_shapes(changes, start, None, P)) == list(_replayed(changes, start, None, P))
        assert list(_shapes(plain, start, None, P)) == list(_replayed(plain, start, None, P))
        assert list(_shapes(plain, start, short, P)) == list(_replayed(plain, start, short, P))


def test_a_root_commit_said_to_change_paths_is_still_replayed() -> None:
    # No parent to hold the paths: `created=False` there says nothing of a tree.
    changes = [
        _add(C1, "MEMORY_x.md", created=False, parents=()),
        _add(C1, "MEMORY_X.md", created=False, parents=()),
    ]
    report = validate_changes(changes, DictBlobs({}), P, trees=Trees({}))
    assert [code for code, _path, _at in _shape_codes(report)] == ["case-collision"] * 2


def test_without_trees_an_edit_is_replayed_from_the_base_given() -> None:
    # No `trees`: the start is taken to be `base` (empty here), where the edits are new.
    changes = [
        _add(C1, "MEMORY_x.md", created=False, parents=(BASE,)),
        _add(C1, "MEMORY_X.md", created=False, parents=(BASE,)),
    ]
    assert not validate_changes(changes, DictBlobs({}), P).ok
    trees = Trees({BASE: ["MEMORY_x.md", "MEMORY_X.md"]})
    assert validate_changes(changes, DictBlobs({}), P, trees=trees).ok  # git's word, no clash
    assert trees.asked == []
