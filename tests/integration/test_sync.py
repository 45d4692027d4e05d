"""The sync gate against real git: bare upstreams in tmp_path, real commits, real merges."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from memsync.roots.layout import CANDIDATE_REFS, RootLayout
from tests.conftest import Member, Team
from tests.helpers import commit, git, push, snapshot, write

MEMORY_V2 = "# User Context\n\nAlice prefers tabs.\n"


def leftovers(member: Member) -> list[str]:
    """Anything of ours a settled cycle must not leave behind."""
    found = []
    refs = git(member.path, "for-each-ref", "--format=%(refname)", CANDIDATE_REFS)
    found += [r for r in refs.splitlines() if r]
    worktrees = git(member.path, "worktree", "list", "--porcelain")
    found += [w for w in worktrees.splitlines() if w.startswith("worktree ")][1:]
    wt_dir = member.state_dir / "roots" / member.name / "worktrees"
    if wt_dir.is_dir():
        found += [str(p) for p in wt_dir.iterdir()]
    return found


def test_commits_flow_both_ways(team: Team) -> None:
    alice, bob = team.alice, team.bob
    commit(alice.path, {"MEMORY.md": MEMORY_V2}, "alice remembers")
    pushed = alice.sync()
    assert pushed.status == "pushed", pushed.message
    assert git(team.upstream, "rev-parse", "main") == pushed.head

    got = bob.sync()
    assert got.status == "synced", got.message
    assert (bob.path / "MEMORY.md").read_text() == MEMORY_V2
    assert git(bob.path, "rev-parse", "HEAD") == pushed.head
    assert git(bob.path, "status", "--porcelain") == ""
    assert got.files == ("MEMORY.md",)

    commit(bob.path, {"MEMORY_tools.md": "# Tools\n"}, "bob adds tools")
    assert bob.sync().status == "pushed"
    back = alice.sync()
    assert back.status == "synced"
    assert (alice.path / "MEMORY_tools.md").read_text() == "# Tools\n"
    assert alice.sync().status == "current"
    assert leftovers(alice) == [] and leftovers(bob) == []


def test_concurrent_commits_merge_with_parents_local_then_upstream(team: Team) -> None:
    alice, bob = team.alice, team.bob
    commit(alice.path, {"MEMORY_a.md": "# A\n"}, "alice")
    assert alice.sync().status == "pushed"
    local = commit(bob.path, {"MEMORY_b.md": "# B\n"}, "bob")
    upstream = git(team.upstream, "rev-parse", "main")

    result = bob.sync()
    assert result.status == "pushed", result.message
    head = git(bob.path, "rev-parse", "HEAD")
    assert git(bob.path, "rev-list", "--parents", "-n1", head).split()[1:] == [local, upstream]
    assert git(team.upstream, "rev-parse", "main") == head
    assert (bob.path / "MEMORY_a.md").exists() and (bob.path / "MEMORY_b.md").exists()
    assert git(bob.path, "status", "--porcelain") == ""
    assert leftovers(bob) == []


def test_no_push_admits_but_does_not_push(team: Team) -> None:
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    before = git(team.upstream, "rev-parse", "main")
    result = team.alice.sync(no_push=True)
    assert result.status == "current"
    assert "not pushed" in result.message
    assert git(team.upstream, "rev-parse", "main") == before


def test_dry_run_publishes_nothing(team: Team) -> None:
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    team.alice.sync()
    before = snapshot(team.bob.path)
    result = team.bob.sync(dry_run=True)
    assert result.dry_run and result.status == "synced"
    assert snapshot(team.bob.path) == before
    assert leftovers(team.bob) == []


def _push_raw(
    team: Team, files: dict[str, bytes | str | None], message: str = "raw", mode: str | None = None
) -> str:
    """Alice commits with plain git and pushes past memsync: a hostile or careless peer."""
    sha = commit(team.alice.path, files, message)
    if mode is not None:
        path = next(iter(files))
        git(team.alice.path, "update-index", f"--chmod={mode}", path)
        git(team.alice.path, "commit", "-q", "--amend", "--no-edit")
        sha = git(team.alice.path, "rev-parse", "HEAD")
    push(team.alice.path)
    return sha


def _refused(team: Team, status: str, code: str) -> None:
    bob = team.bob
    before = snapshot(bob.path)
    result = bob.sync()
    assert result.status == status, result.message
    assert code in {p.code for p in result.problems}, result.problems
    assert snapshot(bob.path) == before
    assert leftovers(bob) == []
    if status == "rejected" and result.rescue_ref:
        assert git(bob.path, "rev-parse", result.rescue_ref) == git(
            team.upstream, "rev-parse", "main"
        )


def test_forbidden_path_rejected(team: Team) -> None:
    _push_raw(team, {"rightmemory.toml": "x = 1\n"})
    _refused(team, "rejected", "path-not-allowed")


def test_forbidden_path_added_then_removed_is_still_rejected(team: Team) -> None:
    _push_raw(team, {"notes/secret.md": "# s\n"}, "add")
    _push_raw(team, {"notes/secret.md": None}, "remove")
    _refused(team, "rejected", "path-not-allowed")


def test_symlink_rejected(team: Team) -> None:
    os.symlink("/etc/passwd", team.alice.path / "MEMORY_link.md")
    git(team.alice.path, "add", "-f", "MEMORY_link.md")
    git(team.alice.path, "commit", "-q", "-m", "link")
    push(team.alice.path)
    _refused(team, "rejected", "symlink")


def test_gitlink_rejected(team: Team) -> None:
    sha = git(team.alice.path, "rev-parse", "HEAD")
    git(team.alice.path, "update-index", "--add", "--cacheinfo", f"160000,{sha},MEMORY_sub.md")
    git(team.alice.path, "commit", "-q", "-m", "gitlink")
    push(team.alice.path)
    _refused(team, "rejected", "gitlink")


def test_a_roots_diff_config_never_hides_a_gitlink(team: Team) -> None:
    # `git log` obeys diff.ignoreSubmodules; the gate's history read must not.
    git(team.bob.path, "config", "diff.ignoreSubmodules", "all")
    _push_raw(team, {"MEMORY_a.md": "# A\n"})  # a sync first: the next listing is derived
    assert team.bob.sync().status == "synced"  # from this one and the log's diffs
    sha = git(team.alice.path, "rev-parse", "HEAD")
    git(team.alice.path, "update-index", "--add", "--cacheinfo", f"160000,{sha},MEMORY_sub.md")
    git(team.alice.path, "commit", "-q", "-m", "gitlink")
    push(team.alice.path)
    _refused(team, "rejected", "gitlink")


@pytest.mark.parametrize("diff_merges", ["first-parent", "combined"])
def test_a_roots_log_config_never_hides_a_collision_made_by_a_merge(
    team: Team, diff_merges: str
) -> None:
    """Each side is clean; only the merge's tree holds both names. With `log -m` read as
    first-parent, the merge would look like its first parent's tree (or, combined, not
    parse at all)."""
    git(team.bob.path, "config", "log.diffMerges", diff_merges)
    alice = team.alice.path
    base = git(alice, "rev-parse", "HEAD")
    commit(alice, {"MEMORY_x.md": "# a\n"}, "one side")
    git(alice, "checkout", "-q", "-b", "side", base)
    commit(alice, {"memory_X.md": "# b\n"}, "other side")
    git(alice, "checkout", "-q", "main")
    git(alice, "merge", "-q", "--no-edit", "side")
    push(alice)
    _refused(team, "rejected", "case-collision")


def test_executable_rejected(team: Team) -> None:
    _push_raw(team, {"MEMORY_run.md": "# run\n"}, mode="+x")
    _refused(team, "rejected", "executable")


def test_oversized_file_rejected(team: Team) -> None:
    _push_raw(team, {"MEMORY_big.md": "x" * (4 * 1024 * 1024 + 1)})
    _refused(team, "rejected", "too-large")


def test_non_utf8_markdown_rejected(team: Team) -> None:
    _push_raw(team, {"MEMORY_bad.md": b"# bad \xff\xfe\n"})
    _refused(team, "rejected", "not-utf8")


def test_case_collision_rejected(team: Team) -> None:
    _push_raw(team, {"MEMORY_x.md": "# a\n", "memory_X.md": "# b\n"})
    result = team.bob.sync()
    assert result.status == "rejected"


def test_case_collision_of_allowed_names_rejected(team: Team) -> None:
    _push_raw(team, {"shared_views/Auth/view.md": "# a\n", "shared_views/auth/view.md": "# b\n"})
    _refused(team, "rejected", "case-collision")


def test_dotgit_equivalent_name_rejected(team: Team) -> None:
    root = team.alice.path
    blob = git(root, "hash-object", "-w", "--stdin", input=b"[core]\n")
    sub = git(root, "mktree", input=f"100644 blob {blob}\tconfig\n".encode())
    head_tree = git(root, "ls-tree", "HEAD")
    tree = git(root, "mktree", input=(head_tree + f"\n040000 tree {sub}\t.GIT\n").encode())
    evil = git(root, "commit-tree", "-p", "HEAD", "-m", "evil", tree)
    git(root, "push", "-q", "origin", f"{evil}:refs/heads/main")
    _refused(team, "rejected", "dotgit-path")


def test_missing_root_document_rejected(team: Team) -> None:
    _push_raw(team, {"PURSUITS.md": None})
    _refused(team, "rejected", "missing-root-document")


def test_a_rewind_is_refused_even_when_state_json_came_back_empty(team: Team) -> None:
    """state.json is rewritten every cycle without fsync; after a power cut some file
    systems give back an empty file. The trusted upstream survives in trusted.json."""
    alice, bob = team.alice, team.bob
    commit(alice.path, {"MEMORY_a.md": "# A\n"})
    assert alice.sync().status == "pushed"
    assert bob.sync().status == "synced"
    assert bob.sync().status == "current"  # a cycle that rewrites state.json, no fsync
    state_file = RootLayout.for_root(bob.state_dir, bob.settings.name).state_file
    state_file.write_bytes(b"")
    git(alice.path, "reset", "-q", "--hard", "HEAD~1")
    commit(alice.path, {"MEMORY_c.md": "# C\n"}, "rewritten")
    push(alice.path, force=True)
    before = snapshot(bob.path)
    result = bob.sync()
    assert result.status == "rewound", result.message
    assert snapshot(bob.path) == before


def test_force_pushed_rewind_is_refused_then_accepted(team: Team) -> None:
    alice, bob = team.alice, team.bob
    commit(alice.path, {"MEMORY_a.md": "# A\n"})
    assert alice.sync().status == "pushed"
    assert bob.sync().status == "synced"
    git(alice.path, "reset", "-q", "--hard", "HEAD~1")
    commit(alice.path, {"MEMORY_c.md": "# C\n"}, "rewritten")
    push(alice.path, force=True)
    rewritten = git(team.upstream, "rev-parse", "main")

    before = snapshot(bob.path)
    result = bob.sync()
    assert result.status == "rewound", result.message
    assert snapshot(bob.path) == before
    assert result.rescue_ref is not None
    assert git(bob.path, "rev-parse", result.rescue_ref) == rewritten

    accepted = bob.sync(accept_rewrite=True)
    assert accepted.status == "synced", accepted.message
    assert git(bob.path, "rev-parse", "HEAD") == rewritten  # adopted as it is
    assert not (bob.path / "MEMORY_a.md").exists() and (bob.path / "MEMORY_c.md").exists()
    assert accepted.rescue_ref is not None
    assert git(bob.path, "rev-parse", accepted.rescue_ref) == before.head
    assert bob.sync().status == "current"


def test_an_accepted_rewrite_never_brings_the_purged_history_back(team: Team) -> None:
    """The upstream was rewritten to purge a leaked secret; Bob has one unpushed note."""
    alice, bob = team.alice, team.bob
    leaked = commit(alice.path, {"MEMORY_leak.md": "# Leak\n\ntoken=SECRET-123\n"})
    assert alice.sync().status == "pushed"
    assert bob.sync().status == "synced"
    git(alice.path, "reset", "-q", "--hard", "HEAD~1")
    commit(alice.path, {"MEMORY_leak.md": "# Leak\n\ntoken=(removed)\n"}, "purged")
    push(alice.path, force=True)
    git(team.upstream, "reflog", "expire", "--expire=now", "--all")
    git(team.upstream, "gc", "-q", "--prune=now")
    mine = commit(bob.path, {"MEMORY_bob.md": "# Bob\n\nmy own note\n"}, "bob's note")
    assert bob.sync().status == "rewound"

    accepted = bob.sync(accept_rewrite=True)
    assert accepted.status == "pushed", accepted.message
    log = git(team.upstream, "log", "-p", "--all")
    assert "SECRET-123" not in log
    assert git(team.upstream, "cat-file", "-t", leaked, check=False) != "commit"
    assert "my own note" in git(team.upstream, "show", "main:MEMORY_bob.md")
    assert (bob.path / "MEMORY_leak.md").read_text().endswith("(removed)\n")
    assert (bob.path / "MEMORY_bob.md").read_text().endswith("my own note\n")
    # Nothing is lost locally: the previous head (with Bob's original commit) is kept.
    kept = [
        r for r in git(bob.path, "for-each-ref", "--format=%(refname)").split() if "rewound" in r
    ]
    assert any(git(bob.path, "rev-parse", r) == mine for r in kept)


def test_a_replay_conflict_is_a_conflict_with_nothing_lost(team: Team) -> None:
    alice, bob = team.alice, team.bob
    commit(alice.path, {"MEMORY_x.md": "# X\n\none\n"})
    assert alice.sync().status == "pushed"
    assert bob.sync().status == "synced"
    git(alice.path, "reset", "-q", "--hard", "HEAD~1")
    commit(alice.path, {"MEMORY_x.md": "# X\n\nalice's rewrite\n"}, "rewritten")
    push(alice.path, force=True)
    commit(bob.path, {"MEMORY_x.md": "# X\n\nbob's edit\n"}, "bob")
    before = snapshot(bob.path)
    result = bob.sync(accept_rewrite=True)
    assert result.status == "conflict", result.message
    assert result.files == ("MEMORY_x.md",)
    assert snapshot(bob.path) == before


def test_unrelated_history_is_rewound(team: Team, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(tmp_path, "init", "-q", "-b", "main", str(other))
    commit(other, {"MEMORY.md": "# M\n", "PURSUITS.md": "# P\n"}, "unrelated")
    git(other, "push", "-q", "--force", str(team.upstream), "main")
    before = snapshot(team.bob.path)
    result = team.bob.sync()
    assert result.status == "rewound"
    assert snapshot(team.bob.path) == before
    unrelated = git(team.upstream, "rev-parse", "main")
    accepted = team.bob.sync(accept_rewrite=True)
    assert accepted.status in ("synced", "conflict"), accepted.message
    if accepted.status == "conflict":
        assert snapshot(team.bob.path) == before
    else:
        assert git(team.bob.path, "rev-parse", "HEAD~0") != before.head
        git(team.bob.path, "merge-base", "--is-ancestor", unrelated, "HEAD")  # raises if not


def test_conflicting_edits_are_a_conflict(team: Team) -> None:
    alice, bob = team.alice, team.bob
    commit(alice.path, {"MEMORY.md": "# User Context\n\nfrom alice\n"})
    assert alice.sync().status == "pushed"
    commit(bob.path, {"MEMORY.md": "# User Context\n\nfrom bob\n"})
    before = snapshot(bob.path)
    result = bob.sync()
    assert result.status == "conflict"
    assert result.files == ("MEMORY.md",)
    assert snapshot(bob.path) == before
    assert leftovers(bob) == []


def test_dirty_root_is_never_touched(team: Team) -> None:
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    team.alice.sync()
    write(
        team.bob.path,
        {"MEMORY.md": "# User Context\n\nunsaved thought\n", "MEMORY_new.md": "# new, untracked\n"},
    )
    before = snapshot(team.bob.path)
    result = team.bob.sync()
    assert result.status == "dirty"
    assert set(result.files) == {"MEMORY.md", "MEMORY_new.md"}
    assert snapshot(team.bob.path) == before


def test_untracked_ignored_files_do_not_make_a_root_dirty(team: Team) -> None:
    write(team.bob.path, {"rightmemory.toml": "x=1\n", ".runtime/x": "y", "dream_logs/a.md": "z"})
    assert team.bob.sync().status == "current"


def test_offline_upstream(team: Team) -> None:
    git(team.bob.path, "remote", "set-url", "origin", str(team.upstream) + "-gone")
    before = snapshot(team.bob.path)
    result = team.bob.sync()
    assert result.status == "offline"
    assert snapshot(team.bob.path) == before


def test_outgoing_forbidden_path_is_not_pushed(team: Team) -> None:
    before = git(team.upstream, "rev-parse", "main")
    commit(team.bob.path, {"notes.txt": "x"})
    result = team.bob.sync()
    assert result.status == "rejected"
    assert "path-not-allowed" in {p.code for p in result.problems}
    assert git(team.upstream, "rev-parse", "main") == before


def test_credentials_in_remote_url_never_shown(team: Team) -> None:
    url = "https://alice:s3cr3t-token@127.0.0.1:9/team.git"
    git(team.bob.path, "remote", "set-url", "origin", url)
    result = team.bob.sync()
    assert result.status == "offline"
    assert "s3cr3t-token" not in repr(result)
    state = (team.bob.state_dir / "roots" / "bob" / "state.json").read_text()
    assert "s3cr3t-token" not in state


@pytest.mark.parametrize("enabled", [False])
def test_disabled_root(team: Team, enabled: bool) -> None:
    member = team.bob
    member.settings = replace(member.settings, sync_enabled=enabled)
    assert member.sync().status == "disabled"


def test_nested_root_is_unconfigured(team: Team) -> None:
    nested = team.bob.path / "insight_logs"
    nested.mkdir()
    team.bob.settings = replace(team.bob.settings, path=nested)
    assert team.bob.sync().status == "unconfigured"


def test_push_rejected_by_a_concurrent_push_syncs_once_then_pushes(
    team: Team, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A teammate pushes between bob's fetch and bob's push (injected with a PATH shim that
    runs the teammate's real push just before bob's real `git push`)."""
    alice, bob = team.alice, team.bob
    commit(alice.path, {"MEMORY_a.md": "# A\n"}, "alice, racing")
    commit(bob.path, {"MEMORY_b.md": "# B\n"}, "bob")
    real_git = shutil.which("git")
    assert real_git is not None
    shim = tmp_path / "shim"
    shim.mkdir()
    mark = tmp_path / "raced"
    (shim / "git").write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do\n'
        f'  if [ "$a" = push ] && [ ! -e {mark} ]; then\n'
        f"    touch {mark}\n"
        f"    (cd {alice.path} && {real_git} push -q origin HEAD:main)\n"
        "  fi\n"
        "done\n"
        f'exec {real_git} "$@"\n'
    )
    (shim / "git").chmod(0o755)
    monkeypatch.setenv("PATH", f"{shim}:{os.environ['PATH']}")
    result = bob.sync()
    assert mark.exists()
    assert result.status == "pushed", result.message
    assert "after a rejected push" in result.message
    head = git(bob.path, "rev-parse", "HEAD")
    assert git(team.upstream, "rev-parse", "main") == head
    assert (bob.path / "MEMORY_a.md").exists() and (bob.path / "MEMORY_b.md").exists()


def _entry(gid: str, session: str, when: str, body: str) -> str:
    return f"## {gid}\n\nSession: {session}\nSubmitted: {when}\n\n{body}\n"


INBOX_TITLE = "# Pending Agent Guidance\n\n"


def test_guidance_inbox_conflict_is_merged_by_entry(team: Team) -> None:
    alice, bob = team.alice, team.bob
    base = _entry("GI-20261129-0000000a", "s0", "2026-11-29T09:00:00Z", "Base entry.")
    commit(alice.path, {"AGENT_GUIDANCE_INBOX.md": INBOX_TITLE + base})
    assert alice.sync().status == "pushed"
    assert bob.sync().status == "synced"
    ours = _entry("GI-20261129-0000000b", "s1", "2026-11-29T10:00:00Z", "From bob.")
    theirs = _entry("GI-20261129-0000000c", "s2", "2026-11-29T11:00:00Z", "From alice.")
    commit(alice.path, {"AGENT_GUIDANCE_INBOX.md": INBOX_TITLE + base + "\n" + theirs})
    assert alice.sync().status == "pushed"
    commit(bob.path, {"AGENT_GUIDANCE_INBOX.md": INBOX_TITLE + base + "\n" + ours})
    result = bob.sync()
    assert result.status == "pushed", result.message
    text = (bob.path / "AGENT_GUIDANCE_INBOX.md").read_text()
    assert text.index("0000000a") < text.index("0000000b") < text.index("0000000c")
    assert git(bob.path, "status", "--porcelain") == ""


def test_guidance_inbox_true_conflict_is_a_conflict(team: Team) -> None:
    alice, bob = team.alice, team.bob
    base = _entry("GI-20261129-0000000a", "s0", "2026-11-29T09:00:00Z", "Base entry.")
    commit(alice.path, {"AGENT_GUIDANCE_INBOX.md": INBOX_TITLE + base})
    assert alice.sync().status == "pushed"
    assert bob.sync().status == "synced"
    edit_a = _entry("GI-20261129-0000000a", "s0", "2026-11-29T09:00:00Z", "Alice's edit.")
    edit_b = _entry("GI-20261129-0000000a", "s0", "2026-11-29T09:00:00Z", "Bob's edit.")
    commit(alice.path, {"AGENT_GUIDANCE_INBOX.md": INBOX_TITLE + edit_a})
    assert alice.sync().status == "pushed"
    commit(bob.path, {"AGENT_GUIDANCE_INBOX.md": INBOX_TITLE + edit_b})
    before = snapshot(bob.path)
    result = bob.sync()
    assert result.status == "conflict"
    assert "GI-20261129-0000000a" in result.message
    assert snapshot(bob.path) == before
    assert leftovers(bob) == []


def test_upstream_commit_with_a_dangling_edge_is_rejected(team: Team) -> None:
    memory = "# User Context {#user}\n\n- `tabs` prefers tabs → [dep:gone]\n"
    _push_raw(team, {"MEMORY.md": memory})
    _refused(team, "rejected", "dangling-edge")


def test_merge_of_two_valid_states_that_is_invalid_is_a_conflict(team: Team) -> None:
    alice, bob = team.alice, team.bob
    commit(alice.path, {"MEMORY_a.md": "# A\n", "MEMORY.md": "# Notes\n\n- `same` a → []\n"})
    assert alice.sync().status == "pushed"
    commit(bob.path, {"PURSUITS.md": "# Pursuits\n\n## Same {#same}\n\n## Focus\n"})
    before = snapshot(bob.path)
    result = bob.sync()
    assert result.status == "conflict", result.message
    assert "duplicate-id" in {p.code for p in result.problems}
    assert snapshot(bob.path) == before
    assert leftovers(bob) == []


def test_corrections_over_capacity_still_sync(team: Team) -> None:
    entry = (
        "## Entry {n}\n\n### Candidate\n\nc\n\n### Proposed edit\n\np\n\n### Accepted edit\n\na\n\n"
    )
    text = "# Corrections\n\n" + "".join(entry.format(n=n) for n in range(12))
    commit(team.alice.path, {"corrections.md": text})
    assert team.alice.sync().status == "pushed"
    assert team.bob.sync().status == "synced"


def test_local_commit_breaking_the_graph_is_not_pushed(team: Team) -> None:
    before = git(team.upstream, "rev-parse", "main")
    commit(team.alice.path, {"MEMORY.md": "# User Context {#user}\n\n- `x` y → [dep:gone]\n"})
    result = team.alice.sync()
    assert result.status == "rejected"
    assert "dangling-edge" in {p.code for p in result.problems}
    assert git(team.upstream, "rev-parse", "main") == before


def test_dry_run_leaves_no_rescue_ref(team: Team) -> None:
    _push_raw(team, {"rightmemory.toml": "x = 1\n"})
    result = team.bob.sync(dry_run=True)
    assert result.status == "rejected" and result.rescue_ref is None
    assert git(team.bob.path, "for-each-ref", "refs/memsync") == ""
