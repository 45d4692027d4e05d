"""`memsync_paused{kind,name}` (CONTRACT §6): read from the pause file at each scrape, so it
never disagrees with `status`. Loaded only by a daemon with `http.listen` (issue 18)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from memsync import timefmt
from memsync.roots import pause
from memsync.roots.pause import Kind


class PausedGauge(Collector):
    """`memsync_paused{kind,name}`: 1 while `memsync pause` holds it, else 0."""

    def __init__(
        self, state_dir: Callable[[], Path], names: Callable[[], tuple[list[str], list[str]]]
    ) -> None:
        self._state_dir = state_dir
        self._names = names

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily(
            "memsync_paused",
            "1 while memsync pause holds the root or view, else 0",
            labels=["kind", "name"],
        )
        records = pause.load(self._state_dir())
        now = timefmt.now()
        roots, views = self._names()
        listed: tuple[tuple[Kind, list[str]], ...] = (("root", roots), ("view", views))
        for kind, names in listed:
            for name in names:
                held = records.get((kind, name))
                gauge.add_metric([kind, name], 1.0 if held and held.holds(now) else 0.0)
        yield gauge
