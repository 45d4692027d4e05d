"""The prefetch: a cycle's fetch, started beside its preflight status when the branch to
fetch is known from the previous cycle.

A fetch only moves the root's remote-tracking ref (forced: the planner judges what it
brings) and adds objects; it never touches the branch, the index or the work tree. So it can
run while `git status` reads the work tree, and the two processes overlap instead of
following each other. The guess is the upstream branch the previous cycle fetched; when
the preflight finds another one (a new upstream setting, another branch checked out), the
prefetched answer is dropped and the cycle fetches the right branch as before. Whatever
the preflight decides, the prefetch is waited for before the cycle returns: no process of
a cycle outlives its root lock.

`Beside` is the thread under it: one git call whose answer, or the error it raised, the
cycle's own thread takes when it needs it, and which says when its git process runs. A
one-shot process runs its preflight status on one too, and loads the gate's modules once
both processes run (`roots.cycle`): git then starts without waiting for those imports.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from memsync.progress import NO_PROGRESS, Progress
from memsync.transports.gitenv import FetchOutcome
from memsync.transports.gitfetch import Fetches

TYPE_CHECKING = False  # `typing` loads after the cycle's first git processes start (issue 18)
if TYPE_CHECKING:
    from typing import Generic, TypeVar

    T = TypeVar("T")

    class _Typed(Generic[T]):
        """`Beside`'s answer type, for the type checker."""

else:
    T = object

    class _Typed:
        """At run time `Beside` takes no type parameter (`Beside[T]` is `Beside`)."""

        def __class_getitem__(cls, _parameter: object) -> type:
            return cls


class Beside(_Typed[T]):
    """`call(on_start)` on a thread of its own, started at once; the call hands `on_start`
    to the box (`GitCore.run`), which tells it when git runs."""

    def __init__(self, call: Callable[[Callable[[int], None]], T], name: str) -> None:
        self._call = call
        self._answer: tuple[T] | None = None
        self._error: BaseException | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._answer = (self._call(self._told),)
        except BaseException as exc:  # handed to the caller's thread by `answer`
            self._error = exc
        finally:
            self._started.set()  # a call that started no process (an error, a reused status)

    def _told(self, _pid: int) -> None:
        self._started.set()

    @property
    def thread(self) -> threading.Thread:
        """The thread the call runs on (to join with others)."""
        return self._thread

    def running(self) -> None:
        """Until git runs, or the call is over without it (the same deadline bounds both)."""
        self._started.wait()

    def wait(self) -> None:
        """Until the call is over (a git call's deadline bounds it: the box kills git then)."""
        self._thread.join()

    def answer(self) -> T:
        """What the call returned, or the error it raised, raised here."""
        self.wait()
        if self._error is not None:
            raise self._error
        if self._answer is None:  # the thread always sets one of the two
            raise RuntimeError(f"{self._thread.name} ended without an answer")
        return self._answer[0]


class Prefetch:
    """One fetch of `branch` into `into`, on a thread of its own."""

    def __init__(
        self,
        git: Fetches,
        remote: str,
        branch: str,
        into: str,
        progress: Progress = NO_PROGRESS,
        *,
        heard: bool = False,
    ) -> None:
        self.branch = branch
        self.into = into
        self.progress = progress
        # With `heard`: set once git says objects come, or once the fetch is over.
        self._heard: threading.Event | None = threading.Event() if heard else None
        self._objects = False
        self._fetch = Beside(self._fetching(git, remote, branch, into), "memsync-prefetch")

    def _fetching(
        self, git: Fetches, remote: str, branch: str, into: str
    ) -> Callable[[Callable[[int], None]], tuple[FetchOutcome, str]]:
        heard = self._heard
        if heard is None:
            return lambda told: git.fetch(
                remote, branch, into, progress=self.progress, on_start=told
            )

        def objects() -> None:
            self._objects = True
            heard.set()

        def call(told: Callable[[int], None]) -> tuple[FetchOutcome, str]:
            try:
                return git.fetch(
                    remote, branch, into, progress=self.progress, on_start=told, on_objects=objects
                )
            finally:
                heard.set()

        return call

    def running(self) -> None:
        """Until the fetch runs (or is over)."""
        self._fetch.running()

    def bringing(self) -> bool:
        """For a prefetch made `heard`: waits until git says objects come or the fetch is
        over; True when objects come and the fetch still runs (False for any other)."""
        if self._heard is None:
            return False
        self._heard.wait()
        return self._objects and self._fetch.thread.is_alive()

    def wait(self) -> None:
        """Until the fetch is over (its deadline bounds it: the box kills it when it runs out)."""
        self._fetch.wait()

    def answer(self) -> tuple[FetchOutcome, str]:
        """What `Fetches.fetch` returned, or the error it raised, raised here."""
        return self._fetch.answer()
