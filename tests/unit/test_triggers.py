"""Trigger coalescing and back-off, with a controlled clock."""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from memsync.daemon.triggers import Backoff, Trigger


@given(
    st.lists(st.floats(0, 0.999), min_size=1, max_size=20), st.floats(0.1, 10), st.floats(1, 600)
)
def test_backoff_grows_exponentially_within_jitter_and_cap(
    draws: list[float], base: float, cap: float
) -> None:
    rolls = iter(draws)
    backoff = Backoff(base=base, cap=cap, rng=lambda: next(rolls))
    for n, roll in enumerate(draws, start=1):
        delay = backoff.failed(now=100.0)
        full = min(cap, base * 2 ** (n - 1))
        assert delay == full * (0.5 + roll / 2)
        assert full * 0.5 <= delay < full
        assert abs(backoff.wait(100.0) - delay) < 1e-9 and backoff.wait(100.0 + delay) == 0
    backoff.succeeded()
    assert backoff.failures == 0 and backoff.wait(100.0) == 0


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


async def test_a_burst_while_running_runs_exactly_one_more_job() -> None:
    gate = asyncio.Event()
    started = asyncio.Event()
    runs: list[int] = []

    async def job(options: str) -> int:
        runs.append(len(runs) + 1)
        started.set()
        await gate.wait()
        return len(runs)

    trigger: Trigger[str, int] = Trigger("r", job, lambda v: False, clock=Clock())
    server = asyncio.create_task(trigger.serve())
    first = trigger.request("sync")
    await started.wait()
    burst = [trigger.request("sync") for _ in range(10)]
    assert len({id(f) for f in burst}) == 1  # all joined one pending job
    gate.set()
    assert await first == 1
    assert [await f for f in burst] == [2] * 10
    assert trigger.runs == 2
    trigger.close()
    await server


async def test_different_options_are_separate_jobs() -> None:
    seen: list[str] = []

    async def job(options: str) -> str:
        seen.append(options)
        return options

    trigger: Trigger[str, str] = Trigger("r", job, lambda v: False, clock=Clock())
    server = asyncio.create_task(trigger.serve())
    a, b, a2 = trigger.request("plain"), trigger.request("dry-run"), trigger.request("plain")
    assert a is a2
    assert (await a, await b) == ("plain", "dry-run")
    assert sorted(seen) == ["dry-run", "plain"]
    trigger.close()
    await server


async def test_failures_hold_automatic_runs_back_but_not_explicit_ones() -> None:
    clock = Clock()
    verdicts = iter(["offline", "offline", "ok"])

    async def job(options: str) -> str:
        return next(verdicts)

    backoff = Backoff(base=60, cap=600, rng=lambda: 0.0)
    trigger: Trigger[str, str] = Trigger(
        "r", job, lambda v: v != "ok", backoff=backoff, clock=clock
    )
    server = asyncio.create_task(trigger.serve())
    assert await trigger.request("sync") == "offline"
    assert backoff.failures == 1 and backoff.wait(clock.now) == 30  # 60 x [0.5, 1)
    held = trigger.request("sync")  # automatic: waits out the back-off
    await asyncio.sleep(0)  # let the server look at it (no time passes on the clock)
    for _ in range(5):
        await asyncio.sleep(0)
    assert not held.done() and trigger.runs == 1
    explicit = trigger.request("sync", explicit=True)  # a person asked: run now
    assert explicit is held
    assert await explicit == "offline"
    assert backoff.failures == 2 and backoff.wait(clock.now) == 60
    clock.now = 61  # the back-off is over: an automatic run goes
    assert await asyncio.wait_for(trigger.request("sync"), 5) == "ok"
    assert backoff.failures == 0
    trigger.close()
    await server


async def test_a_job_that_raises_never_stops_the_trigger() -> None:
    calls: list[int] = []

    async def job(options: str) -> str:
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("boom")
        return "ok"

    trigger: Trigger[str, str] = Trigger(
        "r", job, lambda v: False, backoff=Backoff(rng=lambda: 0.0), clock=Clock()
    )
    server = asyncio.create_task(trigger.serve())
    first = trigger.request("sync", explicit=True)
    try:
        await first
    except RuntimeError as exc:
        assert str(exc) == "boom"
    assert await trigger.request("sync", explicit=True) == "ok"
    trigger.close()
    await server


async def test_a_held_trigger_drops_automatic_runs_but_runs_explicit_ones() -> None:
    runs: list[str] = []
    holding = {"on": False}

    async def job(options: str) -> str:
        runs.append(options)
        return f"run {len(runs)}"

    trigger: Trigger[str, str] = Trigger(
        "r", job, lambda v: False, clock=Clock(), held=lambda: holding["on"]
    )
    server = asyncio.create_task(trigger.serve())
    assert await trigger.request("sync") == "run 1"
    holding["on"] = True
    assert trigger.held()
    for _ in range(3):  # timer ticks: answered with the last verdict, nothing runs
        assert await asyncio.wait_for(trigger.request("sync"), 5) == "run 1"
    assert len(runs) == 1 and not trigger.pending()
    assert await trigger.request("sync", explicit=True) == "run 2"  # a person asked
    holding["on"] = False  # known_hosts changed: the next tick runs
    assert await asyncio.wait_for(trigger.request("sync"), 5) == "run 3"
    trigger.close()
    await server
