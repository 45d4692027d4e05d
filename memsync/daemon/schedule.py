"""The daemon's interval jobs, on its event loop.

A job runs every `seconds` plus a jitter drawn for each run (up to `jitter` seconds), the
first one interval after it is added; the runs a busy or suspended loop missed are
coalesced into one, and a run later than one interval is skipped. That is what APScheduler's
`IntervalTrigger` with `coalesce=True` and `misfire_grace_time` of one interval did, which
the daemon used before: its import (`importlib.metadata` and the entry points of every
installed package, tzlocal, multiprocessing) cost each daemon's start ~80 ms of CPU and
held ~4 MB at rest for three calls (issue 18). Times are wall-clock (a job's next run is a
moment people read in `status`); the loop's timer wakes the scheduler for the next one.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime


class Job:
    """One interval job: its id, when it runs next (aware UTC), what it calls."""

    def __init__(self, job_id: str, seconds: float, jitter: float, action: Callable[[], object]):
        self.id = job_id
        self.seconds = seconds
        self.jitter = jitter
        self.action = action
        self.at = 0.0  # the next run, a POSIX timestamp
        self.handle: asyncio.TimerHandle | None = None

    @property
    def next_run_time(self) -> datetime | None:
        return datetime.fromtimestamp(self.at, UTC) if self.handle is not None else None

    def following(self, moment: float) -> float:
        """The run after the one at `moment`."""
        spread = random.uniform(0, self.jitter) if self.jitter else 0.0  # noqa: S311 - a schedule
        return moment + self.seconds + spread


class Scheduler:
    """Interval jobs by id on `loop`, running from when they are added to `shutdown`."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._jobs: dict[str, Job] = {}
        self._closed = False

    def add_job(
        self, job_id: str, seconds: float, action: Callable[[], object], *, jitter: float = 0.0
    ) -> None:
        """Run `action` every `seconds` from now on (replacing a job of that id)."""
        self.remove_job(job_id)
        if self._closed:
            return
        job = Job(job_id, seconds, jitter, action)
        job.at = job.following(time.time())
        self._jobs[job_id] = job
        self._arm(job)

    def get_job(self, job_id: str) -> Job | None:
        return self._jobs.get(job_id)

    def get_jobs(self) -> list[Job]:
        return list(self._jobs.values())

    def remove_job(self, job_id: str) -> None:
        job = self._jobs.pop(job_id, None)
        if job is not None and job.handle is not None:
            job.handle.cancel()
            job.handle = None

    def shutdown(self) -> None:
        """No job runs again."""
        self._closed = True
        for job_id in list(self._jobs):
            self.remove_job(job_id)

    def _arm(self, job: Job) -> None:
        job.handle = self._loop.call_later(max(job.at - time.time(), 0.0), self._due, job)

    def _due(self, job: Job) -> None:
        if self._jobs.get(job.id) is not job:
            return
        now = time.time()
        last = None
        while job.at <= now:  # every run due by now, coalesced into one
            last, job.at = job.at, job.following(job.at)
        self._arm(job)
        if last is not None and now - last <= job.seconds:  # not missed
            job.action()
