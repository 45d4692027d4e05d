"""The process box: every child process memsync starts (git, role executors) runs here.

A child gets the environment its caller builds (never the daemon's own), its own process
group, stdin closed unless input is given, and a deadline: one watchdog thread for the
whole process kills the child's entire group (git and its ssh or helper children, an
agent CLI and whatever it spawned) when its time is up. Time is handed down as an absolute
`Deadline`, so a cycle that runs many processes is bounded as a whole, not per process.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import os
import re
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

from memsync.values import value


@value
class Deadline:
    """An absolute point on the monotonic clock; `seconds` is the budget it was made with."""

    at: float
    seconds: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)

    def remaining(self) -> float:
        return self.at - time.monotonic()

    def expired(self) -> bool:
        return self.remaining() <= 0

    def cap(self, seconds: float | None) -> float:
        """What a step may take: the time left, or less when `seconds` is smaller."""
        left = self.remaining()
        return left if seconds is None else min(left, seconds)


@value
class Completed:
    """A finished process: exit code, outputs (maybe only their tails), expiry."""

    returncode: int
    stdout: bytes
    stderr: bytes
    expired: bool  # the deadline passed and the process group was killed
    # How many bytes each output had in all (`stdout`/`stderr` may hold only the last ones).
    stdout_total: int | None = None
    stderr_total: int | None = None
    # An output pipe was still held open after the leader exited and its group was killed:
    # something it started left the group (setsid, a daemon) and outlived it.
    escaped: bool = False


class _Counter:
    """A count that threads (a cycle's prefetch beside its status) may add to at once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self) -> None:
        with self._lock:
            self.value += 1


_STARTED = _Counter()


def started() -> int:
    """How many child processes this process has started on the box so far (what a flow
    costs in processes: tests pin it)."""
    return _STARTED.value


# Once the leader has exited, how long its outputs are still read (what it wrote is in the
# pipe; a holder outside its group would otherwise keep the run open past every deadline).
PIPE_GRACE = 1.0


def search_path(value: str | None) -> str:
    """PATH as the box hands it to every child: its absolute entries only (the system's
    default when none is left). An empty or relative entry names a directory relative to
    wherever a program runs, and the box runs git in a root's work tree and a role's agent
    in its worktree: a `git`, an `ssh` or an agent found there must never be what runs."""
    kept = [entry for entry in (value or "").split(os.pathsep) if Path(entry).is_absolute()]
    return os.pathsep.join(kept) if kept else os.defpath


def child_env(env: Mapping[str, str]) -> dict[str, str]:
    """`env` as a child gets it: PATH through `search_path`."""
    out = dict(env)
    if "PATH" in out:
        out["PATH"] = search_path(out["PATH"])
    return out


def run_process(
    argv: Sequence[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    seconds: float,
    input: bytes | None = None,
    keep: int | None = None,
    on_start: Callable[[int], None] | None = None,
    on_stderr_line: Callable[[bytes], None] | None = None,
) -> Completed:
    """Run `argv` to completion or until `seconds` pass (then its whole group is killed).

    With `keep` (a program we do not trust to be quiet or tidy: a role's agent), only the
    last `keep` bytes of each output are held while it runs, and when it exits whatever it
    left running in its group is killed too. Either way the outputs are read only until
    `PIPE_GRACE` after the leader exited (at the deadline it is killed), whatever still
    holds a pipe: a process that left the group cannot hold the run open. FileNotFoundError
    propagates when the program does not exist; the caller names it. `on_start` is told
    the child's pid once it runs. `on_stderr_line` is handed each line of stderr as it
    arrives (ended by `\n` or `\r`: git redraws its progress with `\r`; a line longer than
    `MAX_STREAMED_LINE` is cut there), on the reading thread, while the deadline runs; the
    whole stderr is still returned as without it.
    """
    proc = subprocess.Popen(
        list(argv),
        cwd=cwd,
        env=child_env(env),
        stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    _STARTED.add()
    # The watchdog thread enforces the deadline (no polling wait here).
    ticket = _WATCHDOG.watch(proc, max(seconds, 0.0))
    try:
        if on_start is not None:
            on_start(proc.pid)
        drained = _Drain(proc, input, keep, on_stderr_line).run()
        # The leader has exited but is not reaped: its group id cannot have been given
        # to anyone else, so this reaches exactly what it left behind.
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        if keep is not None:
            kill_group(proc)
        _WATCHDOG.finish(ticket)  # before the reap frees the id: no late kill reaches it
        proc.wait()
    except BaseException:
        kill_group(proc)
        _close(proc)
        proc.wait()  # the group is dead; nothing is read any more
        raise
    finally:
        ticket.done = True
    totals = drained.totals if keep is not None else (None, None)
    return Completed(
        proc.returncode,
        drained.stdout,
        drained.stderr,
        ticket.expired,
        *totals,
        escaped=drained.held_open and keep is not None,
    )


class _Drain:
    """Feed the input and read both outputs until they close, or until `PIPE_GRACE`
    after the leader exited (an untrusted leader's group is killed as soon as it exits);
    with `keep`, holding at most the last `keep` (+1, so a cut shows) bytes of each."""

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        input: bytes | None,
        keep: int | None,
        on_stderr_line: Callable[[bytes], None] | None = None,
    ):
        self.proc, self.keep = proc, keep
        self.lines = _Lines(on_stderr_line) if on_stderr_line is not None else None
        self.stderr_fd = proc.stderr.fileno() if proc.stderr is not None else None
        self.pending = memoryview(input or b"")
        self.held: dict[int, bytearray] = {}
        self.counted: dict[int, int] = {}
        self.stdout = self.stderr = b""
        self.totals: tuple[int | None, int | None] = (0, 0)
        self.held_open = False  # a pipe was still open when reading stopped

    def run(self) -> _Drain:
        proc = self.proc
        exited_at: float | None = None
        pidfd = _pidfd(proc.pid)
        try:
            with selectors.DefaultSelector() as selector:
                for pipe in (proc.stdout, proc.stderr):
                    if pipe is not None:
                        self.held[pipe.fileno()] = bytearray()
                        selector.register(pipe.fileno(), selectors.EVENT_READ)
                if proc.stdin is not None:
                    if self.pending:
                        os.set_blocking(proc.stdin.fileno(), False)
                        selector.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
                    else:
                        proc.stdin.close()
                if pidfd is not None:
                    selector.register(pidfd, selectors.EVENT_READ)
                while any(fd != pidfd for fd in selector.get_map()):  # a pipe is open
                    if exited_at is None:
                        wait = None if pidfd is not None else _POLL
                    else:
                        wait = exited_at + PIPE_GRACE - time.monotonic()
                        if wait <= 0:
                            self.held_open = True
                            if self.keep is not None:
                                _kill_holders(fd for fd in self.held if fd in selector.get_map())
                            break
                    signalled = pidfd is None
                    for key, _events in selector.select(wait):
                        if key.fd == pidfd:
                            selector.unregister(pidfd)
                            signalled = True
                        elif key.fd in self.held:
                            self._read(selector, key.fd)
                        else:
                            self._write(selector, key.fd)
                    if exited_at is None and signalled and _exited(proc):
                        exited_at = time.monotonic()
                        if self.keep is not None:
                            kill_group(proc)  # not reaped yet: only its own group
        finally:
            if pidfd is not None:
                os.close(pidfd)
            self._finish()
        return self

    def _read(self, selector: selectors.BaseSelector, fd: int) -> None:
        chunk = os.read(fd, 65536)
        if not chunk:
            selector.unregister(fd)
            return
        self.counted[fd] = self.counted.get(fd, 0) + len(chunk)
        if self.lines is not None and fd == self.stderr_fd:
            self.lines.feed(chunk)
        buffer = self.held[fd]
        buffer += chunk
        keep = self.keep
        if keep is not None and len(buffer) > 2 * (keep + 1):
            del buffer[: len(buffer) - keep - 1]

    def _write(self, selector: selectors.BaseSelector, fd: int) -> None:
        try:
            self.pending = self.pending[os.write(fd, self.pending[:65536]) :]
        except BlockingIOError:
            return
        except BrokenPipeError:
            self.pending = self.pending[:0]
        if not self.pending:
            selector.unregister(fd)
            self.proc.stdin.close()  # type: ignore[union-attr]

    def _finish(self) -> None:
        if self.lines is not None:
            self.lines.close()
        proc = self.proc
        outs = []
        for pipe in (proc.stdout, proc.stderr):
            data = bytes(self.held.get(pipe.fileno(), b"")) if pipe is not None else b""
            outs.append(data if self.keep is None else data[-(self.keep + 1) :])
        self.stdout, self.stderr = outs
        self.totals = tuple(  # type: ignore[assignment]
            self.counted.get(p.fileno(), 0) if p else 0 for p in (proc.stdout, proc.stderr)
        )
        _close(proc)  # our ends: a holder left outside the group gets EPIPE, not our time


# The longest stderr line handed to a line callback; the rest of a longer one is dropped.
MAX_STREAMED_LINE = 4096


class _Lines:
    """stderr cut into lines for a callback, holding at most one partial line."""

    def __init__(self, callback: Callable[[bytes], None]) -> None:
        self.callback = callback
        self.partial = bytearray()

    def feed(self, chunk: bytes) -> None:
        *ended, rest = re.split(rb"[\r\n]", chunk)
        for piece in ended:
            self._add(piece)
            self._emit()
        self._add(rest)

    def _add(self, piece: bytes) -> None:
        self.partial += piece[: max(MAX_STREAMED_LINE - len(self.partial), 0)]

    def _emit(self) -> None:
        line = bytes(self.partial)
        self.partial.clear()
        if line:
            self.callback(line)

    def close(self) -> None:
        self._emit()


_POLL = 0.2  # seconds between exit checks where pidfd_open is missing


def _pidfd(pid: int) -> int | None:
    """A descriptor that turns readable when `pid` exits (Linux 5.3+), else None."""
    try:
        return os.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def _exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the leader has exited, without reaping it (its group id stays ours)."""
    try:
        return os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _kill_holders(fds: Iterable[int]) -> None:
    """SIGKILL every process holding the other end of these pipes: what an untrusted
    program left outside its group, found by the pipes' inodes in /proc (Linux)."""
    wanted = set()
    for fd in fds:
        with contextlib.suppress(OSError):
            wanted.add(f"pipe:[{os.fstat(fd).st_ino}]")
    if wanted:
        kill_strays(lambda pid: _holds(pid, wanted))


def kill_strays(matches: Callable[[int], bool]) -> int:
    """SIGKILL every other process of ours `matches` (given its pid); how many there were.
    Each is opened as a pidfd and matched again before the signal, so a pid reused
    meanwhile is spared. Linux only (nothing is found elsewhere)."""
    if not hasattr(signal, "pidfd_send_signal"):
        return 0
    me, uid, killed = os.getpid(), os.getuid(), 0
    for pid in _proc_entries():
        if pid == me or not _owned_by(pid, uid) or not matches(pid):
            continue
        pidfd = _pidfd(pid)
        if pidfd is None:
            continue
        try:
            if matches(pid):
                with contextlib.suppress(OSError):
                    signal.pidfd_send_signal(pidfd, signal.SIGKILL)
                    killed += 1
        finally:
            os.close(pidfd)
    return killed


def _owned_by(pid: int, uid: int) -> bool:
    try:
        return Path(f"/proc/{pid}").stat().st_uid == uid
    except OSError:
        return False


def _proc_entries() -> list[int]:
    try:
        return [int(path.name) for path in Path("/proc").iterdir() if path.name.isdigit()]
    except OSError:
        return []


def _holds(pid: int, links: set[str]) -> bool:
    try:
        held = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for link in held:
        with contextlib.suppress(OSError):
            if str(link.readlink()) in links:
                return True
    return False


def _close(proc: subprocess.Popen[bytes]) -> None:
    for pipe in (proc.stdin, proc.stdout, proc.stderr):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


class _Ticket:
    __slots__ = ("done", "expired", "proc")

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.done = False
        self.expired = False


class _Watchdog:
    """One thread for every deadline in the process (a thread per call costs ~1 ms)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """No deadline watched, no thread yet (also a forked child's start)."""
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, _Ticket]] = []
        self._seq = itertools.count()
        self._thread: threading.Thread | None = None

    def watch(self, proc: subprocess.Popen[bytes], seconds: float) -> _Ticket:
        ticket = _Ticket(proc)
        with self._cond:
            heapq.heappush(self._heap, (time.monotonic() + seconds, next(self._seq), ticket))
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(
                    target=self._loop, name="process-watchdog", daemon=True
                )
                self._thread.start()
            self._cond.notify()
        return ticket

    def finish(self, ticket: _Ticket) -> None:
        """Stop watching `ticket` (under the lock the kill is made with)."""
        with self._cond:
            ticket.done = True

    def _loop(self) -> None:
        with self._cond:
            while True:
                while self._heap and self._heap[0][2].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, _, ticket = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                ticket.expired = True
                kill_group(ticket.proc)


_WATCHDOG = _Watchdog()
# A forked child (`packs.fold_behind`) has no watchdog thread, and its copy of the lock may
# have been held by the parent's: it starts with a fresh one.
os.register_at_fork(after_in_child=_WATCHDOG.reset)


class Session:
    """A child that answers requests on its stdin as it reads them (`git cat-file --batch`),
    on the box like any other: the environment its caller builds, its own process group,
    and a deadline the one watchdog enforces by killing the group (a read then sees the
    end of its output: `EOFError`). Its stderr is discarded; a caller that needs git's
    words asks again with a one-shot `run_process`. `close` kills the group and reaps it:
    nothing outlives the `with` block that holds it.
    """

    def __init__(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str], seconds: float
    ) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=child_env(env),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _STARTED.add()
        self._ticket = _WATCHDOG.watch(self.proc, max(seconds, 0.0))
        self.closed = False

    @property
    def expired(self) -> bool:
        return self._ticket.expired

    def ask(self, line: bytes) -> None:
        """Send one request (a line); EOFError when the child is gone."""
        stdin = self.proc.stdin
        if self.closed or stdin is None:
            raise EOFError("the session is closed")
        try:
            stdin.write(line)
            stdin.flush()
        except (BrokenPipeError, ValueError) as exc:
            raise EOFError("the session's child is gone") from exc

    def read_line(self, limit: int) -> bytes:
        """One line of its answer, newline included, of at most `limit` bytes."""
        stdout = self.proc.stdout
        if self.closed or stdout is None:
            raise EOFError("the session is closed")
        line = stdout.readline(limit + 1)
        if not line.endswith(b"\n") or len(line) > limit:
            raise EOFError("the session's answer ended or ran long")
        return line

    def read_exact(self, size: int) -> bytes:
        stdout = self.proc.stdout
        if self.closed or stdout is None:
            raise EOFError("the session is closed")
        data = stdout.read(size)
        if len(data) != size:
            raise EOFError("the session's answer ended early")
        return data

    def close(self) -> None:
        """Kill its group (it holds nothing worth finishing) and reap it."""
        if self.closed:
            return
        self.closed = True
        kill_group(self.proc)  # not reaped yet: its group id is still its own
        _WATCHDOG.finish(self._ticket)
        _close(self.proc)
        self.proc.wait()
        self._ticket.done = True

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
