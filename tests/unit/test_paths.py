"""Path, entry and byte rules, the allowlist, and the `.gitignore` it renders."""

from __future__ import annotations

import os
import subprocess
import unicodedata
from pathlib import Path

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from memsync.validators.collisions import (
    FoldedTree,
    _may_collide,
    case_collisions,
    duplicate_entries,
)
from memsync.validators.paths import (
    GUARDED_NAMES,
    check_entry,
    check_name,
    check_name_fully,
    check_text,
    guarded_names,
    is_dotgit,
    printable,
)
from memsync.validators.policy import DEFAULT_POLICY, SyncPolicy, gitignore_text
from memsync.validators.tree import (
    MODE_EXECUTABLE,
    MODE_FILE,
    MODE_GITLINK,
    MODE_SPECIAL,
    MODE_SYMLINK,
    Entry,
)

P = DEFAULT_POLICY
HEX32 = "0123456789abcdef" * 2
HEX64 = HEX32 * 2

ALLOWED = [
    ".gitignore",
    "MEMORY.md",
    "MEMORY_work.md",
    "MEMORY_.md",
    "PURSUITS.md",
    "PURSUIT_ship.md",
    "AGENT_GUIDANCE_INBOX.md",
    "corrections.md",
    "shared_views.toml",
    "shares.toml",
    "shared_views/team-a/view.md",
    "shared_views/team-a/retriever.md",
    "shared_views/team-a/recipe.toml",
    "shared_views/team-a/question.toml",
    "shared_views/team-a/.gitignore",
    "insight_logs/2026-01-02.md",
    "update_queue/lease.json",
    f"update_queue/candidates/{HEX32}.json",
    f"update_queue/recovery/update-batch-{HEX64}.json",
    f"update_records/update-batch-{HEX64}.json",
]
FORBIDDEN = [
    "rightmemory.toml",
    ".runtime/x",
    "shared_views/a/dist/MEMORY.md",
    "dream_logs/a.md",
    "PURSUIT_RULES.md",
    ".gitattributes",
]
NOT_ALLOWED = [
    "rightmemory.toml",
    ".runtime/x",
    "shared_views/a/dist/MEMORY.md",
    "dream_logs/a.md",
    "memory.md",
    "MEMORY_x.MD",
    "notes/MEMORY.md",
    "insight_logs/a/b.md",
    "insight_logs/a.txt",
    "update_queue/leaseXjson",
    "update_queue/candidates/ABCDEF0123456789abcdef0123456789.json",
    f"update_queue/candidates/{HEX32}0.json",
    f"update_records/{HEX64}.json",
]
GIT_DOTGIT_VECTORS = [
    ".git",
    ".GIT",
    ".Git",
    ".git.",
    ".git ",
    ".git. . ",
    "git~1",
    "GIT~1",
    ".git\u200c",
    ".gi\u200dt",
    "\u200c.git",
    ".g\u200ei\u200ft",
    "\u202a.git\u202e",
    ".git\u206a\u206f",
    ".git\ufeff",
    ".git::$INDEX_ALLOCATION",
    ".git:stream",
    "git~1::$INDEX_ALLOCATION",
]
NOT_DOTGIT = [".gitignore", ".gitattributes", "git", ".gi", "git~10", "git~2", "x.git", ".g\u00eft"]


@pytest.mark.parametrize("path", ALLOWED)
def test_allowed_paths_pass(path: str) -> None:
    assert check_name(path, P) is None


@pytest.mark.parametrize("path", NOT_ALLOWED)
def test_forbidden_paths_are_not_allowed(path: str) -> None:
    problem = check_name(path, P)
    assert problem is not None and problem.code == "path-not-allowed"
    assert problem.path == path and path in problem.message


@pytest.mark.parametrize("path", ["PURSUIT_RULES.md", "AGENT_CORRECTION_MEMORY_RULES.md"])
def test_legacy_reference_files(path: str) -> None:
    problem = check_name(path, P)
    assert problem is not None and problem.code == "legacy-reference"
    assert not P.allows(path)


# Names git's object check guards besides `.git` (t0060-path-utils.sh style vectors).
GUARDED_VECTORS = {
    ".gitmodules": [
        ".gitmodules",
        ".Gitmodules",
        ".gitmoduleS",
        ".GITMODULES",
        ".gitmodules ",
        ".gitmodules.",
        ".gitmodules . .",
        ".gitmodules:$DATA",
        ".gitmodules ::$INDEX_ALLOCATION",
        ".git\u200cmodules",
        "\u200c.gitmodules\ufeff",
        ".g\u202ai\u206ft\u200dmodules",
        "GITMOD~1",
        "gitmod~2",
        "GITMOD~3 .",
        "gitmod~4:x",
        "GI7EBA~1",
        "gi7eba~9",
        "GI7EB~10",
        "GI7EB~99",
        "GI7E~100",
        "GI7E~999",
        "~1000000",
        "~9999999",
        "a\\.gitmodules",
        "a\\GITMOD~1",
    ],
    ".gitattributes": [
        ".gitattributes",
        ".GITATTRIBUTES",
        ".gitattributes. ",
        ".git\u200dattributes",
        "GITATT~1",
        "gitatt~4",
        "GI7D29~1",
        "gi7d2~12",
        "a\\.GitAttributes",
    ],
    ".gitignore": [
        ".GITIGNORE",
        ".gitignore.",
        ".gitignore ",
        ".gitignore:x",
        ".git\u200cignore",
        "GITIGN~1",
        "gitign~3",
        "GI250A~1",
        "gi25~123",
        "a\\.gitignore",
    ],
    ".mailmap": [
        ".mailmap",
        ".MailMap",
        ".mailmap..",
        ".mail\u200cmap",
        "MAILMA~1",
        "maba30~1",
        "MABA3~99",
    ],
}
NOT_GUARDED = [
    "gitmodules",
    ".gitmodule",
    "..gitmodules",
    " .gitmodules",
    ".gitmodules x",
    ".gitmodules .x",
    ".gitmodules,:$DATA",
    "gitmod~5",
    "GITMOD~0",
    "GI7EBA~",
    "GI7EBA~0",
    "GI7EBA~~1",
    "GI7EBA~X",
    "Gx7EBA~1",
    "GI7EBX~1",
    "GI7EB~1",
    "GI7EB~01",
    "GI7EB~1X",
    "gi7eb\u00e1~1",
    ".git\u00e9modules",
    ".gitattribute",
    "gitignore",
    ".gitignores",
    "mailmap",
    ".mailmap2",
    "GI250A~0",
    "MEMORY.md",
]


@pytest.mark.parametrize(
    ("name", "component"), [(n, c) for n, cs in GUARDED_VECTORS.items() for c in cs]
)
def test_guarded_name_vectors(name: str, component: str) -> None:
    assert name in guarded_names(component)
    for template in ["{}", "{}/x.md", "shared_views/{}/view.md", "insight_logs/{}"]:
        problem = check_name(template.format(component), P)
        assert problem is not None and problem.code == "dotgit-path", (template, problem)


@pytest.mark.parametrize("component", NOT_GUARDED)
def test_not_guarded(component: str) -> None:
    assert guarded_names(component) == []


@pytest.mark.parametrize("path", [".gitignore", "shared_views/team/.gitignore"])
def test_gitignore_spelled_exactly_as_a_file_is_left_to_the_allowlist(path: str) -> None:
    assert check_name(path, P) is None
    problem = check_name(path.replace(".gitignore", "x/.gitignore"), P)
    assert problem is not None and problem.code == "path-not-allowed"


@pytest.mark.parametrize(
    "path",
    [
        ".gitignore/x",
        "shared_views/.gitignore/view.md",
        "shared_views/a/.gitignore/x",
        ".GITIGNORE",
        "shared_views/a/gitign~1",
        "shared_views/a/.git\u200cignore",
    ],
)
def test_gitignore_in_any_other_form_is_dotgit(path: str) -> None:
    problem = check_name(path, P)
    assert problem is not None and problem.code == "dotgit-path", problem
    assert "'.gitignore'" in problem.message and problem.message.isprintable()


def test_guarded_messages_name_what_git_guards() -> None:
    problem = check_name("shared_views/GITMOD~1/view.md", P)
    assert problem is not None
    assert problem.message.startswith("'shared_views/GITMOD~1/view.md' has the component")
    assert "treat as '.gitmodules'" in problem.message
    problem = check_name(".mailmap", P)
    assert problem is not None and "which is '.mailmap'" in problem.message


@pytest.mark.parametrize("component", GIT_DOTGIT_VECTORS)
@pytest.mark.parametrize("template", ["{}", "{}/config", "shared_views/{}/view.md"])
def test_dotgit_vectors(component: str, template: str) -> None:
    assert is_dotgit(component)
    problem = check_name(template.format(component), P)
    assert problem is not None and problem.code == "dotgit-path", problem


@pytest.mark.parametrize("component", NOT_DOTGIT)
def test_not_dotgit(component: str) -> None:
    assert not is_dotgit(component)


def test_backslash_separates_dotgit_like_windows() -> None:
    problem = check_name("shared_views\\.git\\config", P)
    assert problem is not None and problem.code == "dotgit-path"


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("", "empty"),
        ("/MEMORY.md", "absolute"),
        ("MEMORY.md/", "slash"),
        ("insight_logs//a.md", "segment"),
        ("./MEMORY.md", "segment"),
        ("insight_logs/../MEMORY.md", "segment"),
        ("..", "segment"),
        ("insight_logs\\a.md", "backslash"),
        ("MEMORY\x00.md", "control"),
        ("MEMORY\x7f.md", "control"),
        ("MEMORY\x85.md", "control"),
        ("MEMORY\n.md", "control"),
        ("MEMORY_\udcff.md", "UTF-8"),
        ("insight_logs/e\u0301.md", "NFC"),
        ("insight_logs/" + "a" * 253 + ".md", "255-byte"),
        ("insight_logs/" + "\u00e9" * 127 + ".md", "255-byte"),
        ("/".join(["shared_views"] + ["a" * 200] * 5 + ["view.md"]), "1024-byte"),
        ("insight_logs/CON", "reserved"),
        ("insight_logs/con.md", "reserved"),
        ("insight_logs/Aux.tar.md", "reserved"),
        ("insight_logs/nul .md", "reserved"),
        ("insight_logs/COM1.md", "reserved"),
        ("insight_logs/lpt9.md", "reserved"),
        ("insight_logs/COM\u00b9.md", "reserved"),
        ("insight_logs/LPT\u00b3", "reserved"),
        ("shared_views/prn/view.md", "reserved"),
        ("insight_logs/a.md.", "dot or a space"),
        ("insight_logs/a.md ", "dot or a space"),
        ("shared_views/a./view.md", "dot or a space"),
        ("insight_logs/a<b.md", "Windows forbids"),
        ("insight_logs/a:b.md", "Windows forbids"),
        ('insight_logs/a"b.md', "Windows forbids"),
        ("insight_logs/a|b.md", "Windows forbids"),
        ("insight_logs/a?b.md", "Windows forbids"),
        ("insight_logs/a*b.md", "Windows forbids"),
        ("MEMORY_a>b.md", "Windows forbids"),
    ],
)
def test_unsafe_paths(path: str, why: str) -> None:
    problem = check_name(path, P)
    assert problem is not None and problem.code == "unsafe-path", problem
    assert why in problem.message
    assert problem.path == printable(path)


@pytest.mark.parametrize(
    "path", ["insight_logs/COM0.md", "insight_logs/CONSOLE.md", "MEMORY_con.md"]
)
def test_names_that_only_look_reserved_pass(path: str) -> None:
    assert check_name(path, P) is None


def test_messages_escape_control_characters_and_surrogates() -> None:
    for path, shown in [("a\x1b[31m.md", "a\\x1b[31m.md"), ("\udcff.md", "\\udcff.md")]:
        problem = check_name(path, P)
        assert problem is not None
        assert problem.path == shown and shown in problem.message
        assert problem.message.isprintable()


def test_policy_caps_are_configurable() -> None:
    tight = SyncPolicy(max_path_bytes=20, max_component_bytes=9)
    assert check_name("MEMORY.md", tight) is None
    problem = check_name("MEMORY_abc.md", tight)
    assert problem is not None and "13 bytes long, over the 9-byte cap" in problem.message
    problem = check_name("shared_views/a/view.md", tight)
    assert problem is not None and "22 bytes long, over the 20-byte cap" in problem.message


# --- entries and bytes ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "code"),
    [
        (MODE_GITLINK, "gitlink"),
        (MODE_SYMLINK, "symlink"),
        (MODE_SPECIAL, "special-file"),
        (MODE_EXECUTABLE, "executable"),
        (0o040000, "special-file"),
    ],
)
def test_entry_modes(mode: int, code: str) -> None:
    assert [p.code for p in check_entry("MEMORY.md", Entry(mode=mode, size=3), P)] == [code]


def test_regular_entry_within_cap_passes() -> None:
    assert check_entry("MEMORY.md", Entry(mode=MODE_FILE, size=P.max_file_size), P) == []


def test_too_large_names_size_and_cap() -> None:
    policy = SyncPolicy(max_file_size=10)
    [problem] = check_entry("MEMORY.md", Entry(mode=MODE_FILE, data=b"x" * 11), policy)
    assert problem.code == "too-large"
    assert "11 bytes" in problem.message and "10-byte cap" in problem.message
    both = check_entry("MEMORY.md", Entry(mode=MODE_EXECUTABLE, size=11), policy)
    assert [p.code for p in both] == ["executable", "too-large"]


def test_check_text() -> None:
    assert check_text("MEMORY.md", "# héllo\n\x00ok\n".encode()) is None
    problem = check_text("MEMORY.md", b"# a\nb\n\xffc\n")
    assert problem is not None and problem.code == "not-utf8" and problem.line == 3
    truncated = check_text("MEMORY.md", "é".encode()[:1])
    assert truncated is not None and truncated.line == 1


# --- case collisions -------------------------------------------------------------------


def test_case_collisions() -> None:
    problems = case_collisions(
        [
            "MEMORY.md",
            "shared_views/A/view.md",
            "shared_views/a/view.md",
            "insight_logs/\u00e9.md",
            "insight_logs/E\u0301.md",
            "insight_logs/b.md",
        ]
    )
    assert [p.path for p in problems] == [
        "insight_logs/E\u0301.md",
        "insight_logs/\u00e9.md",
        "shared_views/A/view.md",
        "shared_views/a/view.md",
    ]
    assert all(p.code == "case-collision" for p in problems)
    assert "'shared_views/A/view.md' collides with 'shared_views/a/view.md'" in problems[2].message


def test_case_collision_on_a_directory_and_a_file() -> None:
    problems = case_collisions(["shared_views/A/view.md", "shared_views/a/recipe.toml", "x", "X/y"])
    assert [p.path for p in problems] == [
        "X/y",
        "shared_views/A/view.md",
        "shared_views/a/recipe.toml",
        "x",
    ]
    assert "'shared_views/A' and 'shared_views/a' are one entry" in problems[1].message


def test_no_collision_for_distinct_names() -> None:
    assert (
        case_collisions(["shared_views/a/view.md", "shared_views/a/recipe.toml", "MEMORY.md"]) == []
    )


# --- properties ------------------------------------------------------------------------

SAFE_CHARS = st.sampled_from("abcxyzABCXYZ0123456789-_\u00e9\u00fc\u00f1\u00c5\u4e2d")
SEGMENTS = st.text(SAFE_CHARS, min_size=1, max_size=30).filter(
    lambda s: check_name(f"insight_logs/{s}.md", P) is None
)
ALLOWED_NAMES = st.one_of(
    SEGMENTS.map(lambda s: f"MEMORY_{s}.md"),
    SEGMENTS.filter(lambda s: s != "RULES").map(lambda s: f"PURSUIT_{s}.md"),
    SEGMENTS.map(lambda s: f"insight_logs/{s}.md"),
    st.tuples(
        SEGMENTS,
        st.sampled_from(["view.md", "retriever.md", "recipe.toml", "question.toml", ".gitignore"]),
    ).map(lambda t: f"shared_views/{t[0]}/{t[1]}"),
    st.text("0123456789abcdef", min_size=32, max_size=32).map(
        lambda h: f"update_queue/candidates/{h}.json"
    ),
    st.text("0123456789abcdef", min_size=64, max_size=64).flatmap(
        lambda h: st.sampled_from(
            [
                f"update_queue/recovery/update-batch-{h}.json",
                f"update_records/update-batch-{h}.json",
            ]
        )
    ),
)
PLAIN_SEGMENTS = st.text(st.sampled_from("abcXYZ019-_"), min_size=1, max_size=12)
PATHS = st.lists(PLAIN_SEGMENTS, min_size=1, max_size=5)
CONTROL = st.one_of(
    st.characters(min_codepoint=0, max_codepoint=0x1F),
    st.just("\x7f"),
    st.characters(min_codepoint=0x80, max_codepoint=0x9F),
)
DOTGIT = st.one_of(
    st.sampled_from(GIT_DOTGIT_VECTORS),
    st.tuples(
        st.sampled_from([".git", "git~1"]).flatmap(
            lambda s: st.tuples(*[st.sampled_from([c.lower(), c.upper()]) for c in s])
        ),
        st.text(". ", max_size=3),
        st.sampled_from(["", "::$INDEX_ALLOCATION", ":x"]),
    ).map(lambda t: "".join(t[0]) + t[1] + t[2]),
    st.lists(
        st.sampled_from(["\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202e", "\ufeff"]),
        min_size=5,
        max_size=5,
    ).map(lambda xs: "".join(x + c for x, c in zip(xs, ".git", strict=False)) + xs[4]),
)
HFS_DROPS = ["", "\u200c", "\u200d", "\u200e", "\u200f", "\u202a", "\u202e", "\u206a", "\ufeff"]


def _any_case(text: str) -> st.SearchStrategy[str]:
    return st.tuples(*[st.sampled_from([c.lower(), c.upper()]) for c in text]).map("".join)


def _guarded_forms(name: str) -> st.SearchStrategy[str]:
    """Every spelling git's `is_ntfs_dot_generic` or `is_hfs_dot_generic` takes for `name`."""
    short = GUARDED_NAMES[name]
    tail = st.tuples(st.text(". ", max_size=3), st.sampled_from(["", ":$DATA", "::x"]))
    return st.one_of(
        st.tuples(_any_case(name), tail).map(lambda t: t[0] + t[1][0] + t[1][1]),
        st.tuples(_any_case(name[1:7]), st.sampled_from("1234"), tail).map(
            lambda t: f"{t[0]}~{t[1]}{t[2][0]}{t[2][1]}"
        ),
        st.integers(0, 6)
        .flatmap(
            lambda cut: st.tuples(
                _any_case(short[:cut]),
                st.sampled_from("123456789"),
                st.text("0123456789", min_size=6 - cut, max_size=6 - cut),
                tail,
            )
        )
        .map(lambda t: f"{t[0]}~{t[1]}{t[2]}{t[3][0]}{t[3][1]}"),
        st.tuples(
            _any_case(name), st.lists(st.sampled_from(HFS_DROPS), min_size=20, max_size=20)
        ).map(lambda t: "".join(d + c for d, c in zip(t[1], t[0], strict=False)) + t[1][-1]),
    )


GUARDED = (
    st.sampled_from(sorted(GUARDED_NAMES))
    .flatmap(_guarded_forms)
    .filter(lambda c: c != ".gitignore")
)
ANY_TEXT = st.text(
    st.one_of(
        st.characters(),
        st.characters(categories=["Cs"]),
        st.sampled_from('/\\.:<>"|?* ~\u200c\ufeff\x00\x7f\x85'),
    ),
    max_size=40,
)
KNOWN_CODES = {"unsafe-path", "dotgit-path", "legacy-reference", "path-not-allowed"}


@given(ALLOWED_NAMES)
def test_every_allowlisted_name_passes(path: str) -> None:
    assert check_name(path, P) is None


@given(PATHS, st.integers(min_value=0))
def test_dotdot_segment_is_unsafe(segments: list[str], at: int) -> None:
    segments.insert(at % (len(segments) + 1), "..")
    problem = check_name("/".join(segments), P)
    assert problem is not None and problem.code == "unsafe-path"


@given(PATHS, st.integers(min_value=0), st.integers(min_value=0))
def test_backslash_is_unsafe(segments: list[str], at: int, pos: int) -> None:
    index = at % len(segments)
    word = segments[index]
    cut = pos % (len(word) + 1)
    segments[index] = word[:cut] + "\\" + word[cut:]
    problem = check_name("/".join(segments), P)
    assert problem is not None and problem.code == "unsafe-path"


@given(st.sampled_from(ALLOWED), CONTROL, st.integers(min_value=0))
def test_control_character_is_unsafe(path: str, char: str, pos: int) -> None:
    cut = pos % (len(path) + 1)
    problem = check_name(path[:cut] + char + path[cut:], P)
    assert problem is not None and problem.code == "unsafe-path"
    assert problem.message.isprintable()


@given(PATHS, DOTGIT, st.integers(min_value=0))
@example(["a"], ".git ", 1)
def test_dotgit_component_is_refused(segments: list[str], dotgit: str, at: int) -> None:
    segments.insert(at % (len(segments) + 1), dotgit)
    problem = check_name("/".join(segments), P)
    assert problem is not None and problem.code == "dotgit-path", problem


@given(PATHS, GUARDED, st.integers(min_value=0))
@example(["a"], "GITMOD~1", 1)
@example(["a"], "~1000000", 0)
def test_guarded_component_is_refused(segments: list[str], component: str, at: int) -> None:
    assert guarded_names(component)
    segments.insert(at % (len(segments) + 1), component)
    problem = check_name("/".join(segments), P)
    assert problem is not None and problem.code == "dotgit-path", problem


@given(PATHS, st.integers(min_value=0))
def test_gitignore_as_a_directory_is_refused(segments: list[str], at: int) -> None:
    segments.insert(at % len(segments), ".gitignore")
    problem = check_name("/".join(segments), P)
    assert problem is not None and problem.code == "dotgit-path", problem


@given(ANY_TEXT)
@example("\udcff")
@example(".git\\..\\x")
def test_arbitrary_text_never_crashes(path: str) -> None:
    problem = check_name(path, P)
    assert problem is None or problem.code in KNOWN_CODES
    if problem is not None:
        assert problem.message.isprintable()
        assert problem.path == printable(path)


@given(st.text(st.sampled_from("aeiouAEIOU\u0301\u0308\u0303\u030a"), min_size=1, max_size=12))
def test_nfc_form_decides(word: str) -> None:
    assume(unicodedata.combining(word[0]) == 0)
    nfc = unicodedata.normalize("NFC", word)
    nfd = unicodedata.normalize("NFD", word)
    assert check_name(f"insight_logs/{nfc}.md", P) is None
    if nfd != nfc:
        problem = check_name(f"insight_logs/{nfd}.md", P)
        assert problem is not None and problem.code == "unsafe-path"
        assert "NFC" in problem.message


@given(st.lists(ANY_TEXT, max_size=8))
def test_case_collisions_report_each_path_once(paths: list[str]) -> None:
    problems = case_collisions(paths)
    shown = [p.path for p in problems]
    assert len(set(shown)) == len(shown)
    assert set(shown) <= {printable(p) for p in paths}
    assert problems == case_collisions(reversed(paths))


# --- the rendered .gitignore, checked by real git -----------------------------------


def _git(repo: Path, *args: str, stdin: bytes = b"") -> bytes:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": os.devnull,
        "LC_ALL": "C",
    }
    done = subprocess.run(
        ["git", *args], check=False, cwd=repo, input=stdin, capture_output=True, env=env, timeout=30
    )
    assert done.returncode in (0, 1), done.stderr
    return done.stdout


def test_gitignore_matches_the_allowlist_in_real_git(tmp_path: Path) -> None:
    text = gitignore_text()
    assert text.startswith("# Written by memsync")
    assert "\n*\n" in text
    _git(tmp_path, "init", "-q", ".")
    (tmp_path / ".gitignore").write_text(text)
    examples = ALLOWED + FORBIDDEN + NOT_ALLOWED + ["AGENT_CORRECTION_MEMORY_RULES.md"]
    out = _git(tmp_path, "check-ignore", "--no-index", "--stdin", "-z", stdin=_z(examples))
    ignored = set(out.decode().split("\0")) - {""}
    assert ignored.isdisjoint(ALLOWED)
    assert set(FORBIDDEN) <= ignored
    assert set(NOT_ALLOWED) <= ignored
    # With the files on disk, git descends into exactly the synchronized directories.
    for path in examples:
        if path != ".gitignore":
            (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / path).write_text("# example\n")
    listed = _git(tmp_path, "ls-files", "--others", "--exclude-standard", "-z")
    assert set(listed.decode().split("\0")) - {""} == set(ALLOWED)


def _z(paths: list[str]) -> bytes:
    return b"".join(p.encode() + b"\0" for p in paths)


FRAGMENTS = st.one_of(
    st.sampled_from(list("abcXYZ019_.-/~ \\:\u00e9\u200c")),
    st.sampled_from(
        [
            ".gitmodules",
            "GITMOD~1",
            "gi7eba~1",
            "~1000000",
            ".gitignore",
            "gitign~1",
            ".gitattributes",
            ".mailmap",
            "MEMORY.md",
            "MEMORY_",
            "shared_views/",
            "insight_logs/",
            "/view.md",
        ]
    ),
    GUARDED,
)


@given(st.lists(FRAGMENTS, max_size=12).map("".join))
@example("shared_views/a/.gitignore")
@example(".gitignore/x")
@example("GITMOD~1")
@example("shared_views/gi7eba~1/view.md")
def test_fast_path_agrees_with_the_full_check(path: str) -> None:
    assert check_name(path, DEFAULT_POLICY) == check_name_fully(path, DEFAULT_POLICY)


@given(
    st.lists(
        st.sampled_from(
            [
                "MEMORY.md",
                "memory.md",
                "MEMORY_a.md",
                "MEMORY_A.md",
                "shared_views/a/view.md",
                "shared_views/A/view.md",
                "shared_views/a",
                "insight_logs/x.md",
                "Insight_logs/y.md",
            ]
        ),
        unique=True,
    )
)
def test_collision_screen_never_hides_a_collision(paths: list[str]) -> None:
    if case_collisions(paths):
        assert _may_collide(sorted(paths))


def test_duplicate_entries() -> None:
    problems = duplicate_entries(["a", "a/x", "b", "c/d"], ["c/d", "c/d"])
    assert [(p.code, p.path) for p in problems] == [
        ("duplicate-entry", "c/d"),
        ("duplicate-entry", "a"),
    ]
    assert "'a' is both a file and a directory" in problems[1].message
    assert duplicate_entries(["a/x", "a/y", "ab"]) == []


def test_case_collisions_can_leave_a_file_and_directory_to_duplicate_entries() -> None:
    assert len(case_collisions(["a", "a/x"])) == 2
    assert case_collisions(["a", "a/x"], file_and_directory=False) == []
    problems = case_collisions(["x", "X/y", "x/z"], file_and_directory=False)
    assert [p.path for p in problems] == ["X/y", "x", "x/z"]


def test_folded_tree_counts_entries() -> None:
    tree = FoldedTree(["MEMORY_x.md", "shared_views/a/view.md"])
    assert "MEMORY_x.md" in tree and "MEMORY_X.md" not in tree and "shared_views" not in tree
    assert tree.clashes("MEMORY_x.md") == []
    tree.add("MEMORY_X.md")
    [collision] = tree.clashes("MEMORY_X.md")
    assert collision.code == "case-collision"
    assert collision.message.startswith("'MEMORY_X.md' collides with 'MEMORY_x.md'")
    tree.add("shared_views/A/view.md")
    [collision] = tree.clashes("shared_views/A/view.md")
    assert "'shared_views/A' and 'shared_views/a' are one entry" in collision.message
    copy = tree.copy()
    tree.remove("MEMORY_x.md")
    tree.remove("MEMORY_x.md")  # not held any more: ignored
    assert tree.clashes("MEMORY_X.md") == [] and copy.clashes("MEMORY_X.md") != []
    tree.add("MEMORY_X.md")
    assert [p.code for p in tree.clashes("MEMORY_X.md")] == ["duplicate-entry"]
    tree.add("MEMORY_X.md/x")
    assert {p.code for p in tree.clashes("MEMORY_X.md/x")} == {"duplicate-entry"}


SHAPE_PATHS = st.lists(
    st.sampled_from(["a", "A", "b", "\u00e9", "E\u0301", "\u00df", "ss", "a\u200c"]),
    min_size=1,
    max_size=3,
).map("/".join)


@given(st.lists(st.tuples(st.booleans(), SHAPE_PATHS), max_size=30))
def test_folded_tree_agrees_with_case_collisions(steps: list[tuple[bool, str]]) -> None:
    tree = FoldedTree()
    present: set[str] = set()
    for adding, path in steps:
        if adding and path not in present:
            tree.add(path)
            present.add(path)
        elif not adding:
            tree.remove(path)
            present.discard(path)
    clashes = {path: {p.code for p in tree.clashes(path)} for path in present}
    assert {printable(p) for p, codes in clashes.items() if codes} == {
        p.path for p in case_collisions(present)
    }
    assert {printable(p) for p, codes in clashes.items() if "case-collision" in codes} == {
        p.path for p in case_collisions(present, file_and_directory=False)
    }
