"""The daemon's schedule: interval jobs on its asyncio loop (issue 18).

A job runs first one interval after it is added, then every interval after its previous
planned run, each run delayed by a jitter drawn anew (uniform, at most `jitter` seconds):
the interval jobs APScheduler's `IntervalTrigger` ran before, without its import (~0.1 s of
CPU at every daemon start, reading every installed package's metadata). A loop that was
busy past a job's time runs it once (coalesced) and plans the next run after now. Times are
the loop's monotonic clock, so a step of the wall clock moves no job; `next_run` gives the
wall-clock moment a status report shows.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class _Job:
    __slots__ = ("action", "due", "handle", "interval", "jitter", "wall")

    def __init__(self, interval: float, jitter: float, action: Callable[[], object]) -> None:
        self.interval = interval
        self.jitter = jitter
        self.action = action
        self.due = 0.0  # the loop's clock
        self.wall = 0.0  # the same moment as a POSIX timestamp
        self.handle: asyncio.TimerHandle | None = None

    def step(self) -> float:
        return self.interval + random.uniform(0, self.jitter)  # noqa: S311 - a spread, no secret


class Schedule:
    """Interval jobs by id on `loop`; adding an id again replaces its job."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._jobs: dict[str, _Job] = {}

    def add(self, job_id: str, seconds: float, jitter: float, action: Callable[[], object]) -> None:
        """Run `action` every `seconds` (at least 1) plus up to `jitter`, first one interval
        from now; a job already under `job_id` is removed first."""
        self.remove(job_id)
        job = _Job(max(seconds, 1.0), max(jitter, 0.0), action)
        self._jobs[job_id] = job
        self._plan(job, self._loop.time())

    def remove(self, job_id: str) -> None:
        job = self._jobs.pop(job_id, None)
        if job is not None and job.handle is not None:
            job.handle.cancel()
            job.handle = None  # a job running now is not planned again

    def ids(self) -> list[str]:
        return list(self._jobs)

    def next_run(self, job_id: str) -> float | None:
        """When the job runs next, as a POSIX timestamp (None for no such job)."""
        job = self._jobs.get(job_id)
        if job is None:
            return None
        return job.wall

    def shutdown(self) -> None:
        """Remove every job (nothing runs after this)."""
        for job_id in list(self._jobs):
            self.remove(job_id)

    def _plan(self, job: _Job, start: float) -> None:
        due = start + job.step()
        now = self._loop.time()
        while due <= now:  # missed while the loop was busy: one run, the next after now
            due += job.step()
        job.due = due
        job.wall = time.time() + (due - now)
        job.handle = self._loop.call_at(due, self._run, job)

    def _run(self, job: _Job) -> None:
        try:
            job.action()
        except Exception:  # a failing job is logged and keeps its schedule
            log.exception("scheduled job failed")
        if job.handle is not None:  # not removed by its action
            self._plan(job, job.due)
