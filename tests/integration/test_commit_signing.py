"""`roots.<name>.signing.key`: every commit memsync makes carries git's SSH signature, made
in process, which `git verify-commit` accepts with an allowed-signers file; signing changes
nothing else of the commit; a key memsync cannot use is a clear error naming where it is.

Keys are made with `ssh-keygen` and checked with git's own verifier (which runs
`ssh-keygen -Y verify`), as a user's tools would: the product runs neither.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.cycles.turn import run_cycle
from memsync.roots.create import init_root
from memsync.secrets import SecretRef
from memsync.transports.commitsign import (
    SigningKeyError,
    insert_header,
    sign_commit,
    signer,
    unsigned_payload,
)
from memsync.transports.git import Git
from memsync.transports.rootkeys import CommitKey
from memsync.wire.cli import DoctorReport
from tests.conftest import Member, Team
from tests.e2e.test_cli import memsync
from tests.helpers import GIT_ENV, commit, git, push, snapshot
from tests.integration.test_repair import EXAMPLE, Agent, conflict, with_role
from tests.integration.test_sync import INBOX_TITLE, _entry
from tests.integration.test_turn import INSIGHT, WRITE_LOG, Script, _pressure

KINDS = {"ed25519": [], "ecdsa": ["-b", "256"], "ecdsa384": ["-b", "384"], "rsa": ["-b", "2048"]}


@dataclass(frozen=True)
class Keys:
    dir: Path
    allowed: Path  # gpg.ssh.allowedSignersFile listing every plain key

    def ref(self, kind: str) -> CommitKey:
        return CommitKey("roots.bob.signing.key", SecretRef("file", str(self.dir / kind)))


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    base = tmp_path_factory.mktemp("keys")
    lines = []
    for kind, extra in KINDS.items():
        algorithm = "ecdsa" if kind.startswith("ecdsa") else kind
        keygen("-t", algorithm, *extra, "-N", "", "-C", f"memsync-{kind}", "-f", base / kind)
        lines.append(f"memsync@example.invalid {(base / f'{kind}.pub').read_text().strip()}")
    keygen("-t", "ed25519", "-N", "correct horse", "-f", base / "locked")
    keygen("-t", "ed25519", "-N", "", "-f", base / "stranger")  # not in the allowed list
    allowed = base / "allowed_signers"
    allowed.write_text("\n".join(lines) + "\n")
    return Keys(base, allowed)


def keygen(*args: str | Path) -> None:
    subprocess.run(["ssh-keygen", "-q", *map(str, args)], check=True, capture_output=True)


def verified(keys: Keys, repo: Path, oid: str) -> bool:
    """git's own verdict on `oid`'s signature against the allowed-signers file."""
    done = subprocess.run(
        ["git", "-c", f"gpg.ssh.allowedSignersFile={keys.allowed}", "verify-commit", oid],
        cwd=repo,
        env={**os.environ, **GIT_ENV},
        capture_output=True,
        check=False,
    )
    return done.returncode == 0 and b'Good "git" signature' in done.stderr


def signed_as(member: Member, keys: Keys, kind: str = "ed25519") -> Member:
    return replace(member, settings=replace(member.settings, signing=keys.ref(kind)))


def payload(repo: Path, oid: str) -> bytes:
    raw = subprocess.run(
        ["git", "cat-file", "commit", oid], cwd=repo, capture_output=True, check=True
    ).stdout
    return unsigned_payload(raw)


# -- the signature itself ------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_each_key_type_signs_a_commit_git_verifies_and_nothing_else_changes(
    keys: Keys, tmp_path: Path, kind: str
) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    first = commit(repo, {"a.md": "# A\n"}, "first")
    git(repo, "checkout", "-q", "-b", "side")
    side = commit(repo, {"b.md": "# B\n"}, "side")
    git(repo, "checkout", "-q", "main")
    commit(repo, {"c.md": "# C\n"}, "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side\n\nwith a body\n", "side")
    merge = git(repo, "rev-parse", "HEAD")
    for oid in (first, side, merge):
        made = sign_commit(Git(repo), oid, keys.ref(kind))
        assert made != oid and verified(keys, repo, made)
        assert not verified(keys, repo, oid)
        raw = git(repo, "cat-file", "commit", made)
        assert raw.count("gpgsig -----BEGIN SSH SIGNATURE-----") == 1
        assert payload(repo, made) == payload(repo, oid)  # tree, parents, author, message
        fmt = "%T %P %an %ae %ad %cn %ce %cd %B"
        assert git(repo, "log", "-1", f"--format={fmt}", made) == git(
            repo, "log", "-1", f"--format={fmt}", oid
        )


def test_a_sha256_repository_gets_its_own_signature_header(keys: Keys, tmp_path: Path) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "--object-format=sha256", "-b", "main", str(repo))
    oid = commit(repo, {"a.md": "# A\n"}, "first")
    made = sign_commit(Git(repo), oid, keys.ref("ed25519"))
    assert len(made) == 64 and verified(keys, repo, made)
    assert "gpgsig-sha256 -----BEGIN SSH SIGNATURE-----" in git(repo, "cat-file", "commit", made)


def test_a_signature_already_there_is_replaced_not_doubled(keys: Keys, tmp_path: Path) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    commit(repo, {"a.md": "# A\n"}, "first")
    stranger = keys.dir / "stranger"
    git(repo, "-c", "gpg.format=ssh", "-c", f"user.signingkey={stranger}", "commit", "-q",
        "--amend", "-S", "--no-edit")  # fmt: skip
    theirs = git(repo, "rev-parse", "HEAD")
    assert not verified(keys, repo, theirs)  # a valid signature by a key not listed
    made = sign_commit(Git(repo), theirs, keys.ref("ed25519"))
    assert verified(keys, repo, made)
    assert git(repo, "cat-file", "commit", made).count("BEGIN SSH SIGNATURE") == 1


def test_a_replaced_key_file_signs_from_the_next_commit_on(keys: Keys, tmp_path: Path) -> None:
    """Loaded keys are reused by their bytes, never by their path."""
    path = tmp_path / "key"
    key = CommitKey("roots.bob.signing.key", SecretRef("file", str(path)))
    prints = []
    for kind in ("rsa", "ed25519", "locked", "rsa"):
        path.write_text((keys.dir / kind).read_text())
        if kind == "locked":
            with pytest.raises(SigningKeyError, match="passphrase"):
                signer(key)
            continue
        prints.append(signer(key).fingerprint)
    expected = [signer(keys.ref(kind)).fingerprint for kind in ("rsa", "ed25519", "rsa")]
    assert prints == expected and prints[0] != prints[1]


def test_without_a_key_the_commit_is_left_as_it_is(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    git(tmp_path, "init", "-q", "-b", "main", str(repo))
    oid = commit(repo, {"a.md": "# A\n"}, "first")
    assert sign_commit(Git(repo), oid, None) == oid


_LINE = st.binary(max_size=30).filter(lambda b: b"\n" not in b)


@given(
    headers=st.lists(
        st.tuples(st.sampled_from([b"tree", b"parent", b"author", b"encoding", b"x"]), _LINE),
        min_size=1,
        max_size=6,
    ),
    body=st.none() | st.binary(max_size=60),
    signature=st.lists(_LINE.filter(bool), min_size=1, max_size=4),
)
def test_inserting_a_signature_header_and_taking_it_out_gives_the_commit_back(
    headers: list[tuple[bytes, bytes]], body: bytes | None, signature: list[bytes]
) -> None:
    """Header values hold any byte but LF (CR too); a commit may have no message part."""
    commit_bytes = b"".join(name + b" " + value + b"\n" for name, value in headers)
    if body is not None:
        commit_bytes += b"\n" + body
    value = b"\n".join(signature) + b"\n"
    signed = insert_header(commit_bytes, b"gpgsig", value)
    assert unsigned_payload(signed) == commit_bytes
    assert signed.count(b"\ngpgsig ") + signed.startswith(b"gpgsig ") >= 1
    if body is not None:
        assert signed.endswith(b"\n" + body)  # the message is untouched


# -- keys memsync cannot use ----------------------------------------------------------------


def _refused(key: CommitKey) -> SigningKeyError:
    with pytest.raises(SigningKeyError) as caught:
        signer(key)
    return caught.value


def test_a_passphrase_protected_key_is_a_clear_error_naming_it(keys: Keys) -> None:
    error = _refused(
        CommitKey("roots.bob.signing.key", SecretRef("file", str(keys.dir / "locked")))
    )
    assert "roots.bob.signing.key" in error.message and str(keys.dir / "locked") in error.message
    assert "passphrase" in error.message
    assert "ssh-keygen" in (error.hint or "")
    _never_shows(error, keys.dir / "locked")


@pytest.mark.parametrize("case", ["missing", "public", "garbage", "directory", "empty"])
def test_a_key_that_is_not_a_usable_private_key_is_a_clear_error(
    keys: Keys, tmp_path: Path, case: str
) -> None:
    path = tmp_path / "key"
    if case == "public":
        path.write_text((keys.dir / "ed25519.pub").read_text())
    elif case == "garbage":
        text = (keys.dir / "ed25519").read_text()
        path.write_text(text.replace("A", "B", 40))  # the markers, a broken body
    elif case == "directory":
        path.mkdir()
    elif case == "empty":
        path.write_text("")
    error = _refused(CommitKey("roots.bob.signing.key", SecretRef("file", str(path))))
    assert "roots.bob.signing.key" in error.message and str(path) in error.message
    if path.is_file():
        _never_shows(error, path)


def test_an_unreadable_key_is_a_clear_error(keys: Keys, tmp_path: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads a file whatever its mode")
    path = tmp_path / "key"
    path.write_text((keys.dir / "ed25519").read_text())
    path.chmod(0)
    error = _refused(CommitKey("roots.bob.signing.key", SecretRef("file", str(path))))
    assert str(path) in error.message and "cannot read" in error.message


def _never_shows(error: SigningKeyError, path: Path) -> None:
    _never_in(path, f"{error.message}\n{error.hint}\n{error!r}")


# -- every commit memsync makes ---------------------------------------------------------------


def test_an_autocommit_is_signed_and_pushed_signed(keys: Keys, team: Team) -> None:
    bob = signed_as(team.bob, keys, "ecdsa")
    (bob.path / "MEMORY.md").write_text("# User Context\n\nedited by an agent\n")
    result = replace(bob, settings=replace(bob.settings, autocommit=True)).sync()
    assert result.status == "pushed", result.message
    head = git(team.upstream, "rev-parse", "main")
    assert verified(keys, team.upstream, head)
    assert git(team.upstream, "log", "-1", "--format=%s", head) == "memsync: autocommit 1 file(s)"


def test_a_sync_merge_is_signed(keys: Keys, team: Team) -> None:
    bob = signed_as(team.bob, keys, "rsa")
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    local = commit(bob.path, {"MEMORY_b.md": "# B\n"})
    upstream = git(team.upstream, "rev-parse", "main")
    result = bob.sync()
    assert result.status == "pushed", result.message
    head = git(bob.path, "rev-parse", "HEAD")
    assert git(bob.path, "rev-list", "--parents", "-n1", head).split()[1:] == [local, upstream]
    assert verified(keys, bob.path, head)
    assert git(bob.path, "log", "-1", "--format=%s", head).startswith("memsync: merge upstream")


def test_a_merged_guidance_inbox_is_signed(keys: Keys, team: Team) -> None:
    alice, bob = team.alice, signed_as(team.bob, keys)
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
    head = git(team.upstream, "rev-parse", "main")
    assert len(git(bob.path, "rev-list", "--parents", "-n1", head).split()) == 3
    assert verified(keys, bob.path, head)


def test_an_accepted_rewrite_signs_each_replayed_commit(keys: Keys, team: Team) -> None:
    alice, bob = team.alice, signed_as(team.bob, keys)
    commit(alice.path, {"MEMORY_a.md": "# A\n"})
    assert alice.sync().status == "pushed"
    assert bob.sync().status == "synced"
    git(alice.path, "reset", "-q", "--hard", "HEAD~1")
    commit(alice.path, {"MEMORY_c.md": "# C\n"}, "rewritten")
    push(alice.path, force=True)
    rewritten = git(team.upstream, "rev-parse", "main")
    commit(bob.path, {"MEMORY_b1.md": "# B1\n"}, "bob one")
    commit(bob.path, {"MEMORY_b2.md": "# B2\n"}, "bob two")
    assert bob.sync().status == "rewound"
    accepted = bob.sync(accept_rewrite=True, no_push=True)
    assert accepted.status == "synced", accepted.message
    replayed = git(bob.path, "rev-list", f"{rewritten}..HEAD").split()
    assert len(replayed) == 2
    assert all(verified(keys, bob.path, oid) for oid in replayed)
    assert git(bob.path, "log", "--format=%s", f"{rewritten}..HEAD").split("\n") == [
        "bob two",
        "bob one",
    ]


def test_an_insight_turn_lands_signed(keys: Keys, team: Team) -> None:
    _pressure(team, 2)
    settings = replace(team.bob.settings, signing=keys.ref("ed25519"))
    result = run_cycle(settings, INSIGHT, Script(WRITE_LOG), team.bob.state_dir)
    assert result.status == "landed", result.message
    head = git(team.bob.path, "rev-parse", "HEAD")
    assert head == result.commit and verified(keys, team.bob.path, head)
    assert git(team.bob.path, "log", "-1", "--format=%s").startswith("insight:")


def test_a_repair_merge_is_signed(keys: Keys, team: Team, tmp_path: Path) -> None:
    agent = Agent(tmp_path, f'exec /bin/sh "{EXAMPLE}"')
    bob = signed_as(with_role(team.bob, agent.role), keys, "ecdsa384")
    local, upstream = conflict(team)
    result = bob.sync()
    assert result.status == "pushed", result.message
    head = git(team.upstream, "rev-parse", "main")
    assert git(bob.path, "rev-list", "--parents", "-n1", head).split()[1:] == [local, upstream]
    assert verified(keys, bob.path, head)


def test_a_repair_on_top_of_a_clean_merge_signs_both(
    keys: Keys, team: Team, tmp_path: Path
) -> None:
    """The merge memsync made is signed in the role's repository before the role works on
    it, so the repair's parent is the signed merge (the shape check still holds)."""
    rename = (
        "sed 's/{#same}/{#same-pursuit}/' PURSUITS.md > p.tmp && mv p.tmp PURSUITS.md && "
        "git add PURSUITS.md && git commit -q -m 'repair: rename the pursuit id same'"
    )
    agent = Agent(tmp_path, rename)
    bob = signed_as(with_role(team.bob, agent.role), keys)
    commit(team.alice.path, {"MEMORY_a.md": "# A\n", "MEMORY.md": "# Notes\n\n- `same` a → []\n"})
    assert team.alice.sync().status == "pushed"
    commit(bob.path, {"PURSUITS.md": "# Pursuits\n\n## Same {#same}\n\n## Focus\n"})
    result = bob.sync()
    assert result.status == "pushed", result.message
    for rev in ("HEAD", "HEAD^"):
        assert verified(keys, bob.path, git(bob.path, "rev-parse", rev)), rev


def test_the_init_baseline_is_signed(keys: Keys, tmp_path: Path) -> None:
    upstream = tmp_path / "up.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(upstream))
    done = init_root(tmp_path / "root", upstream=str(upstream), signing=keys.ref("ed25519"))
    assert done.pushed and verified(keys, upstream, done.head)
    assert git(upstream, "rev-parse", "main") == done.head


def test_init_with_a_passphrase_key_fails_and_leaves_nothing(keys: Keys, tmp_path: Path) -> None:
    locked = keys.ref("locked")
    with pytest.raises(SigningKeyError, match="passphrase"):
        init_root(tmp_path / "root", signing=locked)
    assert not (tmp_path / "root").exists()


def test_an_autocommit_with_an_unusable_key_keeps_the_edits(keys: Keys, team: Team) -> None:
    settings = replace(team.bob.settings, autocommit=True, signing=keys.ref("locked"))
    head = git(team.bob.path, "rev-parse", "HEAD")
    (team.bob.path / "MEMORY.md").write_text("# User Context\n\nedited\n")
    result = replace(team.bob, settings=settings).sync()
    assert result.status == "error", result.message
    assert "passphrase" in result.message and "roots.bob.signing.key" in result.message
    assert git(team.bob.path, "rev-parse", "HEAD") == head
    assert (team.bob.path / "MEMORY.md").read_text() == "# User Context\n\nedited\n"


def test_a_turn_with_an_unusable_key_fails_and_the_root_is_unchanged(
    keys: Keys, team: Team
) -> None:
    _pressure(team, 2)
    before = snapshot(team.bob.path)
    settings = replace(team.bob.settings, signing=keys.ref("locked"))
    result = run_cycle(settings, INSIGHT, Script(WRITE_LOG), team.bob.state_dir)
    assert result.status == "failed", result.message
    assert "passphrase" in result.message and "roots.bob.signing.key" in result.message
    assert snapshot(team.bob.path) == before


def test_a_merge_with_an_unusable_key_is_an_error_and_the_root_is_unchanged(
    keys: Keys, team: Team, tmp_path: Path
) -> None:
    (tmp_path / "gone").mkdir()
    bob = replace(team.bob, settings=replace(team.bob.settings, signing=keys.ref("gone")))
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    commit(bob.path, {"MEMORY_b.md": "# B\n"})
    before = snapshot(bob.path)
    result = bob.sync()
    assert result.status == "error", result.message
    assert "roots.bob.signing.key" in result.message and "does not exist" in result.message
    assert snapshot(bob.path) == before


def test_a_repair_with_an_unusable_key_never_runs_the_role(
    keys: Keys, team: Team, tmp_path: Path
) -> None:
    agent = Agent(tmp_path, f'exec /bin/sh "{EXAMPLE}"')
    bob = signed_as(with_role(team.bob, agent.role), keys, "locked")
    _local, upstream = conflict(team)
    before = snapshot(bob.path)
    result = bob.sync()
    assert result.status == "error", result.message
    assert "passphrase" in result.message and "roots.bob.signing.key" in result.message
    assert agent.runs == 0
    assert snapshot(bob.path) == before
    assert git(team.upstream, "rev-parse", "main") == upstream


# -- the command line: init and doctor --------------------------------------------------------


def _config(tmp_path: Path, roots: dict[str, tuple[Path, Path]]) -> Path:
    lines = ["version: 1", f"state_dir: {tmp_path / 'state'}", "roots:"]
    for name, (path, key) in roots.items():
        lines += [f"  {name}:", f"    path: {path}", "    watch: false"]
        lines += ["    sync: {enabled: false}", f"    signing: {{key: {{file: {key}}}}}"]
    cfg = tmp_path / "config.yaml"
    cfg.write_text("\n".join(lines) + "\n")
    return cfg


def test_memsync_init_signs_the_baseline_of_a_configured_root(keys: Keys, tmp_path: Path) -> None:
    path = tmp_path / "root"
    cfg = _config(tmp_path, {"mine": (path, keys.dir / "ed25519")})
    done = memsync("--config", str(cfg), "init", str(path), "--json")
    assert done.returncode == 0, done.stderr
    head = json.loads(done.stdout)["head"]
    assert verified(keys, path, head)


def test_memsync_init_with_a_locked_key_is_a_config_error(keys: Keys, tmp_path: Path) -> None:
    path = tmp_path / "root"
    cfg = _config(tmp_path, {"mine": (path, keys.dir / "locked")})
    done = memsync("--config", str(cfg), "init", str(path), "--json")
    assert done.returncode == 2, done.stderr
    assert "roots.mine.signing.key" in done.stderr and "passphrase" in done.stderr
    assert json.loads(done.stdout)["error"]["code"] == "secret-unavailable"
    assert not path.exists()


def test_doctor_checks_each_signing_key(keys: Keys, team: Team, tmp_path: Path) -> None:
    loose = tmp_path / "loose"
    loose.write_text((keys.dir / "rsa").read_text())
    loose.chmod(0o644)
    cfg = _config(
        tmp_path,
        {
            "alice": (team.alice.path, keys.dir / "locked"),
            "bob": (team.bob.path, keys.dir / "ed25519"),
            "carol": (team.bob.path.parent / "carol", loose),
        },
    )
    done = memsync("--config", str(cfg), "doctor", "--json")
    report = DoctorReport.model_validate_json(done.stdout)
    checks = {c.name: c for c in report.checks}
    fingerprint = signer(keys.ref("ed25519")).fingerprint
    good = checks["roots.bob.signing.key"]
    assert good.status == "ok" and fingerprint in good.message
    assert (keys.dir / "ed25519.pub").read_text().split()[1] in "".join(good.details)
    locked = checks["roots.alice.signing.key"]
    assert locked.status == "fail" and "passphrase" in locked.message
    assert checks["roots.carol.signing.key"].status == "fail"
    assert "chmod 600" in (checks["roots.carol.signing.key"].hint or "")
    for path in (keys.dir / "ed25519", keys.dir / "locked", loose):
        _never_in(path, done.stdout + done.stderr)


def _never_in(path: Path, shown: str) -> None:
    for line in path.read_text().splitlines():
        if len(line) > 8 and not line.startswith("-----"):
            assert line not in shown
