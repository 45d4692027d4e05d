"""Signed admission against real git, real ssh-keygen keys and git's own SSH signing.

Alice's machine signs with her key (git -c gpg.format=ssh ... commit -S, as users do);
Bob's root requires `signed` with Alice's key pinned. Every refusal is `rejected` with its
code, names the commit, leaves Bob's root byte for byte as it was and keeps the upstream
head under a rescue ref.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from memsync.config.model import AdmissionSettings
from memsync.roots.admission import MAX_NAMED
from memsync.roots.layout import RootLayout
from memsync.secrets import SecretRef
from memsync.status import root_document
from memsync.transports.rootkeys import CommitKey
from memsync.validators.commitsig import parse_signer, signer_fingerprint
from tests.conftest import Member, Team
from tests.helpers import commit, git, push, snapshot
from tests.sigkeys import Key, make_key, raw_commit, sign_flags, signed_commit


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Key]:
    base = tmp_path_factory.mktemp("keys")
    return {name: make_key(base, name) for name in ("alice", "mallory")}


def signed(member: Member, *signers: str | SecretRef) -> Member:
    """`member` with `admission: {require: signed, signers: [...]}`."""
    settings = replace(member.settings, admission=AdmissionSettings("signed", signers))
    return replace(member, settings=settings)


def assert_refused(bob: Member, code: str, named: list[str]) -> None:
    """One sync: rejected with `code` for exactly the commits `named`, root untouched."""
    before = snapshot(bob.path)
    result = bob.sync()
    assert result.status == "rejected", result.message
    assert {p.code for p in result.problems} == {code}, result.problems
    assert sorted(p.message.split()[1] for p in result.problems) == sorted(named)
    assert snapshot(bob.path) == before
    assert result.rescue_ref is not None
    assert git(bob.path, "rev-parse", result.rescue_ref) == result.upstream


def test_commits_signed_by_a_pinned_key_are_admitted(team: Team, keys: dict[str, Key]) -> None:
    first = signed_commit(team.alice.path, {"MEMORY_a.md": "# A\n"}, keys["alice"], "a")
    second = signed_commit(team.alice.path, {"MEMORY_b.md": "# B\n"}, keys["alice"], "b")
    push(team.alice.path)
    bob = signed(team.bob, keys["alice"].public)
    result = bob.sync()
    assert result.status == "synced", result.message
    assert git(bob.path, "rev-parse", "HEAD") == second
    assert git(bob.path, "rev-parse", f"{second}^") == first


def test_an_unsigned_commit_is_rejected(team: Team, keys: dict[str, Key]) -> None:
    signed_commit(team.alice.path, {"MEMORY_a.md": "# A\n"}, keys["alice"], "signed")
    unsigned = signed_commit(team.alice.path, {"MEMORY_b.md": "# B\n"}, None, "unsigned")
    signed_commit(team.alice.path, {"MEMORY_c.md": "# C\n"}, keys["alice"], "signed tip")
    push(team.alice.path)
    bob = signed(team.bob, keys["alice"].public)
    assert_refused(bob, "unsigned-commit", [unsigned])  # not only the tip: each commit
    assert_refused(bob, "unsigned-commit", [unsigned])  # and again on the next try


def test_a_commit_by_an_unpinned_key_is_rejected(team: Team, keys: dict[str, Key]) -> None:
    forged = signed_commit(team.alice.path, {"MEMORY_m.md": "# M\n"}, keys["mallory"], "hi")
    push(team.alice.path)
    bob = signed(team.bob, keys["alice"].public)
    assert_refused(bob, "untrusted-signer", [forged])


def test_a_tampered_signed_commit_is_rejected(team: Team, keys: dict[str, Key]) -> None:
    """A pinned signer's signature over other bytes: the object is rewritten (same parent,
    same tree, another message) with `git hash-object -w -t commit` in the upstream."""
    good = signed_commit(team.alice.path, {"MEMORY_a.md": "# A\n"}, keys["alice"], "honest")
    push(team.alice.path)
    up = team.upstream
    raw = raw_commit(up, good)
    tampered = raw.replace(b"\n\nhonest\n", b"\n\nHonest\n")
    assert tampered != raw
    forged = git(up, "hash-object", "-w", "-t", "commit", "--stdin", input=tampered)
    git(up, "update-ref", "refs/heads/main", forged)
    bob = signed(team.bob, keys["alice"].public)
    assert_refused(bob, "bad-signature", [forged])


def test_a_signed_merge_does_not_vouch_for_an_unsigned_parent(
    team: Team, keys: dict[str, Key]
) -> None:
    alice = team.alice.path
    git(alice, "checkout", "-q", "-b", "side")
    side = signed_commit(alice, {"MEMORY_s.md": "# S\n"}, None, "unsigned side")
    git(alice, "checkout", "-q", "main")
    signed_commit(alice, {"MEMORY_m.md": "# M\n"}, keys["alice"], "signed main")
    git(alice, *sign_flags(keys["alice"]), "merge", "-q", "--no-ff", "-m", "merge", "side")
    merge = git(alice, "rev-parse", "HEAD")
    assert git(alice, "rev-list", "--parents", "-n1", merge).count(" ") == 2
    push(alice)
    bob = signed(team.bob, keys["alice"].public)
    assert_refused(bob, "unsigned-commit", [side])


def test_turning_it_on_keeps_the_unsigned_history_trusted(team: Team, keys: dict[str, Key]) -> None:
    alice, bob = team.alice, team.bob
    commit(alice.path, {"MEMORY_old.md": "# Old\n"}, "before the policy, unsigned")
    push(alice.path)
    assert bob.sync().status == "synced"
    anchor = git(bob.path, "rev-parse", "HEAD")
    guarded = signed(bob, keys["alice"].public)
    layout = RootLayout.for_root(guarded.state_dir, guarded.name)
    assert root_document(guarded.settings, guarded.state_dir)["admission"]["anchor"] is None
    assert guarded.sync().status == "current"
    status = root_document(guarded.settings, guarded.state_dir)["admission"]
    assert status["require"] == "signed" and status["anchor"] == anchor
    assert anchor[:12] in status["message"] and "stay trusted" in status["message"]
    assert (layout.base / "admission.json").is_file()

    tip = signed_commit(alice.path, {"MEMORY_new.md": "# New\n"}, keys["alice"], "signed")
    push(alice.path)
    result = guarded.sync()
    assert result.status == "synced", result.message
    assert git(bob.path, "rev-parse", "HEAD") == tip
    late = commit(alice.path, {"MEMORY_late.md": "# Late\n"}, "unsigned after the policy")
    push(alice.path)
    assert_refused(guarded, "unsigned-commit", [late])

    assert bob.sync().status == "synced"  # off again: the record goes, on again re-anchors
    assert not (layout.base / "admission.json").exists()


def test_an_unsigned_local_commit_is_never_pushed(team: Team, keys: dict[str, Key]) -> None:
    bob = signed(team.bob, keys["alice"].public)
    before = git(team.upstream, "rev-parse", "main")
    local = commit(bob.path, {"MEMORY_b.md": "# B\n"}, "bob, unsigned")
    result = bob.sync()
    assert result.status == "rejected", result.message
    assert [p.code for p in result.problems] == ["unsigned-commit"]
    assert local in result.problems[0].message
    assert git(team.upstream, "rev-parse", "main") == before

    git(bob.path, *sign_flags(keys["alice"]), "commit", "-q", "--amend", "--no-edit")
    result = bob.sync()
    assert result.status == "pushed", result.message
    assert git(team.upstream, "rev-parse", "main") == git(bob.path, "rev-parse", "HEAD")


def test_signers_from_a_file_with_comments(
    team: Team, keys: dict[str, Key], tmp_path: Path
) -> None:
    listed = tmp_path / "team-signers.pub"
    listed.write_text(f"# the team\n\n{keys['mallory'].public}\n  {keys['alice'].public}  \n")
    tip = signed_commit(team.alice.path, {"MEMORY_a.md": "# A\n"}, keys["alice"], "a")
    push(team.alice.path)
    bob = signed(team.bob, SecretRef("file", str(listed)))
    assert bob.sync().status == "synced"
    assert git(bob.path, "rev-parse", "HEAD") == tip
    status = root_document(bob.settings, bob.state_dir)["admission"]
    assert status["signer_files"] == [f"secret file {listed}"]


def test_an_unusable_signers_file_admits_nothing(
    team: Team, keys: dict[str, Key], tmp_path: Path
) -> None:
    listed = tmp_path / "team-signers.pub"
    listed.write_text(f"{keys['alice'].public}\nssh-ed25519 notakey\n")
    signed_commit(team.alice.path, {"MEMORY_a.md": "# A\n"}, keys["alice"], "a")
    push(team.alice.path)
    bob = signed(team.bob, SecretRef("file", str(listed)))
    before = snapshot(bob.path)
    result = bob.sync()
    assert result.status == "error", result.message
    assert f"{listed} line 2" in result.message
    assert snapshot(bob.path) == before
    listed.write_text(f"{keys['alice'].public}\n")
    listed.chmod(0o666)  # another user could add a signer
    result = bob.sync()
    assert result.status == "error" and "can be changed by another user" in result.message
    assert snapshot(bob.path) == before
    listed.unlink()
    result = bob.sync()
    assert result.status == "error" and "does not exist" in result.message
    assert snapshot(bob.path) == before


def test_path_problems_and_signatures_are_reported_together(
    team: Team, keys: dict[str, Key]
) -> None:
    bad = signed_commit(team.alice.path, {"notes.txt": "x\n"}, None, "unsigned, forbidden path")
    push(team.alice.path)
    bob = signed(team.bob, keys["alice"].public)
    result = bob.sync()
    assert result.status == "rejected"
    assert {p.code for p in result.problems} == {"path-not-allowed", "unsigned-commit"}
    assert any(bad in p.message for p in result.problems)


def test_a_long_unsigned_range_names_the_first_commits_and_counts_the_rest(
    team: Team, keys: dict[str, Key]
) -> None:
    made = [
        commit(team.alice.path, {"MEMORY_n.md": f"# N {i}\n"}, f"n{i}")
        for i in range(MAX_NAMED + 5)
    ]
    push(team.alice.path)
    result = signed(team.bob, keys["alice"].public).sync()
    assert result.status == "rejected"
    assert [p.code for p in result.problems] == ["unsigned-commit"] * (MAX_NAMED + 1)
    assert [p.message.split()[1] for p in result.problems[:MAX_NAMED]] == made[:MAX_NAMED]
    assert result.problems[-1].message.startswith("and 5 more commit(s)")


def test_a_root_with_no_trusted_upstream_anchors_at_the_first_one(
    team: Team, keys: dict[str, Key]
) -> None:
    bob = signed(team.bob, keys["alice"].public)
    status = root_document(bob.settings, bob.state_dir)["admission"]
    assert status["since"] is None and "next cycle" in status["message"]
    assert bob.sync().status == "current"
    status = root_document(bob.settings, bob.state_dir)["admission"]
    assert status["anchor"] == git(team.upstream, "rev-parse", "main")
    assert status["signers"] == [parse_signer(keys["alice"].public).fingerprint]


def test_memsyncs_own_signed_merge_passes_both_ends(team: Team, keys: dict[str, Key]) -> None:
    """Both halves together: Bob's root requires signatures from Alice and from memsync's own
    key, and signs what memsync commits with that key. Alice's signed commit and Bob's signed
    local commit diverge: memsync merges them, signs the merge, and the outgoing check passes
    it, so the merge reaches the upstream; Alice's root, requiring the same, admits it."""
    ours = make_key(keys["alice"].private.parent, "memsync-bob")
    pinned = (keys["alice"].public, ours.public)
    key_ref = CommitKey("roots.bob.signing.key", SecretRef("file", str(ours.private)))
    bob = signed(team.bob, *pinned)
    bob = replace(bob, settings=replace(bob.settings, signing=key_ref))
    assert bob.sync().ok  # the anchor: the upstream as it is now
    signed_commit(team.alice.path, {"MEMORY_a.md": "# A\n"}, keys["alice"], "from alice")
    push(team.alice.path)
    signed_commit(bob.path, {"MEMORY_b.md": "# B\n"}, keys["alice"], "from bob's desk")
    result = bob.sync()
    assert result.status in ("synced", "pushed"), result.message
    merge = git(bob.path, "rev-parse", "HEAD")
    assert len(git(bob.path, "rev-list", "--parents", "-n1", merge).split()) == 3
    assert signer_fingerprint(raw_commit(bob.path, merge)) == parse_signer(ours.public).fingerprint
    assert git(team.upstream, "rev-parse", "refs/heads/main") == merge
    alice = signed(team.alice, *pinned)
    assert alice.sync().status == "synced"
    assert git(alice.path, "rev-parse", "HEAD") == merge
