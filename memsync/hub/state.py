"""The hub's state, free of HTTP: `HubState` ties the stored revisions (`revisions.py`),
the token store (`tokens.py`) and the event streams (`events.py`) together for the request
handlers in `app.py`.

Several worker processes may serve one data dir (`workers.py`): a publication holds the
view's lock file (`locks/<id>`, flock) across processes, reads the disk again before judging,
and tells the other workers (`peers.py`), which read the new revision from disk. Every
revision that becomes current in a process, however it was found, is announced to that
process's event streams exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import importlib
import os
import time
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.atomicfile import FILE_MODE, private_dir
from memsync.hub.events import EventBus
from memsync.hub.guard import Limits
from memsync.hub.metrics import HubMetrics
from memsync.hub.peers import Peers
from memsync.hub.revisions import Revision, RevisionStore
from memsync.hub.streams import StreamTable
from memsync.hub.tokens import AuthFailure, TokenInfo, looks_like_token, open_store
from memsync.validators.problems import Problem
from memsync.wire.hubanswers import revision_event, upstream_event

if TYPE_CHECKING:  # the manifest's models load with the first upload or revision
    from memsync.wire.manifest import Manifest

LOCKS = "locks"  # <data_dir>/locks/<view id>: held (flock) while a revision is stored

# (manifest, uploaded package, its length, its sha256) -> what a consumer would refuse
PackageCheck = Callable[["Manifest", Path, int, str], Sequence[Problem]]
_MANIFESTS = "memsync.views.manifest"  # the manifest's models (pydantic) and cryptography
REFUSAL_AUDIT_INTERVAL = 60.0  # seconds between audit rows for one (address, reason)


def default_package_check(
    manifest: Manifest, package: Path, length: int, sha256: str
) -> Sequence[Problem]:
    """The consumers' own check, imported late (it pulls in the graph rules)."""
    from memsync.views.consumer import check_published  # noqa: PLC0415

    return check_published(manifest, package, length=length, sha256=sha256)


class HubState:
    """Tokens, revisions, event streams and background writes of one hub process (one
    worker, when `peers` names its siblings).

    Used from the event loop; blocking writes (audit rows, `last_used_at`) go to threads
    through `later` and are awaited by `drain` at shutdown.
    """

    def __init__(
        self,
        data_dir: Path,
        package_check: PackageCheck | None,
        max_upload: int,
        heartbeat: float,
        peers: Peers | None = None,
        limits: Limits | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.tokens = open_store(data_dir)
        self.revisions = RevisionStore(data_dir)
        self.locks_dir = private_dir(data_dir / LOCKS)
        self.events = EventBus()
        self.peers = peers
        self.metrics = HubMetrics()  # a worker's count in shared files (`metrics.py`)
        self.package_check = package_check or default_package_check
        self.max_upload = max_upload
        self.heartbeat = heartbeat
        self.limits = limits or Limits()
        table = peers.streams if peers is not None else StreamTable(1, self.limits.connections())
        self.streams = table.tally(peers.index if peers else 0, self.limits.max_streams_per_token)
        self._locks: dict[str, asyncio.Lock] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._refusals: dict[tuple[str, str], float] = {}
        self._checks_loading = False

    def later(self, work: Callable[[], None]) -> None:
        """Run a blocking write in a thread without waiting for it."""
        task = asyncio.get_running_loop().create_task(asyncio.to_thread(work))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        await asyncio.gather(*self._tasks, return_exceptions=True)

    # -- revisions across workers ---------------------------------------------------------

    def fresh(self) -> RevisionStore:
        """The revisions, with any another worker stored since the last look read first
        (a memory compare when none was: call it before every read of a revision)."""
        if self.peers is not None and self.peers.moved():
            self.peers.seen()
            for revision in self.revisions.scan():
                self._announce(revision)
        return self.revisions

    def heard(self, kind: str, name: str, data: bytes) -> None:
        """An event another worker published: a revision is read from disk (the truth), an
        upstream event passed on to this worker's streams; an upload began (`uploading`)."""
        if kind == "revision":
            self.fresh()
        elif kind == "upstream":
            self.events.deliver(kind, name, data)
        elif kind == "upload":
            self._load_checks(_MANIFESTS)

    def uploading(self) -> None:
        """An upload begins. A hub with no revision yet has loaded no manifest models, no
        cryptography and no consumer check (issue 18): they load now, in a thread, while the
        body arrives, here and in the other workers (which read the revision once it is
        stored), rather than in the event loop once it is in. Once per process."""
        if not self._checks_loading and self.peers is not None:
            self.peers.tell("upload", "-", b"")
        self._load_checks(_MANIFESTS, "memsync.views.consumer")

    def _load_checks(self, *modules: str) -> None:
        if not self._checks_loading:
            self._checks_loading = True
            self.later(lambda: _load(modules))

    @contextlib.asynccontextmanager
    async def publication(self, view_id: str) -> AsyncIterator[RevisionStore]:
        """Hold the view's publication lock in this process and across workers; yield the
        revisions with the view read from disk again."""
        async with self._locks.setdefault(view_id, asyncio.Lock()):
            path = self.locks_dir / view_id
            taking = asyncio.ensure_future(asyncio.to_thread(_lock_file, path))
            try:
                fd = await asyncio.shield(taking)
            except asyncio.CancelledError:
                taking.add_done_callback(_close_taken)
                raise
            try:
                self.fresh()
                newer = self.revisions.refresh(view_id)
                if newer is not None:
                    self._announce(newer)
                yield self.revisions
            finally:
                os.close(fd)

    def adopt(self, revision: Revision) -> bool:
        """Make a revision this worker stored current (under `publication`), announce it
        here and to the other workers; False if it was not above the current one."""
        if not self.revisions.promote(revision):
            return False
        data = self._announce(revision)
        if self.peers is not None:
            self.peers.bump()
            self.peers.tell("revision", revision.view_id, data)
        return True

    def _announce(self, revision: Revision) -> bytes:
        event = revision_event(revision.view_id, revision.revision, revision.package_sha256)
        return self.events.publish("revision", revision.view_id, event)

    def upstream(self, root: str, commit: str) -> None:
        """Tell every stream here and in the other workers that root `root` moved."""
        data = self.events.publish("upstream", root, upstream_event(root, commit))
        if self.peers is not None:
            self.peers.tell("upstream", root, data)

    # -- tokens and audit -----------------------------------------------------------------

    def authenticate(
        self, header: str | None, query: str, query_keys: Iterable[str]
    ) -> TokenInfo | str:
        """The token of an `Authorization` header, or why it is refused (`missing`,
        `malformed`, `unknown`, `expired`, `revoked`, or `in-url` for a token in the query)."""
        if query and (looks_like_token(query) or {"token", "access_token"} & set(query_keys)):
            return "in-url"
        raw = None
        if header is not None:
            scheme, _, raw = header.strip().partition(" ")
            raw = raw.strip() if scheme.lower() == "bearer" else "-"
        result = self.tokens.authenticate(raw)
        if isinstance(result, AuthFailure):
            return result.reason
        if self.tokens.touch_due(result.id):
            self.later(lambda: self.tokens.touch(result.id))
        return result

    def note_refusal(self, remote: str, code: str, target: str) -> None:
        """Audit a refused token, at most once a minute per address and reason."""
        now = time.monotonic()
        if now - self._refusals.get((remote, code), -1e9) < REFUSAL_AUDIT_INTERVAL:
            return
        if len(self._refusals) > 10_000:
            self._refusals.clear()
        self._refusals[(remote, code)] = now
        self.later(
            lambda: self.tokens.audit("auth.refuse", outcome=code, target=target, remote=remote)
        )

    def audit(
        self, token: TokenInfo, remote: str | None, action: str, target: str, outcome: str
    ) -> None:
        self.later(
            lambda: self.tokens.audit(
                action, outcome=outcome, target=target, token_id=token.id, remote=remote
            )
        )


def _load(modules: Sequence[str]) -> None:
    for module in modules:
        importlib.import_module(module)


def _lock_file(path: Path) -> int:
    """An open descriptor of `path` holding its exclusive flock (blocking: use a thread)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _close_taken(taking: asyncio.Future[int]) -> None:
    """Release a lock taken for a publication that was cancelled while it waited."""
    if not taking.cancelled() and taking.exception() is None:
        os.close(taking.result())
