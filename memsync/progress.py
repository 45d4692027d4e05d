"""Progress of long work (joining a root, a first sync, a big view pull) on a terminal.

A command asks `for_terminal(as_json)` for its `Progress`: a live display on stderr (rich,
imported only then: start-up never pays for it) when stdout and stderr are both terminals
and no JSON was asked for; otherwise `NO_PROGRESS`, which shows nothing, so piped output,
`--json` and logs read exactly as without progress. The display is transient: once the
work is done, only the command's own output stays on the terminal.

What is shown comes from three places: git's own progress lines (fetch and checkout run
with `--progress`; `gitprogress.parse_git_line` reads them from git's stderr as the process
box streams it, and only text made of its fixed shapes ever reaches the terminal, never
raw bytes an upstream sent), validation counts, and bytes and files of a view package.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

TYPE_CHECKING = False  # `typing` loads after a cycle's first git processes start (issue 18)
if TYPE_CHECKING:  # rich is imported only when a terminal shows progress
    from typing import Protocol

    from rich.progress import Progress as RichProgress
    from rich.progress import TaskID
else:
    Protocol = object  # the type checker's protocol; nothing checks it at run time


class Progress(Protocol):
    """Where long work reports how far it is (any thread may call it)."""

    enabled: bool

    def show(
        self, phase: str, done: int, total: int | None = None, *, unit: str = "", detail: str = ""
    ) -> None:
        """`phase` has reached `done` of `total` (`unit`: what is counted; `detail`: say
        the bytes and rate so far). Each phase keeps its own line."""


class _Nothing:
    """Shows nothing: not a terminal, `--json`, or no one watching (the daemon)."""

    enabled = False

    def show(
        self, phase: str, done: int, total: int | None = None, *, unit: str = "", detail: str = ""
    ) -> None:
        return None


NO_PROGRESS: Progress = _Nothing()


def wanted(as_json: bool = False) -> bool:
    """Whether progress is shown: both outputs are terminals that can redraw a line."""
    if as_json or os.environ.get("TERM", "") in ("dumb", "unknown"):
        return False
    try:
        return sys.stdout.isatty() and sys.stderr.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


@contextmanager
def for_terminal(as_json: bool = False) -> Iterator[Progress]:
    """The progress a command shows while the block runs (cleared when it ends)."""
    if not wanted(as_json):
        yield NO_PROGRESS
        return
    shown = _Terminal()
    try:
        yield shown
    finally:
        shown.stop()


class _Terminal:
    """A rich live display on stderr: one line per phase, the current one moving."""

    enabled = True

    def __init__(self) -> None:
        from rich.console import Console  # noqa: PLC0415 - only on a terminal
        from rich.progress import BarColumn, TextColumn  # noqa: PLC0415
        from rich.progress import Progress as RichProgress  # noqa: PLC0415

        self._rich: RichProgress = RichProgress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[count]}"),
            TextColumn("{task.fields[detail]}"),
            console=Console(stderr=True),
            transient=True,
        )
        self._tasks: dict[str, TaskID] = {}
        self._lock = threading.Lock()  # a prefetch thread and the cycle's may both report
        self._rich.start()

    def show(
        self, phase: str, done: int, total: int | None = None, *, unit: str = "", detail: str = ""
    ) -> None:
        if unit == "bytes":
            count = size_text(done) + (f" of {size_text(total)}" if total is not None else "")
        else:
            count = f"{done}/{total} {unit}" if total is not None else f"{done} {unit}"
        with self._lock:
            task = self._tasks.get(phase)
            if task is None:
                task = self._rich.add_task(phase, total=total, count=count, detail=detail)
                self._tasks[phase] = task
            self._rich.update(task, completed=done, total=total, count=count, detail=detail)

    def stop(self) -> None:
        self._rich.stop()


# -- bytes -------------------------------------------------------------------------------------


def size_text(count: float) -> str:
    """`count` bytes as git writes them (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.2f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


class ByteCounter:
    """Bytes of one download, shown with the rate since it started (`at` is told the bytes
    so far: a retried download starts again from 0)."""

    def __init__(self, progress: Progress, phase: str, total: int | None) -> None:
        self.progress, self.phase, self.total = progress, phase, total
        self.done = 0
        self._started = time.monotonic()
        self._shown = 0.0

    def at(self, done: int) -> None:
        self.done = done
        now = time.monotonic()
        if now - self._shown < 0.1 and self.done != self.total:
            return  # at most ten redraws a second
        self._shown = now
        elapsed = max(now - self._started, 1e-6)
        detail = f"{size_text(self.done / elapsed)}/s"
        total = None if self.total is None else max(self.total, self.done)
        self.progress.show(self.phase, self.done, total, unit="bytes", detail=detail)
