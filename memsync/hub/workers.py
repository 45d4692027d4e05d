"""One hub, several worker processes on one port (`memsync hub serve --workers N`).

The process `hub serve` started is the supervisor. It
1. takes the data dir's lock (one hub per data dir; the workers inherit it), checks the
   data dir is a hub's, prunes the audit log and drops what a crash left behind; loads the
   manifest's models when revisions are stored (each worker reads them: one import, shared);
2. binds one socket per worker and address with `SO_REUSEPORT`, after checking that no
   other program holds the port: the kernel spreads new connections over the workers;
3. makes the shared counters and the inboxes (`peers.Board`) and forks the workers, which
   share nothing else but the data dir (the truth: revisions are files, tokens are rows
   in `hub.db`, so a revoked token is refused by every worker on its next request) and
   their metrics' counter files (`metrics.py`: any worker answers `/metrics` with the
   hub's totals);
4. logs the URL once every worker listens;
5. waits. On SIGTERM or SIGINT it closes the lifeline pipe; every worker then stops
   gracefully (streams closed, background writes drained) and exits 0, and so does the
   supervisor. A worker that ends any other way (a crash, SIGKILL, the OOM killer) is
   logged, the others are stopped, and the hub exits 3 (`WorkerFailed`): nothing is
   restarted silently; systemd (`Restart=on-failure`) starts the whole hub again.

Workers ignore SIGTERM and SIGINT (signal the supervisor, the unit's main process); a
worker whose supervisor is gone (SIGKILL) sees the lifeline close and stops as well.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import logging
import os
import select
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from memsync.errors import MemsyncError, UsageError
from memsync.hub.app import hub_runner, hub_site, lock_data_dir, make_app
from memsync.hub.guard import Limits
from memsync.hub.metrics import prepare_shared, share_counts
from memsync.hub.peers import Board, Peers
from memsync.hub.revisions import RevisionStore
from memsync.hub.tokens import open_store

log = logging.getLogger("memsync.hub")

STOP_GRACE = 20.0  # seconds the workers get to stop before they are killed (`--stop-grace`)
_HANDLED = frozenset({signal.SIGTERM, signal.SIGINT, signal.SIGCHLD})
_READY = b"r"


class WorkerFailed(MemsyncError):
    """A worker process ended without being asked to: the whole hub stops (exit 3)."""

    def __init__(self, message: str, exit_code: int = 3) -> None:
        super().__init__(message, hint="see the log above; the hub stopped every worker")
        self.exit_code = exit_code


def default_workers() -> int:
    """The number of cores this process may run on (all of them where a sandbox hides
    the affinity system call)."""
    try:
        return len(os.sched_getaffinity(0))
    except OSError:
        return os.cpu_count() or 1


def _check_port_free(family: int, address: tuple[object, ...]) -> int:
    """Bind once without `SO_REUSEPORT`, so that a port another program (or another hub)
    listens on is refused rather than shared; return the port (resolving port 0)."""
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        probe.bind(address)
        return int(probe.getsockname()[1])


def bind_sockets(host: str, port: int, count: int) -> list[list[socket.socket]]:
    """For each of `count` workers, its sockets (one per address of `host`), bound to one
    port, with `SO_REUSEPORT` when there are several; `UsageError` if that cannot be done."""
    if count > 1 and not hasattr(socket, "SO_REUSEPORT"):
        raise UsageError("--workers above 1 needs SO_REUSEPORT (Linux)", hint="use --workers 1")
    shown = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    bound: list[list[socket.socket]] = [[] for _ in range(count)]
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        seen: set[tuple[int, object]] = set()
        for family, _type, _proto, _name, address in infos:
            if (family, address[0]) in seen:
                continue
            seen.add((family, address[0]))
            if count > 1:
                port = _check_port_free(family, (address[0], port, *address[2:]))
            for sockets in bound:
                sock = socket.socket(family, socket.SOCK_STREAM)
                sockets.append(sock)
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if count > 1:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                if family == socket.AF_INET6:
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                sock.bind((address[0], port, *address[2:]))
                port = int(sock.getsockname()[1])  # port 0: the one chosen for the first
    except OSError as exc:
        for sock in (s for sockets in bound for s in sockets):
            sock.close()
        reason = exc.strerror or str(exc)
        raise UsageError(f"cannot listen on {shown}: {reason}") from exc
    return bound


def _prepare(data_dir: Path) -> None:
    """What a hub of one process does when it starts, done once for all workers."""
    store = open_store(data_dir)  # `TokenError` if this is not a hub data dir
    try:
        store.prune_audit()
    finally:
        store.close()
    revisions = RevisionStore(data_dir)
    revisions.clean()
    if revisions.holds_any():
        # Every worker reads the stored revisions when it starts: the manifest's models
        # and cryptography (~170 ms of CPU) load once, here, and the forks share them.
        import memsync.views.manifest  # noqa: F401, PLC0415 - a hub without revisions: not yet
    prepare_shared(data_dir)  # the workers' metrics start at zero


def serve_workers(
    data_dir: Path,
    host: str,
    port: int,
    count: int,
    limits: Limits | None = None,
    stop_grace: float = STOP_GRACE,
) -> None:
    """Run the hub as `count` worker processes until SIGTERM or SIGINT (see above)."""
    lock = lock_data_dir(data_dir)
    try:
        _prepare(data_dir)
        sockets = bind_sockets(host, port, count)
        try:
            Supervisor(data_dir, sockets, limits or Limits(), stop_grace).run()
        finally:
            for sock in (s for group in sockets for s in group):
                sock.close()  # (closed already, unless the forks failed)
    finally:
        os.close(lock)


@dataclass
class Supervisor:
    """Forks the workers, forwards stop signals through the lifeline, reaps them."""

    data_dir: Path
    sockets: list[list[socket.socket]]
    limits: Limits = field(default_factory=Limits)
    stop_grace: float = STOP_GRACE  # seconds the workers get to stop once told to
    workers: dict[int, int] = field(default_factory=dict)  # pid -> index
    stopping: bool = False
    failure: WorkerFailed | None = None
    _address: tuple[str, int] = ("", 0)
    _lifeline_w: int = -1
    _deadline: float = float("inf")

    def run(self) -> None:
        count = len(self.sockets)
        self._address = self.sockets[0][0].getsockname()[:2]
        board = Board(count, self.limits.connections())
        lifeline_r, self._lifeline_w = os.pipe()
        wake_r, wake_w = os.pipe()
        for fd in (wake_r, wake_w):
            os.set_blocking(fd, False)
        ready = [os.pipe() for _ in range(count)]
        inherited = [lifeline_r, self._lifeline_w, wake_r, wake_w]
        inherited += [fd for pair in ready for fd in pair]
        previous = {signum: signal.signal(signum, self._on_signal) for signum in _HANDLED}
        old_wakeup = signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
        try:
            # A stop asked for while workers are forked waits until all are: it closes the
            # lifeline, which the next workers would otherwise find closed under them.
            signal.pthread_sigmask(signal.SIG_BLOCK, _HANDLED)
            try:
                for index in range(count):
                    own = (lifeline_r, ready[index][1])
                    self._fork(index, board, [fd for fd in inherited if fd not in own], own)
            finally:
                signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)
            board.close()
            for sock in (s for group in self.sockets for s in group):
                sock.close()  # the workers' now
            os.close(lifeline_r)
            for _read_end, write_end in ready:
                os.close(write_end)
            self._wait(wake_r, {read_end: index for index, (read_end, _) in enumerate(ready)})
        finally:
            signal.set_wakeup_fd(old_wakeup)
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            for fd in (wake_r, wake_w, self._lifeline_w):
                with contextlib.suppress(OSError):
                    os.close(fd)
        if self.failure is not None:
            raise self.failure

    def _on_signal(self, signum: int, _frame: FrameType | None) -> None:
        if signum != signal.SIGCHLD:
            self._stop()

    def _stop(self) -> None:
        if not self.stopping:
            self.stopping = True
            self._deadline = time.monotonic() + self.stop_grace
            with contextlib.suppress(OSError):
                os.close(self._lifeline_w)

    def _fork(self, index: int, board: Board, spare: list[int], own: tuple[int, int]) -> None:
        """Fork worker `index`, which keeps `own` (the lifeline's read end, its ready pipe's
        write end) and closes the `spare` descriptors and the other workers' sockets."""
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid:
            self.workers[pid] = index
            return
        code = 3
        try:  # the worker: never returns into the caller's code
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, _HANDLED)  # blocked while forking
            for fd in spare:
                os.close(fd)
            for other, group in enumerate(self.sockets):
                if other != index:
                    for sock in group:
                        sock.close()
            share_counts(self.data_dir)
            peers = board.member(index)
            code = _run_worker(self.data_dir, self.sockets[index], peers, self.limits, *own)
        except BaseException:  # a worker logs and exits: nothing may escape
            log.exception("hub worker %d failed", os.getpid())
        finally:
            os._exit(code)

    def _wait(self, wake_r: int, unready: dict[int, int]) -> None:
        pending = len(self.workers)
        while self.workers:
            timeout = None  # no deadline, or none left once the late workers were killed
            if self.stopping and self._deadline != float("inf"):
                timeout = max(0.0, self._deadline - time.monotonic())
            readable, _, _ = select.select([wake_r, *unready], [], [], timeout)
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 512)
            for fd in readable:
                if fd in unready:
                    if os.read(fd, 1) == _READY:
                        pending -= 1
                    del unready[fd]
                    os.close(fd)
                    if pending == 0 and not self.stopping:
                        self._serving()
            self._reap()
            if self.stopping and self.workers and time.monotonic() >= self._deadline:
                for pid in self.workers:
                    log.error(
                        "hub worker %d did not stop in %g s: killing it", pid, self.stop_grace
                    )
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                self.failure = self.failure or WorkerFailed("a hub worker did not stop in time")
                self._deadline = float("inf")
        for fd in unready:
            os.close(fd)

    def _serving(self) -> None:
        address, port = self._address
        shown = f"[{address}]" if ":" in address else address
        log.info("memsync hub: %d worker processes %s", len(self.workers), sorted(self.workers))
        log.info("memsync hub serving %s on http://%s:%d", self.data_dir, shown, port)
        if not ipaddress.ip_address(address).is_loopback:
            log.warning("plain HTTP on a non-loopback address: put a TLS proxy in front of it")

    def _reap(self) -> None:
        for pid in list(self.workers):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done == 0:
                continue
            del self.workers[pid]
            code = os.waitstatus_to_exitcode(status)
            if code == 0 and self.stopping:
                continue
            how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
            log.error("hub worker %d %s; stopping the hub", pid, how)
            self.failure = self.failure or WorkerFailed(
                f"hub worker {pid} {how}", exit_code=2 if code == 2 else 3
            )
            self._stop()


def _run_worker(
    data_dir: Path,
    sockets: list[socket.socket],
    peers: Peers,
    limits: Limits,
    lifeline: int,
    ready: int,
) -> int:
    """A worker's life: its exit status (0 once told to stop)."""
    try:
        asyncio.run(_serve(data_dir, sockets, peers, limits, lifeline, ready))
    except MemsyncError as exc:
        log.error("hub worker %d: %s", os.getpid(), exc.message)
        return exc.exit_code
    return 0


async def _serve(
    data_dir: Path,
    sockets: list[socket.socket],
    peers: Peers,
    limits: Limits,
    lifeline: int,
    ready: int,
) -> None:
    """Serve on `sockets` until the lifeline closes, then stop gracefully."""
    runner = hub_runner(make_app(data_dir, peers=peers, limits=limits))
    await runner.setup()
    try:
        for sock in sockets:
            await hub_site(runner, sock).start()
        loop = asyncio.get_running_loop()
        stop = asyncio.Event()
        loop.add_reader(lifeline, stop.set)  # readable at EOF: the supervisor let go
        os.write(ready, _READY)
        os.close(ready)
        await stop.wait()
        loop.remove_reader(lifeline)
    finally:
        await runner.cleanup()
