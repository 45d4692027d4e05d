"""The daemon's interval jobs (`daemon.schedule`): each runs one interval (plus its jitter)
after the previous planned run, a busy loop runs a late job once, a removed or replaced job
runs no more, and a failing one keeps its schedule. The loop's clock moves only when the
test moves it (no waiting): the loop runs what is due at the clock it reads."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable

import pytest

from memsync.daemon.schedule import Schedule


class Clock:
    """A loop whose clock stands still but for the test's `advance` (then the loop runs what
    is due): a loaded machine's slowness moves no job."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.now = loop.time()
        loop.time = lambda: self.now  # type: ignore[method-assign]

    async def advance(self, seconds: float) -> None:
        self.now += seconds
        for _ in range(3):  # the timer fires on the next pass; its action may plan more
            await asyncio.sleep(0)


def recorder(clock: Clock) -> tuple[list[float], Callable[[], None]]:
    runs: list[float] = []
    return runs, lambda: runs.append(clock.loop.time())


async def test_a_job_runs_each_interval_plus_at_most_its_jitter_after_the_last_plan() -> None:
    clock = Clock(asyncio.get_running_loop())
    schedule = Schedule(clock.loop)
    runs, action = recorder(clock)
    added, before = clock.loop.time(), time.time()
    schedule.add("sync:a", 10.0, 1.0, action)
    after = time.time()
    first = schedule.next_run("sync:a")
    assert first is not None and before + 10 <= first <= after + 11
    await clock.advance(9.99)
    assert runs == []
    await clock.advance(1.02)
    assert len(runs) == 1 and 10.0 <= runs[0] - added <= 11.01
    for _ in range(int(55 / 0.05)):  # five more runs, seen to a twentieth of a second
        await clock.advance(0.05)
    assert len(runs) >= 6
    gaps = [b - a for a, b in itertools.pairwise(runs[1:])]  # each seen within 0.05 s
    assert all(10.0 - 0.051 <= gap <= 11.0 + 0.051 for gap in gaps), gaps
    assert len({round(gap, 2) for gap in gaps}) > 1  # a jitter drawn anew each time
    schedule.shutdown()
    assert schedule.ids() == []


async def test_a_loop_busy_past_several_runs_runs_the_job_once_and_plans_after_now() -> None:
    clock = Clock(asyncio.get_running_loop())
    schedule = Schedule(clock.loop)
    runs, action = recorder(clock)
    schedule.add("view:v", 5.0, 0.0, action)
    await clock.advance(52.0)  # ten runs were due
    assert len(runs) == 1
    after = schedule.next_run("view:v")
    assert after is not None and time.time() < after <= time.time() + 5.01
    schedule.shutdown()


async def test_removed_and_replaced_jobs_run_no_more() -> None:
    clock = Clock(asyncio.get_running_loop())
    schedule = Schedule(clock.loop)
    old, old_action = recorder(clock)
    new, new_action = recorder(clock)
    schedule.add("sync:a", 5.0, 0.0, old_action)
    schedule.add("sync:a", 20.0, 0.0, new_action)  # a retime replaces the job
    schedule.add("sync:b", 5.0, 0.0, old_action)
    schedule.remove("sync:b")
    schedule.remove("sync:nothing")
    assert schedule.ids() == ["sync:a"] and schedule.next_run("sync:b") is None
    await clock.advance(19.0)
    assert old == [] and new == []
    await clock.advance(1.1)
    assert old == [] and len(new) == 1
    schedule.shutdown()
    await clock.advance(100.0)
    assert old == [] and len(new) == 1


async def test_a_job_that_removes_itself_or_fails_is_planned_accordingly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock(asyncio.get_running_loop())
    schedule = Schedule(clock.loop)
    runs: list[str] = []

    def once() -> None:
        runs.append("once")
        schedule.remove("once")

    def failing() -> None:
        runs.append("failing")
        raise RuntimeError("boom")

    schedule.add("once", 1.0, 0.0, once)
    schedule.add("failing", 1.0, 0.0, failing)
    for _ in range(3):
        await clock.advance(1.01)
    assert runs.count("once") == 1 and runs.count("failing") == 3
    assert schedule.ids() == ["failing"]
    assert "scheduled job failed" in caplog.text and "boom" in caplog.text
    schedule.shutdown()
