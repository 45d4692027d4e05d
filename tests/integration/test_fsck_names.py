"""git's object check and the gate agree, checked against the real git binary.

Two questions. Names: for every spelling tried, the `.git`, `.gitmodules`,
`.gitattributes`, `.gitignore` and `.mailmap` tests of `paths.py` say what `git fsck`
says (and the gate refuses all of them as `dotgit-path`). Trees: for every hostile tree
shape, either a fetch with object checking refuses it and `fsck_findings` gives a code,
or the fetch takes it and the gate refuses it with a code; both, every time.
"""

from __future__ import annotations

import itertools
import os
import re
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memsync.transports import gitparse as P
from memsync.transports.git import FetchOutcome, Git, GitBlobs
from memsync.validators.gate import validate_changes, validate_tree
from memsync.validators.paths import (
    GUARDED_NAMES,
    HFS_IGNORABLES,
    check_name,
    guarded_names,
    is_dotgit,
)
from memsync.validators.policy import DEFAULT_POLICY
from memsync.validators.problems import Report
from memsync.validators.tree import Change, TreeView
from tests.conftest import PROCESS_EXAMPLES
from tests.helpers import GIT_ENV, git

FILE, LINK, DIR = "100644", "120000", "40000"
# fsck message ids that name one of the guarded names, and which.
NAME_IDS = {
    "hasDotgit": ".git",
    "gitmodulesSymlink": ".gitmodules",
    "gitattributesSymlink": ".gitattributes",
    "gitignoreSymlink": ".gitignore",
    "mailmapSymlink": ".mailmap",
}


class Repo:
    """A bare repository whose objects are written raw (`hash-object --literally`)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        git(path.parent, "init", "-q", "--bare", "-b", "main", str(path))

    def blob(self, data: bytes) -> str:
        return git(self.path, "hash-object", "-w", "--stdin", input=data)

    def tree(self, entries: Sequence[tuple[str, str, str]], *, keep_order: bool = False) -> str:
        """A tree of (mode, name, object id) entries, sorted the way git sorts them."""
        if not keep_order:
            entries = sorted(entries, key=lambda e: _encode(e[1]) + (b"/" if e[0] == DIR else b""))
        body = b"".join(
            mode.encode() + b" " + _encode(name) + b"\0" + bytes.fromhex(oid)
            for mode, name, oid in entries
        )
        return git(
            self.path, "hash-object", "-t", "tree", "--literally", "-w", "--stdin", input=body
        )

    def commit(self, tree: str, *parents: str, message: str = "edit") -> str:
        args = [arg for parent in parents for arg in ("-p", parent)]
        return git(self.path, "commit-tree", *args, "-m", message, tree)

    def raw_commit(self, body: bytes) -> str:
        return git(
            self.path, "hash-object", "-t", "commit", "--literally", "-w", "--stdin", input=body
        )

    def publish(self, commit: str) -> None:
        git(self.path, "update-ref", "refs/heads/main", commit)

    def root_files(self) -> list[tuple[str, str, str]]:
        return [
            (FILE, "MEMORY.md", self.blob(b"# Memory\n")),
            (FILE, "PURSUITS.md", self.blob(b"# Pursuits\n")),
        ]


def _encode(name: str) -> bytes:
    return name.encode("utf-8", "surrogateescape")


# --- names ---------------------------------------------------------------------------


def _spellings() -> list[str]:
    """Spellings around each guarded name: the forms git guards and their near misses."""
    names: set[str] = set()
    needles = [".git", *GUARDED_NAMES]
    tails = ["", " ", ".", ". .", " .x", "x", ":$DATA", "::$INDEX_ALLOCATION", ",", "~", "\u200b"]
    for needle in needles:
        bare = needle[1:]
        short = GUARDED_NAMES.get(needle, "git~1")[:6]
        for spelled in {needle, needle.upper(), needle.title(), needle.swapcase()}:
            names |= {f"{head}{spelled}{tail}" for head in ("", " ", ".", "x") for tail in tails}
        for stem in {bare[:6], bare[:6].upper(), bare[:3], "git"}:
            names |= {f"{stem}~{d}{tail}" for d in "0123459" for tail in ("", " .", ":x", "0")}
        for cut in range(7):
            for first in "019":
                digits = "7" * (6 - cut)
                names |= {
                    f"{short[:cut]}~{first}{digits}",
                    f"{short[:cut].upper()}~{first}{digits}",
                }
                names.add(f"{short[:cut]}x~{first}{digits}"[:8])
        for at in range(len(needle) + 1):
            for char in ("\u200c", "\u202e", "\u206f", "\ufeff", "\u200b", "\u00e9", "I"):
                names.add(needle[:at] + char + needle[at:])
        names |= {f"a\\{needle}", f"{needle}\\a", f"a\\{short}~1"}
    names.discard("")
    return sorted(names)


def _git_guards(tmp_path: Path, names: Sequence[str]) -> dict[str, set[str]]:
    """What `git fsck` says of each name used as a symlink's name: which names it guards."""
    work = tmp_path / f"names-{next(_RUNS)}"
    work.mkdir()
    repo = Repo(work / "names.git")
    target = bytes.fromhex(repo.blob(b"MEMORY.md"))
    files = []
    for number, name in enumerate(names):
        file = work / f"tree-{number}"
        file.write_bytes(LINK.encode() + b" " + _encode(name) + b"\0" + target)
        files.append(str(file))
    paths = "\n".join(files).encode() + b"\n"
    hashed = git(
        repo.path, "hash-object", "-t", "tree", "--literally", "-w", "--stdin-paths", input=paths
    )
    by_oid = dict(zip(hashed.split(), names, strict=True))
    done = subprocess.run(
        ["git", "fsck", "--no-dangling", "--no-progress"],
        cwd=repo.path,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        check=False,
    )
    found: dict[str, set[str]] = {name: set() for name in names}
    for match in re.finditer(r"in tree ([0-9a-f]{40}): (\w+):", done.stderr.decode()):
        if match.group(2) in NAME_IDS:
            found[by_oid[match.group(1)]].add(NAME_IDS[match.group(2)])
    return found


_RUNS = itertools.count()


def _ours(name: str) -> set[str]:
    return set(guarded_names(name)) | ({".git"} if is_dotgit(name) else set())


def _assert_agree(found: dict[str, set[str]]) -> None:
    for name, git_says in found.items():
        ours = _ours(name)
        if "\\" in name:  # git splits on backslashes for `.git` and `.gitmodules` only
            assert git_says <= ours, (name, git_says, ours)
        else:
            assert git_says == ours, (name, git_says, ours)
        if ours:
            problem = check_name(f"shared_views/{name}/view.md", DEFAULT_POLICY)
            assert problem is not None and problem.code == "dotgit-path", (name, problem)


def test_name_rules_say_what_git_fsck_says(tmp_path: Path) -> None:
    names = _spellings()
    found = _git_guards(tmp_path, names)
    guarded = [name for name, says in found.items() if says]
    assert len(guarded) > 150 and len(names) - len(guarded) > 150  # both sides well covered
    _assert_agree(found)


IGNORABLE = st.sampled_from(sorted(chr(c) for c in HFS_IGNORABLES))
NAME_CHARS = st.one_of(
    st.sampled_from(list(".gitGITmodulesattributesignoremailmapMAP~0123456789 :\\x7")),
    IGNORABLE,
    st.sampled_from(["\u00e9", "\u200b", "\u0130", "\u212a"]),
)
NEAR_NAMES = st.one_of(
    st.sampled_from([".git", *GUARDED_NAMES])
    .flatmap(lambda n: st.tuples(st.just(n), st.lists(NAME_CHARS, max_size=3), st.integers(0, 20)))
    .map(lambda t: t[0][: t[2] % (len(t[0]) + 1)] + "".join(t[1]) + t[0][t[2] % (len(t[0]) + 1) :]),
    st.text(NAME_CHARS, min_size=1, max_size=14),
)


@settings(PROCESS_EXAMPLES, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(NEAR_NAMES, min_size=1, max_size=60, unique=True))
def test_name_rules_agree_with_git_on_generated_names(tmp_path: Path, names: list[str]) -> None:
    _assert_agree(_git_guards(tmp_path, names))


# --- hostile trees ---------------------------------------------------------------------


@dataclass(frozen=True)
class Shape:
    """A hostile tree: the entries it adds to a valid root, the gate's codes, fsck's code."""

    name: str
    entries: Callable[[Repo], list[tuple[str, str, str]]]
    gate: frozenset[str]
    fsck: str | None  # None: git's fetch takes it; the gate alone must refuse it


def _dir(repo: Repo, name: str, entries: list[tuple[str, str, str]]) -> tuple[str, str, str]:
    return (DIR, name, repo.tree(entries))


def _x(repo: Repo) -> list[tuple[str, str, str]]:
    return [(FILE, "x.md", repo.blob(b"# x\n"))]


SHAPES = [
    Shape(
        "gitmodules-short-name-dir",
        lambda r: [_dir(r, "GITMOD~1", _x(r))],
        frozenset({"dotgit-path"}),
        "dotgit-path",
    ),
    Shape(
        "gitmodules-symlink",
        lambda r: [(LINK, ".gitmodules", r.blob(b"MEMORY.md"))],
        frozenset({"dotgit-path", "symlink"}),
        "symlink",
    ),
    Shape(
        "gitattributes-dir-at-depth",
        lambda r: [_dir(r, "shared_views", [_dir(r, "a", [_dir(r, ".GITATTRIBUTES", _x(r))])])],
        frozenset({"dotgit-path"}),
        "dotgit-path",
    ),
    Shape(
        "hfs-gitmodules-file",
        lambda r: [(FILE, ".git\u200cmodules", r.blob(b"# x\n"))],
        frozenset({"dotgit-path"}),
        None,
    ),
    Shape(
        "hfs-gitmodules-dir",
        lambda r: [_dir(r, ".git\u200cmodules", _x(r))],
        frozenset({"dotgit-path"}),
        "dotgit-path",
    ),
    Shape(
        "gitattributes-symlink",
        lambda r: [(LINK, ".gitattributes", r.blob(b"x"))],
        frozenset({"dotgit-path", "symlink"}),
        None,
    ),
    Shape(
        "dotgit-dir", lambda r: [_dir(r, ".git", _x(r))], frozenset({"dotgit-path"}), "dotgit-path"
    ),
    Shape(
        "gitignore-short-name",
        lambda r: [(FILE, "gitign~1", r.blob(b"*\n"))],
        frozenset({"dotgit-path"}),
        None,
    ),
    Shape(
        "gitignore-dir-in-a-view",
        lambda r: [_dir(r, "shared_views", [_dir(r, "a", [_dir(r, ".gitignore", _x(r))])])],
        frozenset({"dotgit-path"}),
        None,
    ),
    Shape(
        "mailmap",
        lambda r: [(FILE, ".mailmap", r.blob(b"a <a@b>\n"))],
        frozenset({"dotgit-path"}),
        None,
    ),
    Shape(
        "fallback-short-name",
        lambda r: [(FILE, "~1000000", r.blob(b"x"))],
        frozenset({"dotgit-path"}),
        None,
    ),
    Shape(
        "duplicate-entries",
        lambda r: [
            (FILE, "MEMORY_a.md", r.blob(b"# a\n")),
            (FILE, "MEMORY_a.md", r.blob(b"# b\n")),
        ],
        frozenset({"duplicate-entry"}),
        "duplicate-entry",
    ),
    Shape(
        "file-and-directory-of-one-name",
        lambda r: [(FILE, "MEMORY_a.md", r.blob(b"# a\n")), _dir(r, "MEMORY_a.md", _x(r))],
        frozenset({"duplicate-entry"}),
        "duplicate-entry",
    ),
]


def _scene(tmp_path: Path, shape: Shape) -> tuple[Repo, str, str]:
    """An upstream whose main is a valid root commit, then a commit adding `shape`."""
    repo = Repo(tmp_path / "up.git")
    files = repo.root_files()
    base = repo.commit(repo.tree(files), message="base")
    hostile = repo.commit(repo.tree(files + shape.entries(repo)), base, message=shape.name)
    repo.publish(hostile)
    return repo, base, hostile


def _changes_with_parents(box: Git, include: str, exclude: str) -> list[Change]:
    """Every change with its commit's parents: the box's own log names them."""
    return box.changes(include, exclude)[1]


def _gate_codes(box: Git, base: str, head: str) -> tuple[Report, Report, Report]:
    _count, changes = box.changes(head, base)
    plain = validate_changes(changes, GitBlobs(box), DEFAULT_POLICY, base=box.ls_tree(base))
    exact = validate_changes(
        _changes_with_parents(box, head, base), GitBlobs(box), DEFAULT_POLICY, trees=box.ls_tree
    )
    return plain, exact, validate_tree(box.tree_view(head), DEFAULT_POLICY)


@pytest.mark.parametrize("shape", SHAPES, ids=[s.name for s in SHAPES])
def test_every_hostile_tree_is_refused_with_a_code(tmp_path: Path, shape: Shape) -> None:
    repo, base, hostile = _scene(tmp_path, shape)
    plain, exact, tree = _gate_codes(Git(repo.path), base, hostile)
    for report in (plain, exact, tree):
        assert shape.gate <= report.codes(), (shape.name, report.problems)
    peer = tmp_path / "peer"
    git(tmp_path, "init", "-q", str(peer))
    box = Git(peer)
    outcomes = []
    for _attempt in range(3):
        outcome, detail = box.fetch(str(repo.path), "main", "refs/remotes/up/main")
        outcomes.append(outcome)
        if outcome is FetchOutcome.BAD_OBJECTS:
            assert shape.fsck in {code for code, _ in P.fsck_findings(detail)}, detail
        else:
            # What the fetch took (or stored before refusing: git checks `.gitmodules` and
            # `.gitattributes` blobs after writing the pack, so a retry finds every object
            # present and fetches nothing) the gate refuses, on every try.
            assert outcome is FetchOutcome.OK, detail
            assert box.rev_parse("refs/remotes/up/main") == hostile
            again = _gate_codes(box, base, hostile)
            assert all(shape.gate <= report.codes() for report in again)
    assert (outcomes[0] is FetchOutcome.BAD_OBJECTS) == (shape.fsck is not None)


def test_a_second_entry_beside_an_older_one_is_seen_through_parents(tmp_path: Path) -> None:
    # The diff shows the second `MEMORY.md` as added while the first is unchanged.
    repo = Repo(tmp_path / "up.git")
    files = repo.root_files()
    base = repo.commit(repo.tree(files), message="base")
    second = (FILE, "MEMORY.md", repo.blob(b"# Memory, again\n"))
    hostile = repo.commit(repo.tree([*files, second]), base, message="dup")
    plain, exact, tree = _gate_codes(Git(repo.path), base, hostile)
    assert "duplicate-entry" in exact.codes() and "duplicate-entry" in tree.codes()
    assert "duplicate-entry" in plain.codes()  # the box's log names parents


def test_duplicate_directories_show_in_a_listing_with_trees(tmp_path: Path) -> None:
    # Two `shared_views` entries with different contents: `ls-tree -r` merges them into one
    # directory, `ls-tree -r -t` lists the directory twice. git's fetch refuses it anyway.
    repo = Repo(tmp_path / "up.git")
    view = [(FILE, "view.md", repo.blob(b"# v\n"))]
    views = [_dir(repo, "shared_views", [_dir(repo, name, view)]) for name in ("a", "b")]
    head = repo.commit(repo.tree(repo.root_files() + views))
    repo.publish(head)
    box = Git(repo.path)
    # The box lists with `-t`: the directory listed twice is seen.
    assert "duplicate-entry" in validate_tree(box.tree_view(head), DEFAULT_POLICY).codes()
    raw = box.run("ls-tree", "-r", "-t", "-z", "-l", "--full-tree", head).stdout
    listing = P.parse_ls_tree(raw)
    assert sorted(listing) == [
        "MEMORY.md",
        "PURSUITS.md",
        *(f"shared_views/{n}/view.md" for n in "ab"),
    ]
    report = validate_tree(TreeView(listing, GitBlobs(box)), DEFAULT_POLICY)
    assert [(p.code, p.path) for p in report.problems] == [("duplicate-entry", "shared_views")]
    peer = tmp_path / "peer"
    git(tmp_path, "init", "-q", str(peer))
    for _attempt in range(2):
        outcome, detail = Git(peer).fetch(str(repo.path), "main", "refs/remotes/up/main")
        assert outcome is FetchOutcome.BAD_OBJECTS, detail
        assert [code for code, _ in P.fsck_findings(detail)] == ["duplicate-entry"]


@pytest.mark.parametrize(
    ("name", "build"),
    [
        ("unsorted", lambda r: r.commit(r.tree(r.root_files()[::-1], keep_order=True))),
        (
            "zero-padded-mode",
            lambda r: r.commit(r.tree([("0" + m, n, o) for m, n, o in r.root_files()])),
        ),
        (
            "no-committer",
            lambda r: r.raw_commit(
                f"tree {r.tree(r.root_files())}\nauthor a <a@b> 1 +0000\n\nx\n".encode()
            ),
        ),
    ],
)
def test_refusals_that_are_not_about_names_are_malformed_objects(
    tmp_path: Path, name: str, build: Callable[[Repo], str]
) -> None:
    repo = Repo(tmp_path / "up.git")
    repo.publish(build(repo))
    peer = tmp_path / "peer"
    git(tmp_path, "init", "-q", str(peer))
    outcome, detail = Git(peer).fetch(str(repo.path), "main", "refs/remotes/up/main")
    assert outcome is FetchOutcome.BAD_OBJECTS, detail
    assert [code for code, _ in P.fsck_findings(detail)] == ["malformed-object"], detail


def test_an_upstream_that_cannot_pack_its_own_objects_is_bad_objects(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "up.git")
    repo.publish(repo.commit(repo.tree([*repo.root_files(), (FILE, "", repo.blob(b"x"))])))
    peer = tmp_path / "peer"
    git(tmp_path, "init", "-q", str(peer))
    outcome, detail = Git(peer).fetch(str(repo.path), "main", "refs/remotes/up/main")
    assert outcome is FetchOutcome.BAD_OBJECTS, detail
    assert P.fsck_findings(detail)[0][0] == "malformed-object"


# --- case collisions inside the history -------------------------------------------------


def test_a_case_collision_only_inside_the_history_is_refused(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "up.git")
    files = repo.root_files()
    x = repo.blob(b"# x\n")
    base = repo.commit(repo.tree(files), message="base")
    both = repo.commit(
        repo.tree([*files, (FILE, "MEMORY_x.md", x), (FILE, "MEMORY_X.md", x)]), base
    )
    one = repo.commit(repo.tree([*files, (FILE, "MEMORY_x.md", x)]), both)
    box = Git(repo.path)
    assert validate_tree(box.tree_view(one), DEFAULT_POLICY).ok  # the final tree is fine
    plain, exact, _tree = _gate_codes(box, base, one)
    for report in (plain, exact):
        assert {(p.code, p.path) for p in report.problems} == {
            ("case-collision", "MEMORY_X.md"),
            ("case-collision", "MEMORY_x.md"),
        }
        assert all(both[:12] in p.message for p in report.problems)


def test_a_collision_with_a_path_the_commit_did_not_touch(tmp_path: Path) -> None:
    repo = Repo(tmp_path / "up.git")
    files = [*repo.root_files(), (FILE, "MEMORY_x.md", repo.blob(b"# x\n"))]
    base = repo.commit(repo.tree(files), message="base")
    added = repo.commit(repo.tree([*files, (FILE, "MEMORY_X.md", repo.blob(b"# X\n"))]), base)
    gone = repo.commit(repo.tree([*files[:2], (FILE, "MEMORY_X.md", repo.blob(b"# X\n"))]), added)
    box = Git(repo.path)
    plain, exact, tree = _gate_codes(box, base, gone)
    assert tree.ok
    for report in (plain, exact):
        assert [(p.code, p.path) for p in report.problems] == [("case-collision", "MEMORY_X.md")]
        assert added[:12] in report.problems[0].message


def test_merges_are_checked_by_their_first_parent_diff(tmp_path: Path) -> None:
    # Two branches from one base each add one spelling; only their merge holds both.
    repo = Repo(tmp_path / "up.git")
    files = repo.root_files()
    lower = (FILE, "MEMORY_x.md", repo.blob(b"# x\n"))
    upper = (FILE, "MEMORY_X.md", repo.blob(b"# X\n"))
    other = (FILE, "MEMORY_y.md", repo.blob(b"# y\n"))
    base = repo.commit(repo.tree(files), message="base")
    left = repo.commit(repo.tree([*files, lower]), base, message="left")
    right = repo.commit(repo.tree([*files, upper]), base, message="right")
    fine = repo.commit(repo.tree([*files, other]), base, message="fine")
    merged = repo.commit(repo.tree([*files, lower, upper]), left, right, message="merge")
    box = Git(repo.path)
    exact = validate_changes(
        _changes_with_parents(box, merged, base), GitBlobs(box), DEFAULT_POLICY, trees=box.ls_tree
    )
    assert [(p.code, p.path) for p in exact.problems] == [("case-collision", "MEMORY_X.md")]
    assert merged[:12] in exact.problems[0].message
    # An everyday merge (each side adds its own file) is clean either way.
    clean = repo.commit(repo.tree([*files, lower, other]), left, fine, message="merge")
    _count, changes = box.changes(clean, base)
    assert validate_changes(changes, GitBlobs(box), DEFAULT_POLICY, base=box.ls_tree(base)).ok
    assert validate_changes(
        _changes_with_parents(box, clean, base), GitBlobs(box), DEFAULT_POLICY, trees=box.ls_tree
    ).ok
