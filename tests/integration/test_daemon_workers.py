"""A worker sees the daemon only through its `WorkerContext` (issue 20, item 5): built on a
context and no `Daemon`, it starts, runs, hands its results to the context's callbacks,
keeps its jobs, moves only the jobs whose interval changed, and stops."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from memsync.config import load_config_text
from memsync.config.model import Settings, settings_from
from memsync.daemon.context import WorkerContext
from memsync.daemon.metrics import Metrics
from memsync.daemon.watch import new_observer
from memsync.daemon.workers import AUTOMATIC, PULL, RootWorker, ViewWorker
from memsync.roots.result import SyncResult
from memsync.views.pull import ViewResult
from tests.conftest import Team
from tests.kit import free_port

CONFIG = """\
version: 1
state_dir: {state}
control: {{socket: {state}/memsync.sock}}
roots:
  bob: {{path: {root}, watch: true, sync: {{interval: 1h}}}}
views:
  team: {{root: bob, refresh: 2h, source: {{kind: http, url: "http://127.0.0.1:{port}/v1/views/a"}},
         trust: {{keys: ["ed25519:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA"]}}}}
"""


@dataclass
class Seen:
    """What the context's callbacks were handed."""

    synced: list[SyncResult]
    pulled: list[ViewResult]


@pytest.fixture
def settings(team: Team, tmp_path: Path) -> Settings:
    text = CONFIG.format(state=tmp_path / "state", root=team.bob.path, port=free_port())
    return settings_from(load_config_text(text, tmp_path), tmp_path / "config.yaml")


@pytest.fixture
async def context(settings: Settings) -> AsyncIterator[tuple[WorkerContext, Seen]]:
    """A context of real parts (threads, metrics, scheduler, inotify watches), no daemon;
    every task it spawns is ended at the end."""
    seen = Seen([], [])
    spawned: list[asyncio.Task[None]] = []
    scheduler = AsyncIOScheduler(event_loop=asyncio.get_running_loop())
    scheduler.start()
    watches = new_observer()
    watches.start()

    def spawn(coro: Any, name: str) -> asyncio.Task[None]:
        task = asyncio.get_running_loop().create_task(coro, name=name)
        spawned.append(task)
        return task

    with ThreadPoolExecutor(2, thread_name_prefix="cycle") as pool:
        yield (
            WorkerContext(
                pool=pool,
                metrics=Metrics(),
                settings=lambda: settings,
                synced=seen.synced.append,
                pulled=seen.pulled.append,
                spawn=spawn,
                scheduler=scheduler,
                watches=lambda: watches,
            ),
            seen,
        )
        for task in spawned:
            task.cancel()
        await asyncio.gather(*spawned, return_exceptions=True)
        scheduler.shutdown(wait=False)
        watches.stop()


def jobs(context: WorkerContext) -> dict[str, Any]:
    """The scheduler's jobs by id, with when each runs next."""
    return {job.id: job.next_run_time for job in context.scheduler.get_jobs()}


async def test_a_root_worker_runs_on_its_context_alone(
    settings: Settings, context: tuple[WorkerContext, Seen]
) -> None:
    ctx, seen = context
    worker = RootWorker(ctx, settings.roots[0])
    worker.start()
    assert set(jobs(ctx)) == {"sync:bob"}  # the maintenance cycles are off by default
    assert worker.watcher is not None  # `watch: true` and the path is a directory
    result = await asyncio.wait_for(worker.trigger.request(AUTOMATIC, explicit=True), 60)
    assert result.ok and seen.synced == [result]
    behind = ctx.metrics.registry.get_sample_value("memsync_root_behind_commits", {"root": "bob"})
    assert behind == 0
    worker.stop()
    assert jobs(ctx) == {} and worker.watcher is None and worker.trigger.closed
    assert worker.task is not None
    await asyncio.wait_for(worker.task, 10)  # its trigger's loop ends with the worker


async def test_retime_moves_exactly_the_jobs_whose_interval_changed(
    settings: Settings, context: tuple[WorkerContext, Seen]
) -> None:
    ctx, _ = context
    (root,), (view,) = settings.roots, settings.views
    worker, vworker = RootWorker(ctx, root), ViewWorker(ctx, view)
    worker.start()
    vworker.start()
    before = jobs(ctx)
    assert set(before) == {"sync:bob", "view:team"}
    # What a reload does: the same settings again (new values, equal), then one change.
    worker.retime(replace(root))
    vworker.retime(replace(view))
    assert jobs(ctx) == before
    worker.retime(replace(root, interval=timedelta(hours=3)))
    after = jobs(ctx)
    assert after["view:team"] == before["view:team"]
    assert after["sync:bob"] > before["view:team"] > before["sync:bob"]  # 3h > 2h > 1h
    worker.retime(replace(root, interval=timedelta(hours=3), sync_enabled=False, watch=False))
    assert set(jobs(ctx)) == {"view:team"} and worker.watcher is None
    worker.retime(replace(root, insight_enabled=True))
    assert set(jobs(ctx)) == {"sync:bob", "insight:bob", "view:team"}
    assert worker.watcher is not None  # watching again
    worker.stop()
    vworker.stop()
    assert jobs(ctx) == {}


async def test_a_view_worker_runs_on_its_context_alone(
    settings: Settings, context: tuple[WorkerContext, Seen]
) -> None:
    ctx, seen = context
    vworker = ViewWorker(ctx, settings.views[0])
    vworker.start()
    result = await asyncio.wait_for(vworker.trigger.request(PULL, explicit=True), 60)
    assert result.status == "unavailable"  # nothing listens on the hub's port
    assert seen.pulled == [result] and seen.synced == []
    vworker.stop()
    assert jobs(ctx) == {}
