"""Path, entry and byte rules, the allowlist, and the `.gitignore` it renders."""

from __future__ import annotations

import os
import subprocess
import unicodedata
from pathlib import Path

import pytest
from hypothesis import assume, example, given
from hypothesis import strategies as st

from memsync.validators.paths import (
    _may_collide,
    case_collisions,
    check_entry,
    check_name,
    check_name_fully,
    check_text,
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
    ".gitattributes",
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


@given(st.text(alphabet=st.sampled_from("abcXYZ019_.-/~ \\:\u00e9\u200c"), max_size=40))
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
