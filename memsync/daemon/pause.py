"""The daemon's side of `memsync pause` / `resume` (`POST /v1/pause`, `POST /v1/resume`).

The record lives in the state dir (`roots.pause`), so it survives a restart and the core
honours it wherever a cycle starts: `sync_root` answers `paused`, a view pull `paused`, a
maintenance turn `not-due`, and nothing else runs. Here the daemon adds what only a running
process can: a cycle at once on `resume`, and one when a `--for` pause runs out (a timer per
pause, set again at start-up from the file), and the `memsync_paused{kind,name}` gauge
(read from the file at each scrape, so it never disagrees with `status`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from memsync import timefmt
from memsync.errors import UsageError
from memsync.roots import pause
from memsync.roots.pause import Kind, Pause

if TYPE_CHECKING:  # pydantic loads when a pause is asked for, not at rest (issue 18)
    from prometheus_client.registry import CollectorRegistry

    from memsync.wire.pause import PauseReport, PauseRequest, ResumeRequest

log = logging.getLogger("memsync.daemon")

EXPIRY_MARGIN = 0.5  # seconds after `until`: the wall clock has surely passed it by then


def resolve(roots: Iterable[str], views: Iterable[str], name: str, kind: Kind | None) -> Kind:
    """Whether `name` is a root or a view (UsageError when neither, or both and not said)."""
    roots, views = set(roots), set(views)
    kinds: list[Kind] = []
    if name in roots:
        kinds.append("root")
    if name in views:
        kinds.append("view")
    if kind is not None:
        if kind not in kinds:
            known = ", ".join(sorted(roots if kind == "root" else views)) or "none"
            raise UsageError(f"unknown {kind} {name!r}", hint=f"configured {kind}s: {known}")
        return kind
    if not kinds:
        known = ", ".join(sorted(roots | views)) or "none"
        raise UsageError(
            f"no root or view is named {name!r}", hint=f"configured roots and views: {known}"
        )
    if len(kinds) > 1:
        raise UsageError(
            f"{name!r} names both a root and a view", hint="say which with --kind root|view"
        )
    return kinds[0]


def report(kind: Kind, name: str, held: Pause | None, *, resumed: bool = False) -> PauseReport:
    from memsync.wire.pause import PauseReport  # noqa: PLC0415 - pydantic, when asked

    if held is not None:
        return PauseReport(
            kind=kind, name=name, paused=True, until=held.until, message=held.describe()
        )
    message = "resumed" if resumed else "was not paused"
    return PauseReport(kind=kind, name=name, paused=False, until=None, message=message)


class PauseDesk:
    """Pauses as the running daemon keeps them: the file, the expiry timers, the gauge."""

    def __init__(
        self,
        state_dir: Callable[[], Path],
        names: Callable[[], tuple[list[str], list[str]]],
        wake: Callable[[Kind, str], None],
        registry: CollectorRegistry | None,
    ) -> None:
        self._state_dir = state_dir
        self._names = names
        self._wake = wake
        self._timers: dict[tuple[Kind, str], asyncio.TimerHandle] = {}
        if registry is not None:  # `http.listen`: the gauge can be scraped
            from memsync.daemon.pausegauge import PausedGauge  # noqa: PLC0415

            registry.register(PausedGauge(state_dir, names))

    def start(self) -> None:
        """Timers for the pauses on file that run out later (a restart keeps them)."""
        now = timefmt.now()
        for key, held in pause.load(self._state_dir()).items():
            if held.holds(now):
                self._expire_at(key, held)

    async def pause(self, request: PauseRequest) -> PauseReport:
        roots, views = self._names()
        kind = resolve(roots, views, request.name, request.kind)
        until = request.until
        if until is not None:
            moment = timefmt.parse(until)
            if moment is None:
                raise UsageError(f"until {until[:40]!r} is not an RFC 3339 time")
            until = timefmt.rfc3339(moment)
        held = await asyncio.to_thread(pause.pause, self._state_dir(), kind, request.name, until)
        self._expire_at((kind, request.name), held)
        log.info("%s %s: %s", kind, request.name, held.describe())
        return report(kind, request.name, held)

    async def resume(self, request: ResumeRequest) -> PauseReport:
        roots, views = self._names()
        kind = resolve(roots, views, request.name, request.kind)
        held = await asyncio.to_thread(pause.resume, self._state_dir(), kind, request.name)
        timer = self._timers.pop((kind, request.name), None)
        if timer is not None:
            timer.cancel()
        if held is not None:
            log.info("%s %s: resumed", kind, request.name)
            self._wake(kind, request.name)
        return report(kind, request.name, None, resumed=held is not None)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()

    def _expire_at(self, key: tuple[Kind, str], held: Pause) -> None:
        old = self._timers.pop(key, None)
        if old is not None:
            old.cancel()
        until = timefmt.parse(held.until)
        if until is None:
            return
        delay = max(0.0, (until - timefmt.now()).total_seconds()) + EXPIRY_MARGIN
        loop = asyncio.get_running_loop()
        self._timers[key] = loop.call_later(delay, self._expired, key)

    def _expired(self, key: tuple[Kind, str]) -> None:
        self._timers.pop(key, None)
        kind, name = key
        if pause.holding(self._state_dir(), kind, name) is None:
            log.info("%s %s: pause ran out, resumed", kind, name)
            self._wake(kind, name)
