"""Per-root and per-view triggers that coalesce, and back-off after failures.

Timer ticks, file events, hub events, SIGHUP and control-socket requests all feed one
`Trigger` per root or view. A burst runs at most one more job: while a job runs, every
request for the same options joins the one pending job and gets its verdict. A failing key
backs off exponentially with jitter (capped) for automatic triggers; a person's explicit
request (`sync-now`) is never held back. Time is passed in, so the logic is tested with a
fake clock and no event loop tricks.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")
Opt = TypeVar("Opt", bound=Hashable)  # the job's options (a frozen dataclass)


@dataclass
class Backoff:
    """Exponential back-off with full jitter: `base * 2**(n-1)`, capped, times [0.5, 1)."""

    base: float = 2.0
    cap: float = 300.0
    failures: int = 0
    until: float = 0.0  # the clock value before which automatic runs wait
    rng: Callable[[], float] = field(default=random.random, repr=False)

    def failed(self, now: float) -> float:
        """Record a failure at `now`; the delay before the next automatic run."""
        self.failures += 1
        full: float = min(self.cap, self.base * 2.0 ** (self.failures - 1))
        delay = full * (0.5 + self.rng() / 2)
        self.until = now + delay
        return delay

    def succeeded(self) -> None:
        self.failures = 0
        self.until = 0.0

    def wait(self, now: float) -> float:
        """Seconds an automatic run must still wait (0 when it may run now)."""
        return max(0.0, self.until - now)


class Trigger(Generic[Opt, T]):
    """One key's job queue: at most one job runs; requests coalesce into one pending job
    per options value; a failing job backs automatic runs off.

    `run(options)` does the work (in a worker thread, say) and returns the verdict;
    `failed(verdict)` says whether it counts as a failure for back-off.
    """

    def __init__(
        self,
        name: str,
        run: Callable[[Opt], Awaitable[T]],
        failed: Callable[[T], bool],
        *,
        backoff: Backoff | None = None,
        clock: Callable[[], float] | None = None,
        held: Callable[[], bool] | None = None,
    ) -> None:
        self.name = name
        self._run = run
        self._failed = failed
        self.backoff = backoff or Backoff()
        self._clock = clock or (lambda: asyncio.get_running_loop().time())
        # While `held()` says so, automatic jobs are dropped (answered with the last verdict)
        # instead of run: a person's explicit request still runs.
        self._held = held or (lambda: False)
        self._pending: dict[Opt, asyncio.Future[T]] = {}
        self._automatic: dict[Opt, bool] = {}  # pending jobs nobody waits for explicitly
        self._wake = asyncio.Event()
        self.running: Opt | None = None
        self.runs = 0  # jobs finished, with a verdict or an error
        self.last: T | None = None
        self.error: str | None = None  # the last job's error, when it raised one
        self.closed = False

    def request(self, options: Opt, *, explicit: bool = False) -> asyncio.Future[T]:
        """Ask for one job with `options`; joins a pending one if there is one."""
        future = self._pending.get(options)
        if future is None:
            future = asyncio.get_running_loop().create_future()
            future.add_done_callback(_retrieve)  # automatic jobs have no one to read errors
            self._pending[options] = future
            self._automatic[options] = not explicit
        elif explicit:
            self._automatic[options] = False
        self._wake.set()
        return future

    def held(self) -> bool:
        """Whether automatic jobs are held (dropped, not run) right now."""
        return self._held()

    def pending(self) -> bool:
        return bool(self._pending)

    async def serve(self) -> None:
        """Run pending jobs one at a time until `close()`; never raises for a job's error."""
        while not self.closed:
            if not self._pending:
                self._wake.clear()
                await self._wake.wait()
                continue
            options = next(iter(self._pending))
            if self._automatic[options] and self._held():
                self._drop_held(options)
                continue
            if self._automatic[options]:
                delay = self.backoff.wait(self._clock())
                if delay > 0:
                    self._wake.clear()
                    # An explicit request or close() wakes us early; else wait the delay out.
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), timeout=delay)
                    if self.closed or not self._automatic.get(options, False):
                        continue
                    if self.backoff.wait(self._clock()) > 0:
                        continue
            future = self._pending.pop(options)
            self._automatic.pop(options, None)
            self.running = options
            try:
                verdict = await self._run(options)
            except Exception as exc:  # the job's own error: reported, never fatal
                self.error = f"{type(exc).__name__}: {exc}"[:200]
                self.backoff.failed(self._clock())
                if not future.done():
                    future.set_exception(exc)
                continue
            finally:
                self.running = None
                self.runs += 1
            self.last, self.error = verdict, None
            if self._failed(verdict):
                self.backoff.failed(self._clock())
            else:
                self.backoff.succeeded()
            if not future.done():
                future.set_result(verdict)

    def _drop_held(self, options: Opt) -> None:
        future = self._pending.pop(options)
        self._automatic.pop(options, None)
        if future.done():
            return
        if self.last is not None:
            future.set_result(self.last)
        else:
            future.cancel()

    def close(self) -> None:
        """Stop after the running job; pending requests fail with CancelledError."""
        self.closed = True
        for future in self._pending.values():
            if not future.done():
                future.cancel()
        self._pending.clear()
        self._wake.set()


def _retrieve(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()
