"""The import store on real files: promotion, atomic swap, crash recovery, trust state."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import threading
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync import timefmt
from memsync.roots.faults import VIEW_POINTS
from memsync.views.store import ImportStore, ImportStoreError, exchange
from memsync.views.trust import (
    CURRENT,
    PULLED,
    STALE,
    UNAVAILABLE,
    TrustState,
    ViewStateError,
    trust_path,
)

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 29, 20, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def package(revision: int) -> dict[str, bytes]:
    """A package whose file set and bytes both depend on the revision."""
    files = {
        "view.md": f"# view rev={revision}\n".encode(),
        "dist/MEMORY.md": f"# memory rev={revision}\n".encode(),
        f"dist/MEMORY_r{revision % 3}.md": f"rev={revision}\n".encode(),
    }
    if revision % 2:
        files["recipe.toml"] = f"# rev={revision}\n".encode()
    return files


def fill(path: Path, files: dict[str, bytes]) -> Path:
    for rel, data in files.items():
        (path / rel).parent.mkdir(parents=True, exist_ok=True)
        (path / rel).write_bytes(data)
    return path


def tree(path: Path) -> dict[str, bytes]:
    return {p.relative_to(path).as_posix(): p.read_bytes() for p in path.rglob("*") if p.is_file()}


def new_store(tmp_path: Path, **options: object) -> ImportStore:
    return ImportStore(tmp_path / "root", "team-auth", tmp_path / "state", **options)  # type: ignore[arg-type]


def promote(store: ImportStore, revision: int) -> None:
    store.promote(fill(store.candidate_dir(), package(revision)), revision)


def leftovers(store: ImportStore) -> list[str]:
    scratch = sorted(p.name for p in store.candidates_dir.iterdir())
    return scratch + (["promotion.json"] if store.record_path.exists() else [])


def exchange_works(tmp_path: Path) -> bool:
    a, b = tmp_path / "xa", tmp_path / "xb"
    a.mkdir()
    b.mkdir()
    (a / "a").touch()
    try:
        return exchange(a, b) and (b / "a").exists()
    finally:
        for d in (a, b):
            for f in d.iterdir():
                f.unlink()
            d.rmdir()


MODES = [pytest.param(True, id="exchange"), pytest.param(False, id="two-step")]


def skip_without_exchange(tmp_path: Path, use_exchange: bool) -> None:
    if use_exchange and not exchange_works(tmp_path):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")


# -- promotion ---------------------------------------------------------------------------


def test_first_import_lands_in_place_and_is_never_synchronized(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    assert not store.exists()
    candidate = store.candidate_dir()
    assert candidate.parent == store.candidates_dir and not any(candidate.iterdir())
    assert store.candidate_dir() != candidate
    trust = TrustState().accepted(
        revision=3, sha256="ab" * 32, expires_at="2026-12-29T20:00:00Z", key_ids=("k1",), now=NOW
    )
    store.promote(fill(candidate, package(3)), 3, trust=trust)

    assert store.active_path == tmp_path / "root/.runtime/shared_views/imports/team-auth"
    assert store.exists() and tree(store.active_path) == package(3)
    assert (tmp_path / "root/.runtime/.gitignore").read_bytes() == b"*\n"
    assert TrustState.load(tmp_path / "state/views/team-auth/trust.json") == trust
    assert stat.S_IMODE(store.trust_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(store.trust_path.parent.stat().st_mode) == 0o700
    store.remove_candidates()
    assert leftovers(store) == []


@pytest.mark.parametrize("use_exchange", MODES)
def test_promote_replaces_the_old_import(tmp_path: Path, use_exchange: bool) -> None:
    skip_without_exchange(tmp_path, use_exchange)
    store = new_store(tmp_path, use_exchange=use_exchange, view="auth")
    promote(store, 1)
    promote(store, 2)
    assert tree(store.active_path) == package(2)
    assert TrustState.load(trust_path(tmp_path / "state", "auth")).revision == 2
    assert store.use_exchange is use_exchange
    assert leftovers(store) == []
    assert store.recover().action == "none"


def test_the_gitignore_is_repaired(tmp_path: Path) -> None:
    ignore = tmp_path / "root/.runtime/.gitignore"
    ignore.parent.mkdir(parents=True)
    ignore.write_text("*\n!shared_views/\n")
    new_store(tmp_path).candidate_dir()
    assert ignore.read_text() == "*\n"


def test_promote_refuses_what_is_not_its_own_candidate(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    elsewhere = fill(tmp_path / "elsewhere", package(1))
    with pytest.raises(ImportStoreError):
        store.promote(elsewhere, 1)
    link = store.candidate_dir().with_name("team-auth+" + "0" * 16)
    link.symlink_to(elsewhere)
    with pytest.raises(ImportStoreError):
        store.promote(link, 1)
    with pytest.raises(ImportStoreError):
        store.promote(store.candidate_dir(), 2, trust=TrustState(revision=1))
    with pytest.raises(ImportStoreError):
        store.promote(store.candidate_dir(), -1)
    assert not store.exists() and (elsewhere / "view.md").exists()


@pytest.mark.parametrize("heading", ["", ".hidden", "../x", "a/b", "a+b", "a\x00", "x" * 200])
def test_unsafe_headings_are_refused(tmp_path: Path, heading: str) -> None:
    with pytest.raises(ViewStateError):
        ImportStore(tmp_path, heading, tmp_path / "state")


def test_syscall_fallback_swaps_like_libc(tmp_path: Path) -> None:
    if not exchange_works(tmp_path):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    a = fill(tmp_path / "a", {"f": b"a"})
    b = fill(tmp_path / "b", {"f": b"b"})
    assert exchange(a, b, use_libc=False)
    assert (a / "f").read_bytes() == b"b" and (b / "f").read_bytes() == b"a"
    with pytest.raises(FileNotFoundError):
        exchange(a, tmp_path / "missing")


# -- atomicity for readers ---------------------------------------------------------------


def read_tree_at(fd: int) -> tuple[dict[str, bytes], bool]:
    """Everything under the open directory `fd`, and whether a file vanished mid-read."""
    found: dict[str, bytes] = {}
    torn = False
    stack = [("", fd)]
    while stack:
        prefix, dfd = stack.pop()
        for name in os.listdir(dfd):
            try:
                child = os.open(name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=dfd)
            except FileNotFoundError:
                torn = True
                continue
            if stat.S_ISDIR(os.fstat(child).st_mode):
                stack.append((f"{prefix}{name}/", child))
                continue
            with os.fdopen(child, "rb") as handle:
                found[prefix + name] = handle.read()
        if dfd != fd:
            os.close(dfd)
    return found, torn


def test_readers_never_see_a_mix_or_a_missing_import(tmp_path: Path) -> None:
    if not exchange_works(tmp_path):
        pytest.skip("renameat2(RENAME_EXCHANGE) is not available here")
    store = new_store(tmp_path, use_exchange=True)
    promote(store, 0)
    stop = threading.Event()
    problems: list[str] = []
    whole_reads = 0

    def read_once() -> None:
        nonlocal whole_reads
        try:
            fd = os.open(store.active_path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            problems.append("the active import was missing")
            return
        try:
            found, torn = read_tree_at(fd)
            mine = os.fstat(fd)
            # stat while the fd is open: a removed directory's inode number cannot be
            # reused by a newer import meanwhile and pass for the one that was read
            now = os.stat(store.active_path)
        except FileNotFoundError:
            problems.append("the active import was missing")
            return
        finally:
            os.close(fd)
        revisions = {data.split(b"rev=")[1].split(b"\n")[0] for data in found.values()}
        if len(revisions) > 1:
            problems.append(f"a mix of revisions {sorted(revisions)}")
        if (mine.st_dev, mine.st_ino) == (now.st_dev, now.st_ino):
            # still the active directory after the read: it must be one whole revision
            if torn or len(revisions) != 1 or found != package(int(revisions.pop())):
                problems.append(f"an incomplete revision: {sorted(found)}")
            whole_reads += 1

    def reader() -> None:
        while not stop.is_set():
            try:
                read_once()
            except Exception as exc:  # a dead reader thread must fail the test, not hide
                problems.append(repr(exc))

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        for revision in range(1, 201):
            promote(store, revision)
    finally:
        stop.set()
        thread.join()
    assert problems == []
    assert whole_reads > 0
    assert tree(store.active_path) == package(200) and leftovers(store) == []


# -- crash recovery ----------------------------------------------------------------------

CHILD = """
import sys
from pathlib import Path
from memsync.views.store import ImportStore
root, state, candidate, revision, use_exchange = sys.argv[1:]
store = ImportStore(Path(root), "team-auth", Path(state), use_exchange=use_exchange == "1")
store.promote(Path(candidate), int(revision))
"""

# Where each interrupted promotion ends up: before any rename the old import stays; once
# the record exists and the old import has left its place, recovery rolls forward.
EXPECTED = {
    "view-after-extract": "old",
    "view-after-record": "old",
    "view-between-renames": "new",
    "view-after-swap": "new",
    "view-after-trust-write": "new",
}


def crash(store: ImportStore, candidate: Path, revision: int, point: str) -> None:
    env = {**os.environ, "MEMSYNC_FAULT": point, "PYTHONPATH": str(REPO)}
    argv = [str(store.active_path.parents[3]), str(store.trust_path.parents[2]), str(candidate)]
    argv += [str(revision), "1" if store.use_exchange else "0"]
    done = subprocess.run(
        [sys.executable, "-c", CHILD, *argv], env=env, capture_output=True, check=False
    )
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()


@pytest.mark.parametrize("point", VIEW_POINTS)
@pytest.mark.parametrize("use_exchange", MODES)
def test_a_killed_promotion_recovers_to_old_or_new(
    tmp_path: Path, point: str, use_exchange: bool
) -> None:
    skip_without_exchange(tmp_path, use_exchange)
    if point == "view-between-renames" and use_exchange:
        pytest.skip("an exchange has no point between two renames")
    store = new_store(tmp_path, use_exchange=use_exchange)
    promote(store, 4)
    stray = fill(store.candidate_dir(), {"view.md": b"half"})  # an extraction killed earlier
    candidate = fill(store.candidate_dir(), package(5))
    crash(store, candidate, 5, point)

    result = ImportStore(tmp_path / "root", "team-auth", tmp_path / "state").recover()
    revision = 5 if EXPECTED[point] == "new" else 4
    assert tree(store.active_path) == package(revision)
    assert TrustState.load(store.trust_path).revision == revision
    assert leftovers(store) == []
    assert stray.name in result.removed
    assert result.action == {"view-after-extract": "none"}.get(
        point, "finished" if revision == 5 else "undone"
    )


@pytest.mark.parametrize("point", ["view-after-record", "view-after-swap"])
def test_a_killed_first_import_recovers(tmp_path: Path, point: str) -> None:
    store = new_store(tmp_path)
    candidate = fill(store.candidate_dir(), package(1))
    crash(store, candidate, 1, point)
    assert new_store(tmp_path).recover().action == "finished"
    assert tree(store.active_path) == package(1) and leftovers(store) == []
    assert TrustState.load(store.trust_path).revision == 1


def test_promote_settles_a_pending_record_first(tmp_path: Path) -> None:
    store = new_store(tmp_path, use_exchange=False)
    promote(store, 1)
    crash(store, fill(store.candidate_dir(), package(2)), 2, "view-between-renames")
    assert not store.exists()
    promote(store, 3)  # no recover() in between
    assert tree(store.active_path) == package(3)
    assert TrustState.load(store.trust_path).revision == 3
    assert not store.record_path.exists()


def test_a_failed_promotion_leaves_the_old_import(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    promote(store, 1)
    candidate = fill(store.candidate_dir(), package(2))
    (candidate / "link").symlink_to("view.md")  # the extractor never writes one; fsync refuses
    with pytest.raises(ImportStoreError, match="revision 2"):
        store.promote(candidate, 2)
    assert tree(store.active_path) == package(1) and not store.record_path.exists()
    assert TrustState.load(store.trust_path).revision == 1


def test_an_unreadable_record_is_dropped_and_the_import_kept(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    promote(store, 1)
    store.candidate_dir()
    store.record_path.write_text("{not json")
    result = store.recover()
    assert result.action == "discarded" and len(result.removed) == 1
    assert tree(store.active_path) == package(1) and leftovers(store) == []


def test_recovery_never_touches_another_headings_directories(tmp_path: Path) -> None:
    mine = ImportStore(tmp_path / "root", "auth", tmp_path / "state")
    other = ImportStore(tmp_path / "root", "auth.old-1", tmp_path / "state")
    promote(mine, 1)
    promote(other, 1)
    theirs = fill(other.candidate_dir(), package(2))
    (mine.candidates_dir / "auth+old-1").mkdir()  # my own stray old import
    assert mine.recover().removed == ("auth+old-1",)
    assert tree(other.active_path) == package(1) and tree(theirs) == package(2)


# -- trust state -------------------------------------------------------------------------


def test_trust_state_round_trips(tmp_path: Path) -> None:
    path = trust_path(tmp_path, "auth")
    assert TrustState.load(path) == TrustState()
    state = TrustState(
        revision=7,
        sha256="cd" * 32,
        expires_at="2026-12-29T20:00:00Z",
        key_ids=("a", "b"),
        fetched_at="2026-11-29T20:00:00Z",
        checked_at="2026-11-29T21:00:00Z",
        manifest_etag='"m"',
        package_etag='"sha256:cd"',
        last_status="pulled",
        last_message="ok",
        last_error_at=None,
    )
    state.save(path)
    assert TrustState.load(path) == state
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"{",
        b"\xff\xfe",
        b"[]",
        b"null",
        b'{"revision": "7", "key_ids": "k", "sha256": 5}',
        b'{"revision": true}',
        b'{"revision": -1, "unknown": 1}',
    ],
)
def test_corrupt_trust_files_read_as_empty(tmp_path: Path, raw: bytes) -> None:
    path = trust_path(tmp_path, "auth")
    path.parent.mkdir(parents=True)
    path.write_bytes(raw)
    state = TrustState.load(path)
    assert state.revision is None and state.sha256 is None and state.key_ids == ()


def test_the_trust_path_refuses_unsafe_view_names(tmp_path: Path) -> None:
    with pytest.raises(ViewStateError):
        trust_path(tmp_path, "../escape")


def at(moment: datetime) -> str:
    return timefmt.rfc3339(moment)


GOOD = TrustState(revision=3, expires_at=at(NOW + DAY), checked_at=at(NOW - DAY))


@pytest.mark.parametrize(
    ("state", "has_import", "failed", "promoted", "expected"),
    [
        (GOOD, True, False, False, CURRENT),
        (GOOD, True, False, True, PULLED),
        (GOOD, False, False, False, UNAVAILABLE),
        (TrustState(), True, False, False, UNAVAILABLE),
        (TrustState(), False, True, False, UNAVAILABLE),
        (GOOD, True, True, False, STALE),
        (TrustState(revision=3, expires_at=at(NOW), checked_at=at(NOW)), True, False, True, STALE),
        (TrustState(revision=3, expires_at="junk", checked_at=at(NOW)), True, False, False, STALE),
        (TrustState(revision=3, checked_at=at(NOW - 2 * DAY)), True, False, False, CURRENT),
        (TrustState(revision=3, checked_at=at(NOW - 8 * DAY)), True, False, False, STALE),
        (TrustState(revision=3), True, False, False, STALE),
    ],
)
def test_status_table(
    state: TrustState, has_import: bool, failed: bool, promoted: bool, expected: str
) -> None:
    got = state.status(
        now=NOW,
        max_stale=7 * DAY,
        has_import=has_import,
        refresh_failed=failed,
        promoted=promoted,
    )
    assert got == expected


def test_a_recorded_failure_makes_the_import_stale_until_the_next_check() -> None:
    failed = GOOD.failed(NOW - timedelta(hours=1), "hub unreachable")
    assert failed.status(now=NOW, max_stale=7 * DAY, has_import=True) == STALE
    healed = failed.checked(NOW, manifest_etag='"m2"')
    assert healed.status(now=NOW, max_stale=7 * DAY, has_import=True) == CURRENT
    assert healed.manifest_etag == '"m2"' and healed.last_error_at == failed.last_error_at


SECONDS = st.integers(min_value=-30 * 86400, max_value=30 * 86400)


@given(
    expires=st.one_of(st.none(), SECONDS),
    checked=st.one_of(st.none(), SECONDS),
    max_stale=st.integers(min_value=0, max_value=20 * 86400),
    failed=st.booleans(),
    has_import=st.booleans(),
    promoted=st.booleans(),
)
def test_status_follows_the_rules(
    expires: int | None,
    checked: int | None,
    max_stale: int,
    failed: bool,
    has_import: bool,
    promoted: bool,
) -> None:
    def stamp(offset: int | None) -> str | None:
        return None if offset is None else at(NOW + timedelta(seconds=offset))

    state = TrustState(revision=1, expires_at=stamp(expires), checked_at=stamp(checked))
    got = state.status(
        now=NOW,
        max_stale=timedelta(seconds=max_stale),
        has_import=has_import,
        refresh_failed=failed,
        promoted=promoted,
    )
    expired = expires is not None and expires <= 0
    too_old = checked is None or -checked > max_stale
    if not has_import:
        assert got == UNAVAILABLE
    elif failed or expired or too_old:
        assert got == STALE
    else:
        assert got == (PULLED if promoted else CURRENT)


def test_the_promotion_record_is_json_naming_old_and_new(tmp_path: Path) -> None:
    store = new_store(tmp_path, use_exchange=False)
    promote(store, 1)
    candidate = fill(store.candidate_dir(), package(2))
    crash(store, candidate, 2, "view-after-record")
    record = json.loads(store.record_path.read_text())
    assert record["candidate"] == candidate.name and record["old"] == "team-auth+old-1"
    assert record["revision"] == 2 and record["trust"]["revision"] == 2
    assert stat.S_IMODE(store.record_path.stat().st_mode) == 0o600


def test_a_failure_in_the_same_second_as_the_last_check_reads_stale() -> None:
    stamp = "2026-11-29T20:00:00Z"
    now = datetime(2026, 11, 29, 20, 0, 30, tzinfo=UTC)
    base = TrustState(revision=1, sha256="a" * 64, checked_at=stamp, last_error_at=stamp)
    failed = replace(base, last_status="stale")
    fine = replace(base, last_status="current")
    week = timedelta(days=7)
    assert failed.status(now=now, max_stale=week, has_import=True) == "stale"
    assert fine.status(now=now, max_stale=week, has_import=True) == "current"
