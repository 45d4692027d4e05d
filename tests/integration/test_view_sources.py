"""The view source contract: every `ViewSource` passes the same tests.

Each source reads a real publication: an aiohttp server on loopback (`HttpSource`), a real
Git share fetched by the git binary (`GitSource`), a static export on disk (`DirSource`).
The tests are the same for all three: the manifest and package as published, conditional
fetch, caps, the deadline, a missing view, and hostile answers, after which nothing is left
where the package was to land. The consumer check then judges what any source delivered.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from memsync import timefmt
from memsync.transports.http import HttpClient
from memsync.transports.process import Deadline
from memsync.views.archive import ArchiveLimits, write_zip
from memsync.views.consumer import check_package
from memsync.views.dirsource import DirSource
from memsync.views.gitsource import GitSource
from memsync.views.httpsource import HttpSource
from memsync.views.manifest import MAX_MANIFEST_BYTES, parse_manifest
from memsync.views.source import ErrorKind, SourceError, ViewSource
from tests.flaky_server import Fault, FlakyServer, serve
from tests.helpers import git
from tests.kit import signed_release

KEY = Ed25519PrivateKey.from_private_bytes(bytes(range(1, 33)))
LIMITS = ArchiveLimits(max_entries=16, max_total=64 * 1024, max_file=64 * 1024)
SOURCES = ("http", "git", "dir")


def package_files(body: str) -> dict[str, bytes]:
    return {
        "view.md": b"# Auth\n\nHow our services authenticate.\n",
        "recipe.toml": b'version = 1\nview_id = "auth"\nkind = "file"\n'
        b'render = "extractive"\ninclude_headings = ["auth"]\n',
        "rightmemory-shared-view.toml": b'version = 2\nview_id = "auth"\nkind = "file"\n',
        "dist/manifest.toml": b'version = 2\nview_id = "auth"\n'
        b'document_kind = "rightmemory-memory"\n',
        "dist/MEMORY.md": f"# Auth {{#auth}}\n\n- `login` {body} → []\n".encode(),
    }


def signed_manifest(revision: int, files: Mapping[str, bytes]) -> bytes:
    now = timefmt.now()
    manifest, _package = signed_release(
        "auth",
        revision,
        files,
        KEY,
        published_at=now - timedelta(minutes=1),
        expires=now + timedelta(days=7),
    )
    return manifest


def noise(size: int) -> bytes:
    """Bytes that do not compress (so an archive of them is as large as they are)."""
    out = bytearray()
    seed = b"noise"
    while len(out) < size:
        seed = hashlib.sha256(seed).digest()
        out += seed
    return bytes(out[:size])


# -- where a view is published, and the source that reads it ---------------------------------

Setup = Callable[[], None]


@dataclass
class Hostile:
    setup: Setup
    kinds: frozenset[ErrorKind]


@dataclass
class Harness:
    """One kind of publication. `publish` puts a manifest and package files where the
    source reads them; `source` is the one source instance a test uses throughout."""

    kind: str
    source: ViewSource
    publish: Callable[[bytes, Mapping[str, bytes]], None]
    remove: Setup  # the view is not published at all
    stall: Setup  # the next manifest answer would never come
    stall_kinds: frozenset[ErrorKind]
    over_limits: frozenset[ErrorKind]  # files past LIMITS (refused before they are read)
    hostile: dict[str, Hostile] = field(default_factory=dict)


def http_harness(server: FlakyServer, client: HttpClient) -> Harness:
    state = server.state

    def publish(manifest: bytes, files: Mapping[str, bytes]) -> None:
        state.manifest, state.package = manifest, write_zip(files)

    def on_package(fault: Fault) -> Setup:
        def setup() -> None:
            state.script(Fault.OK)  # the manifest
            state.default = fault  # every attempt at the package

        return setup

    def stall() -> None:
        state.stall_seconds = 30.0
        state.script(Fault.STALL)

    return Harness(
        "http",
        HttpSource(client, server.url + "/v1/views/auth"),
        publish,
        remove=lambda: setattr(state, "default", Fault.E404),
        stall=stall,
        stall_kinds=frozenset({ErrorKind.TIMEOUT}),
        over_limits=frozenset({ErrorKind.TOO_LARGE}),
        hostile={
            "cut-short": Hostile(on_package(Fault.TRUNCATE), frozenset({ErrorKind.TRUNCATED})),
            "reset": Hostile(
                on_package(Fault.RESET), frozenset({ErrorKind.TRUNCATED, ErrorKind.CONNECTION})
            ),
            # A Content-Length below the body: its tail poisons the kept-alive connection
            # the retry then uses.
            "short-length": Hostile(
                on_package(Fault.LIE), frozenset({ErrorKind.TRUNCATED, ErrorKind.PROTOCOL})
            ),
            "endless": Hostile(on_package(Fault.BLOAT), frozenset({ErrorKind.TOO_LARGE})),
            "redirect-loop": Hostile(
                on_package(Fault.REDIRECT_LOOP), frozenset({ErrorKind.REFUSED})
            ),
            "server-error": Hostile(on_package(Fault.E500), frozenset({ErrorKind.SERVER})),
        },
    )


def git_harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Harness:
    share = tmp_path / "share"
    git(tmp_path, "init", "-q", "-b", "main", str(share))
    base = share / "shares" / "auth"
    source = GitSource(str(share), "main", "shares/auth", tmp_path / "git-cache")

    def commit(message: str) -> None:
        git(share, "add", "-A", ".")
        git(share, "commit", "-q", "--allow-empty", "-m", message)

    def publish(manifest: bytes, files: Mapping[str, bytes]) -> None:
        shutil.rmtree(base, ignore_errors=True)
        for rel, data in files.items():
            target = base / "package" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        (base / "manifest.json").write_bytes(manifest)
        commit("publish")

    def remove() -> None:
        shutil.rmtree(base)
        commit("unpublish")

    def stall() -> None:
        # The real git behind a wrapper that never finishes a fetch: the deadline must
        # stop it (and its process group), not the wrapper.
        bin_dir = tmp_path / "stalling-bin"
        bin_dir.mkdir()
        real = shutil.which("git")
        wrapper = bin_dir / "git"
        wrapper.write_text(
            f'#!/bin/sh\ncase " $* " in *" fetch "*) exec sleep 31.27 ;; esac\nexec {real} "$@"\n'
        )
        wrapper.chmod(0o755)
        monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    def in_package(change: Callable[[Path], None]) -> Setup:
        def setup() -> None:
            change(base / "package" / "dist")
            commit("hostile")

        return setup

    def gitlink() -> None:  # a submodule entry, committed as is
        head = git(share, "rev-parse", "HEAD")
        git(share, "update-index", "--add", "--cacheinfo", f"160000,{head},shares/auth/package/sub")
        git(share, "commit", "-q", "-m", "hostile")

    def manifest_symlink() -> None:
        (base / "manifest.json").unlink()
        (base / "manifest.json").symlink_to("package/view.md")
        commit("hostile")

    refused = frozenset({ErrorKind.PROTOCOL})
    return Harness(
        "git",
        source,
        publish,
        remove=remove,
        stall=stall,
        stall_kinds=frozenset({ErrorKind.TIMEOUT}),
        over_limits=refused,
        hostile={
            "symlink": Hostile(
                in_package(lambda d: (d / "link.md").symlink_to("MEMORY.md")), refused
            ),
            "executable": Hostile(in_package(lambda d: (d / "MEMORY.md").chmod(0o755)), refused),
            "gitlink": Hostile(gitlink, refused),
            "manifest-symlink": Hostile(manifest_symlink, refused),
            "no-branch": Hostile(
                lambda: git(share, "branch", "-q", "-m", "main", "other"),
                frozenset({ErrorKind.NOT_FOUND}),
            ),
        },
    )


def clear(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def dir_harness(tmp_path: Path) -> Harness:
    base = tmp_path / "export" / "v1" / "views" / "auth"
    base.mkdir(parents=True)

    def publish(manifest: bytes, files: Mapping[str, bytes]) -> None:
        for name, data in (("manifest", manifest), ("package", write_zip(files))):
            clear(base / name)  # never write into a FIFO a hostile case left
            (base / name).write_bytes(data)

    def replace_package(make: Callable[[Path], None]) -> Setup:
        def setup() -> None:
            clear(base / "package")
            make(base / "package")

        return setup

    def stall() -> None:  # a FIFO nobody writes: a blocking read would wait forever
        clear(base / "manifest")
        os.mkfifo(base / "manifest")

    refused = frozenset({ErrorKind.PROTOCOL})
    return Harness(
        "dir",
        DirSource(base),
        publish,
        remove=lambda: shutil.rmtree(base),
        stall=stall,
        stall_kinds=refused,
        over_limits=frozenset({ErrorKind.TOO_LARGE}),
        hostile={
            "device": Hostile(replace_package(lambda p: p.symlink_to("/dev/zero")), refused),
            "fifo": Hostile(replace_package(os.mkfifo), refused),
            "directory": Hostile(replace_package(lambda p: p.mkdir()), refused),
        },
    )


@pytest.fixture(params=SOURCES)
async def harness(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Harness]:
    if request.param == "http":
        monkeypatch.setattr("memsync.transports.http.BACKOFF_BASE", 0.002)
        async with serve() as server, HttpClient() as client:
            yield http_harness(server, client)
    elif request.param == "git":
        yield git_harness(tmp_path, monkeypatch)
    else:
        yield dir_harness(tmp_path)


@pytest.fixture
def landing(tmp_path: Path) -> Path:
    """An empty directory the package lands in (checked for leftovers after a failure)."""
    path = tmp_path / "landing"
    path.mkdir()
    return path


def soon(seconds: float = 10.0) -> Deadline:
    return Deadline.after(seconds)


def publish(harness: Harness, revision: int, body: str) -> tuple[bytes, bytes]:
    files = package_files(body)
    manifest = signed_manifest(revision, files)
    harness.publish(manifest, files)
    return manifest, write_zip(files)


# -- the contract ---------------------------------------------------------------------------


async def test_the_manifest_and_package_as_published(harness: Harness, landing: Path) -> None:
    manifest, archive = publish(harness, 1, "uses tokens")
    got = await harness.source.manifest(etag=None, deadline=soon())
    assert (got.body, got.unchanged) == (manifest, False)
    assert got.etag
    dest = landing / "package"
    fetched = await harness.source.package(
        dest, limits=ArchiveLimits(), expected_length=len(archive), deadline=soon()
    )
    assert dest.read_bytes() == archive
    assert (fetched.length, fetched.sha256) == (len(archive), hashlib.sha256(archive).hexdigest())
    assert sorted(p.name for p in landing.iterdir()) == ["package"]


async def test_conditional_fetch(harness: Harness) -> None:
    publish(harness, 1, "first")
    first = await harness.source.manifest(etag=None, deadline=soon())
    again = await harness.source.manifest(etag=first.etag, deadline=soon())
    assert again.unchanged and again.body is None
    assert again.etag == first.etag
    second, _ = publish(harness, 2, "second")
    moved = await harness.source.manifest(etag=first.etag, deadline=soon())
    assert (moved.body, moved.unchanged) == (second, False)
    assert moved.etag not in (None, first.etag)
    stale_tag = await harness.source.manifest(etag='"sha256:' + "0" * 64 + '"', deadline=soon())
    assert stale_tag.body == second


async def test_a_package_longer_than_declared_is_cut_off(harness: Harness, landing: Path) -> None:
    _, archive = publish(harness, 1, "declared")
    await harness.source.manifest(etag=None, deadline=soon())
    with pytest.raises(SourceError) as caught:
        await harness.source.package(
            landing / "package",
            limits=ArchiveLimits(),
            expected_length=len(archive) - 1,
            deadline=soon(),
        )
    assert caught.value.kind is ErrorKind.TOO_LARGE
    assert [p.code for p in caught.value.problems] == ["too-large"]  # a refusal lists why
    assert list(landing.iterdir()) == []


async def test_a_package_past_the_limits_is_refused(harness: Harness, landing: Path) -> None:
    files = {**package_files("big"), "dist/MEMORY_big.md": noise(LIMITS.max_archive)}
    harness.publish(signed_manifest(1, package_files("big")), files)
    await harness.source.manifest(etag=None, deadline=soon())
    with pytest.raises(SourceError) as caught:
        await harness.source.package(
            landing / "package", limits=LIMITS, expected_length=None, deadline=soon()
        )
    assert caught.value.kind in harness.over_limits
    assert caught.value.problems, "a refusal lists its problems"
    assert {p.code for p in caught.value.problems} <= {"too-large", "archive-invalid"}
    assert list(landing.iterdir()) == []


async def test_a_manifest_past_its_cap_is_refused(harness: Harness) -> None:
    harness.publish(b" " * (MAX_MANIFEST_BYTES + 1), package_files("x"))
    with pytest.raises(SourceError) as caught:
        await harness.source.manifest(etag=None, deadline=soon())
    assert caught.value.kind is ErrorKind.TOO_LARGE
    assert [p.code for p in caught.value.problems] == ["too-large"]


async def test_no_time_left_means_no_answer(harness: Harness, landing: Path) -> None:
    publish(harness, 1, "late")
    gone = Deadline(time.monotonic() - 1, 1.0)
    with pytest.raises(SourceError) as caught:
        await harness.source.manifest(etag=None, deadline=gone)
    assert caught.value.kind is ErrorKind.TIMEOUT
    await harness.source.manifest(etag=None, deadline=soon())
    with pytest.raises(SourceError) as caught:
        await harness.source.package(
            landing / "package", limits=ArchiveLimits(), expected_length=None, deadline=gone
        )
    assert caught.value.kind is ErrorKind.TIMEOUT
    assert list(landing.iterdir()) == []


async def test_a_stalled_source_answers_by_the_deadline(harness: Harness) -> None:
    publish(harness, 1, "slow")
    harness.stall()
    started = time.monotonic()
    with pytest.raises(SourceError) as caught:
        await harness.source.manifest(etag=None, deadline=soon(1.5))
    assert time.monotonic() - started < 1.5 + 2.0
    assert caught.value.kind in harness.stall_kinds


async def test_a_view_that_is_not_published_is_not_found(harness: Harness) -> None:
    publish(harness, 1, "here")
    harness.remove()
    with pytest.raises(SourceError) as caught:
        await harness.source.manifest(etag=None, deadline=soon())
    assert caught.value.kind is ErrorKind.NOT_FOUND


async def test_hostile_answers_are_refused_and_leave_nothing(
    harness: Harness, landing: Path
) -> None:
    assert harness.hostile
    for name, hostile in harness.hostile.items():
        _, archive = publish(harness, 1, "good")
        hostile.setup()
        with pytest.raises(SourceError) as caught:
            await harness.source.manifest(etag=None, deadline=soon())
            await harness.source.package(
                landing / "package",
                limits=ArchiveLimits(),
                expected_length=len(archive),
                deadline=soon(),
            )
        assert caught.value.kind in hostile.kinds, (name, caught.value.kind, caught.value)
        if caught.value.kind is ErrorKind.TOO_LARGE:  # a refusal, not an outage: says why
            assert [p.code for p in caught.value.problems] == ["too-large"], name
        if harness.kind != "http" and caught.value.kind is ErrorKind.PROTOCOL:
            # hostile content in a Git share or an export (not a network fault): refused
            # with the problem that names it
            assert caught.value.problems, (name, caught.value.message)
        assert list(landing.iterdir()) == [], name


async def test_the_consumer_check_judges_every_source_alike(
    harness: Harness, landing: Path
) -> None:
    """A source hands over what it was given; a package that is not the signed one is
    refused by the one consumer check before it is unpacked."""
    signed = signed_manifest(1, package_files("claimed"))
    harness.publish(signed, package_files("actually something else"))
    got = await harness.source.manifest(etag=None, deadline=soon())
    fetched = await harness.source.package(
        landing / "package", limits=ArchiveLimits(), expected_length=None, deadline=soon()
    )
    checked = await asyncio.to_thread(
        check_package,
        landing / "package",
        landing / "extracted",
        manifest=parse_manifest(got.body or b""),
        length=fetched.length,
        sha256=fetched.sha256,
        view_id="auth",
        heading="auth",
        limits=ArchiveLimits(),
    )
    assert checked.reason == "the package does not match its manifest"
    assert "hash-mismatch" in {p.code for p in checked.problems}
    assert not (landing / "extracted").exists()
