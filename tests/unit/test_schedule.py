"""The daemon's interval jobs (`daemon.schedule`): when a job runs, what a late loop runs,
what a removed job and a shut-down scheduler run (nothing)."""

from __future__ import annotations

import asyncio
import time

from memsync.daemon.schedule import Scheduler


async def test_a_job_runs_every_interval_jittered_within_its_bound() -> None:
    scheduler = Scheduler(asyncio.get_running_loop())
    before = time.time()
    for n in range(20):  # each draws its jitter: one past the bound would show
        scheduler.add_job(f"slow-{n}", 3600, lambda: None, jitter=360)
    jobs = scheduler.get_jobs()
    assert [job.id for job in jobs] == [f"slow-{n}" for n in range(20)]
    for job in jobs:
        when = job.next_run_time
        assert when is not None
        assert before + 3600 <= when.timestamp() <= time.time() + 3600 + 360
    assert scheduler.get_job("slow-0") is jobs[0]
    # A job of a short interval runs, again and again, on the loop's timer.
    runs: list[float] = []
    added = time.time()
    scheduler.add_job("fast", 0.02, lambda: runs.append(time.time()))
    deadline = time.monotonic() + 30
    while len(runs) < 3:
        assert time.monotonic() < deadline, runs
        await asyncio.sleep(0.01)
    # The n-th run comes no sooner than n intervals after the job was added.
    assert all(at >= added + 0.02 * n for n, at in enumerate(runs, 1)), (added, runs)
    scheduler.shutdown()
    assert scheduler.get_jobs() == []


async def test_the_runs_a_late_loop_missed_are_one_run() -> None:
    scheduler = Scheduler(asyncio.get_running_loop())
    runs: list[str] = []
    scheduler.add_job("late", 60, lambda: runs.append("late"))
    job = scheduler.get_job("late")
    assert job is not None and job.handle is not None
    job.handle.cancel()
    now = time.time()
    job.at = now - 150  # three runs due (150, 90 and 30 s ago): one runs, the next is ahead
    scheduler._due(job)  # the timer's callback, called when the loop was late
    assert runs == ["late"]
    assert now < job.at <= time.time() + 60
    assert job.next_run_time is not None
    scheduler.shutdown()


async def test_a_removed_job_and_a_shut_down_scheduler_run_nothing() -> None:
    scheduler = Scheduler(asyncio.get_running_loop())
    runs: list[str] = []
    scheduler.add_job("gone", 0.01, lambda: runs.append("gone"))
    scheduler.add_job("gone", 3600, lambda: runs.append("replaced"))  # replaces it
    scheduler.remove_job("gone")
    scheduler.remove_job("gone")  # twice: nothing to do
    scheduler.add_job("kept", 0.01, lambda: runs.append("kept"))
    scheduler.shutdown()
    scheduler.add_job("after", 0.01, lambda: runs.append("after"))
    # A later timer of another scheduler runs: every cancelled one, due before it, would have.
    other = Scheduler(asyncio.get_running_loop())
    other.add_job("sentinel", 0.05, lambda: runs.append("sentinel"))
    deadline = time.monotonic() + 30
    while not runs:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    other.shutdown()
    assert runs == ["sentinel"]
    assert scheduler.get_jobs() == []
