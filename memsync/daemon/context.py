"""What a root's or view's worker may use of the daemon, and nothing more.

`WorkerContext` is the whole of a worker's view of `app.Daemon`: the cycle threads, the
metrics it updates, the daemon's settings as they are now (a reload replaces them), where
its results go, and the task group, scheduler and file watches its own `start`, `retime`
and `stop` use. A worker never holds the daemon, so one can be built and run without it.
`Jobs` is one worker's interval jobs on the scheduler.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Hashable
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from apscheduler.triggers.interval import IntervalTrigger

if TYPE_CHECKING:
    import asyncio

    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from memsync.config.model import Settings
    from memsync.daemon.metrics import Metrics
    from memsync.daemon.triggers import Trigger
    from memsync.daemon.watch import Watches
    from memsync.roots.result import SyncResult
    from memsync.views.pull import ViewResult


@dataclass(frozen=True)
class WorkerContext:
    """The daemon's parts a worker uses; each is shared by every worker."""

    pool: Executor  # the cycle threads: sync cycles, maintenance cycles, `behind`
    metrics: Metrics
    settings: Callable[[], Settings]  # the daemon's settings now (state_dir, cycles)
    synced: Callable[[SyncResult], None]  # every root result: transitions, hooks
    pulled: Callable[[ViewResult], None]  # every view result
    spawn: Callable[[Coroutine[Any, Any, None], str], asyncio.Task[None]]  # in the group
    scheduler: AsyncIOScheduler
    watches: Callable[[], Watches]  # made when a root first watches (watchdog loads then)


class Jobs:
    """One worker's interval jobs (jittered by a tenth, coalesced, one at a time), each
    feeding a trigger. A job is added again only when it is new or its interval changed,
    so a reload that leaves it alone keeps its next run."""

    def __init__(self, scheduler: AsyncIOScheduler) -> None:
        self._scheduler = scheduler
        self._seconds: dict[str, float] = {}  # the jobs this worker has, by id

    def every(
        self,
        job_id: str,
        seconds: float,
        trigger: Trigger,  # type: ignore[type-arg]
        options: Hashable,
    ) -> None:
        seconds = max(seconds, 1.0)
        if self._seconds.get(job_id) == seconds:
            return

        async def tick() -> None:
            trigger.request(options)

        self._scheduler.add_job(
            tick,
            IntervalTrigger(seconds=seconds, jitter=seconds / 10),
            id=job_id,
            coalesce=True,
            max_instances=1,
            replace_existing=True,
            misfire_grace_time=int(seconds),
        )
        self._seconds[job_id] = seconds

    def drop(self, job_id: str) -> None:
        if self._seconds.pop(job_id, None) is not None and self._scheduler.get_job(job_id):
            self._scheduler.remove_job(job_id)

    def drop_all(self) -> None:
        for job_id in list(self._seconds):
            self.drop(job_id)
