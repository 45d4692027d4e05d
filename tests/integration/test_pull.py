"""`views pull` against real loopback servers and real Git shares: a secure updater.

Every refusal keeps the last good import byte-for-byte and reports `stale`; a flaky server
over many pulls never leaves a corrupt import.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import shutil
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from memsync import timefmt
from memsync.config.sections import GitSourceSettings, HttpSourceSettings, ViewSettings
from memsync.roots.create import init_root
from memsync.views.archive import ArchiveLimits, write_zip
from memsync.views.keys import public_key_text
from memsync.views.pull import ViewResult, pull_views
from tests.flaky_server import Fault, FlakyState, serve
from tests.helpers import git
from tests.kit import signed_release

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
OTHER = Ed25519PrivateKey.from_private_bytes(bytes(range(2, 34)))


def package_files(body: str, view_id: str = "auth") -> dict[str, bytes]:
    return {
        "view.md": b"# Auth\n\nHow our services authenticate.\n",
        "recipe.toml": f'version = 1\nview_id = "{view_id}"\nkind = "file"\n'
        'render = "extractive"\ninclude_headings = ["auth"]\n'.encode(),
        "rightmemory-shared-view.toml": f'version = 2\nview_id = "{view_id}"\n'
        'kind = "file"\n'.encode(),
        "dist/manifest.toml": f'version = 2\nview_id = "{view_id}"\n'
        'document_kind = "rightmemory-memory"\n'.encode(),
        "dist/MEMORY.md": f"# Auth {{#auth}}\n\n- `login` {body} → []\n".encode(),
    }


def release(
    revision: int,
    body: str,
    *,
    key: Ed25519PrivateKey = KEY,
    view_id: str = "auth",
    expires: timedelta = timedelta(days=7),
    package: bytes | None = None,
) -> tuple[bytes, bytes]:
    files = package_files(body, view_id)
    now = timefmt.now()
    manifest, archive = signed_release(
        view_id,
        revision,
        files,
        key,
        published_at=now - timedelta(minutes=1),
        expires=now + expires,
    )
    return manifest, package if package is not None else archive


def settings(root: Path, url: str, **over: object) -> ViewSettings:
    values: dict[str, object] = dict(
        name="team-auth",
        root="bob",
        root_path=root,
        heading="team-auth",
        view_id="auth",
        source=HttpSourceSettings(f"{url}/v1/views/auth", None, allow_http=False),
        keys=(public_key_text(KEY),),
        threshold=1,
        allow_unsigned=False,
        refresh=timedelta(minutes=5),
        max_stale=timedelta(days=7),
        max_file_size=1024 * 1024,
    )
    values.update(over)
    return ViewSettings(**values)  # type: ignore[arg-type]


@pytest.fixture
def root(tmp_path: Path) -> Path:
    path = tmp_path / "bob"
    init_root(path)
    return path


def imported(root: Path) -> dict[str, str]:
    base = root / ".runtime" / "shared_views" / "imports" / "team-auth"
    return {
        p.relative_to(base).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(base.rglob("*"))
        if p.is_file()
    }


def refusal(result: ViewResult, code: str) -> None:
    """The contract of every refusal: its problems are listed (never none), `code` among
    them, and the one-line message names each problem's code."""
    assert result.status in ("stale", "unavailable"), result
    assert result.problems, f"a refusal without its problems: {result.message}"
    codes = {p.code for p in result.problems}
    assert code in codes, result.problems
    assert all(c in result.message for c in codes), result.message
    assert result.model().problems, "the problems are lost on the wire"


def expected(body: str) -> dict[str, str]:
    return {p: hashlib.sha256(b).hexdigest() for p, b in package_files(body).items()}


async def test_pull_then_current_then_new_revision(root: Path, tmp_path: Path) -> None:
    state = FlakyState()
    state.manifest, state.package = release(1, "uses tokens")
    async with serve(state) as server:
        view = settings(root, server.url)
        [first] = await pull_views([view], tmp_path / "state")
        assert (first.status, first.revision) == ("pulled", 1), first.message
        assert imported(root) == expected("uses tokens")
        [again] = await pull_views([view], tmp_path / "state")
        assert again.status == "current"
        assert any("If-None-Match" in s.headers for s in state.seen)
        state.manifest, state.package = release(2, "uses short-lived tokens")
        [second] = await pull_views([view], tmp_path / "state")
        assert (second.status, second.revision, second.previous_revision) == ("pulled", 2, 1)
        assert imported(root) == expected("uses short-lived tokens")
    assert git(root, "status", "--porcelain") == ""  # imports are never synchronized


@pytest.mark.parametrize(
    ("attack", "code"),
    [
        ("forged", "untrusted-key"),
        ("rollback", "rollback"),
        ("equivocation", "equivocation"),
        ("expired", "expired"),
        ("wrong-view", "wrong-view"),
        ("hash", "hash-mismatch"),
        ("length", "length-mismatch"),
        ("tampered-sig", "signature-invalid"),
    ],
)
async def test_manifest_attacks_keep_the_old_import(
    root: Path, tmp_path: Path, attack: str, code: str
) -> None:
    state = FlakyState()
    state.manifest, state.package = release(2, "good")
    async with serve(state) as server:
        view = settings(root, server.url)
        [ok] = await pull_views([view], tmp_path / "state")
        assert ok.status == "pulled"
        good = imported(root)
        if attack == "forged":
            state.manifest, state.package = release(3, "evil", key=OTHER)
        elif attack == "rollback":
            state.manifest, state.package = release(1, "old")
        elif attack == "equivocation":
            state.manifest, state.package = release(2, "other content, same revision")
        elif attack == "expired":
            state.manifest, state.package = release(3, "late", expires=timedelta(seconds=-1))
        elif attack == "wrong-view":
            state.manifest, state.package = release(3, "x", view_id="billing")
        elif attack == "hash":
            manifest, _ = release(3, "claimed")  # same length, other bytes
            state.manifest, state.package = manifest, release(3, "actual!")[1]
        elif attack == "length":
            manifest, _ = release(3, "short")
            state.manifest, state.package = manifest, release(3, "much longer body")[1]
        elif attack == "tampered-sig":
            manifest, state.package = release(3, "tampered")
            state.manifest = manifest.replace(b'"revision": 3', b'"revision": 4')
        [refused] = await pull_views([view], tmp_path / "state")
        assert refused.status == "stale", refused.message
        refusal(refused, code)
        assert refused.revision == 2
        assert imported(root) == good


async def test_a_304_does_not_skip_the_expiry_check(root: Path, tmp_path: Path) -> None:
    state = FlakyState()
    state.manifest, state.package = release(1, "good", expires=timedelta(hours=1))
    async with serve(state) as server:
        view = settings(root, server.url)
        assert (await pull_views([view], tmp_path / "state"))[0].status == "pulled"
        later = timefmt.now() + timedelta(hours=2)
        [frozen] = await pull_views([view], tmp_path / "state", now=later)
        assert frozen.status == "stale"
        refusal(frozen, "expired")
        assert imported(root) == expected("good")


async def test_no_import_and_no_server_is_unavailable(root: Path, tmp_path: Path) -> None:
    view = settings(root, "http://127.0.0.1:9")
    [result] = await pull_views([view], tmp_path / "state")
    assert result.status == "unavailable"


@pytest.mark.slow
async def test_flaky_server_never_leaves_a_corrupt_import(
    root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Real retries with a shorter backoff, so that hundreds of pulls fit in a test run.
    monkeypatch.setattr("memsync.transports.http.BACKOFF_BASE", 0.002)
    rng = random.Random(20261129)
    faults = [
        Fault.OK,
        Fault.OK,
        Fault.RESET,
        Fault.TRUNCATE,
        Fault.LIE,
        Fault.BLOAT,
        Fault.E500,
        Fault.E503,
        Fault.E429,
        Fault.HANGUP,
    ]
    state = FlakyState(default=lambda: rng.choice(faults))
    bodies: dict[int, str] = {}
    revision = 1
    state.manifest, state.package = release(revision, "rev 1")
    bodies[revision] = "rev 1"
    counts = {"pulled": 0, "current": 0, "stale": 0, "unavailable": 0}
    async with serve(state) as server:
        view = settings(root, server.url)
        for round_ in range(300):
            if round_ % 3 == 2:
                revision += 1
                bodies[revision] = f"rev {revision}"
                state.manifest, state.package = release(revision, f"rev {revision}")
            [result] = await pull_views([view], tmp_path / "state")
            counts[result.status] += 1
            for problem in result.problems:  # what a refusal lists, its message names
                assert problem.code in result.message, result
            if result.revision is not None:
                assert imported(root) == expected(bodies[result.revision]), result
    print(f"flaky pulls: {counts}")
    assert counts["pulled"] > 5


def test_git_share_pull(root: Path, tmp_path: Path) -> None:
    share = tmp_path / "share"
    git(tmp_path, "init", "-q", "-b", "main", str(share))
    manifest, _ = release(1, "from git")
    for rel, data in package_files("from git").items():
        target = share / "shares" / "auth" / "package" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (share / "shares" / "auth" / "manifest.json").write_bytes(manifest)
    git(share, "add", ".")
    git(share, "commit", "-q", "-m", "share")
    view = settings(root, "", source=GitSourceSettings(str(share), "shares/auth", "main"))
    [result] = asyncio.run(pull_views([view], tmp_path / "state"))
    assert result.status == "pulled", result.message
    assert imported(root) == expected("from git")


def test_unsigned_rightmemory_share_needs_allow_unsigned(root: Path, tmp_path: Path) -> None:
    share = tmp_path / "share"
    git(tmp_path, "init", "-q", "-b", "main", str(share))
    for rel, data in package_files("unsigned").items():
        target = share / "shares" / "auth" / "package" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    (share / "shares" / "auth" / "share.toml").write_text('id = "auth"\n')
    git(share, "add", ".")
    git(share, "commit", "-q", "-m", "share")
    strict = settings(root, "", source=GitSourceSettings(str(share), "shares/auth", "main"))
    [refused] = asyncio.run(pull_views([strict], tmp_path / "state"))
    assert refused.status == "unavailable"
    refusal(refused, "untrusted-key")
    lenient = replace(strict, allow_unsigned=True)
    [ok] = asyncio.run(pull_views([lenient], tmp_path / "state"))
    assert (ok.status, ok.revision) == ("pulled", 1), ok.message
    assert imported(root) == expected("unsigned")


async def test_a_re_signed_manifest_at_the_same_revision_is_kept_for_304s(
    root: Path, tmp_path: Path
) -> None:
    state = FlakyState()
    state.manifest, state.package = release(1, "same", expires=timedelta(hours=1))
    async with serve(state) as server:
        view = settings(root, server.url)
        assert (await pull_views([view], tmp_path / "state"))[0].status == "pulled"
        files = package_files("same")
        archive = state.package
        now = timefmt.now()
        state.manifest, _same = signed_release(  # same revision and package, renewed
            "auth",
            1,
            files,
            KEY,
            published_at=now,
            expires=now + timedelta(days=30),
            archive=archive,
        )
        assert (await pull_views([view], tmp_path / "state"))[0].status == "current"
        later = now + timedelta(hours=2)
        [result] = await pull_views([view], tmp_path / "state", now=later)
        assert result.status == "current", result.message


async def test_a_file_over_the_views_cap_is_too_large_until_the_view_allows_it(
    root: Path, tmp_path: Path
) -> None:
    """A 2 MiB resource (a consumer's default cap is 1 MiB): refused as `too-large` naming
    the file, nothing imported; with `max_file_size` raised for this view, imported."""
    files = package_files("big")
    big = os.urandom(1024 * 1024).hex().encode()  # 2 MiB that does not compress
    files["dist/MEMORY.md"] = b"# Auth {#auth}\n\n" + big + "\n\n- `login` tokens → []\n".encode()
    archive = write_zip(files, ArchiveLimits(max_file=4 * 1024 * 1024))
    now = timefmt.now()
    state = FlakyState()
    state.manifest, state.package = signed_release(
        "auth",
        1,
        files,
        KEY,
        published_at=now - timedelta(minutes=1),
        expires=now + timedelta(days=1),
        archive=archive,
    )
    async with serve(state) as server:
        view = settings(root, server.url)
        [refused] = await pull_views([view], tmp_path / "state")
        assert refused.status == "unavailable"
        refusal(refused, "too-large")
        assert [(p.code, p.path) for p in refused.problems] == [("too-large", "dist/MEMORY.md")]
        assert imported(root) == {}
        [pulled] = await pull_views(
            [replace(view, max_file_size=2 * 1024 * 1024 + 64)], tmp_path / "state"
        )
        assert (pulled.status, pulled.revision) == ("pulled", 1), pulled
        assert (
            imported(root)["dist/MEMORY.md"] == hashlib.sha256(files["dist/MEMORY.md"]).hexdigest()
        )


async def test_one_broken_view_never_hides_the_others(root: Path, tmp_path: Path) -> None:
    """carol's import area cannot be made (`.runtime` is a file), so recovering her view's
    store fails; bob's view is still pulled and both results are reported."""
    carol = tmp_path / "carol"
    init_root(carol)
    runtime = carol / ".runtime"
    if runtime.is_dir():
        shutil.rmtree(runtime)
    runtime.write_text("not a directory\n")
    state = FlakyState()
    state.manifest, state.package = release(1, "good")
    async with serve(state) as server:
        good = settings(root, server.url)
        broken = replace(good, name="carol-auth", root="carol", root_path=carol)
        first, second = await pull_views([broken, good], tmp_path / "state")
    assert (first.view, first.status) == ("carol-auth", "unavailable")
    assert "could not recover the import" in first.message, first.message
    assert (second.view, second.status) == ("team-auth", "pulled"), second.message
    assert imported(root) == expected("good")
