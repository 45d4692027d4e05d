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
"""

from __future__ import annotations

import threading

from memsync.progress import NO_PROGRESS, Progress
from memsync.transports.git import FetchOutcome, Git


class Prefetch:
    """One fetch of `branch` into `into`, on a thread of its own."""

    def __init__(
        self, git: Git, remote: str, branch: str, into: str, progress: Progress = NO_PROGRESS
    ) -> None:
        self.branch = branch
        self.into = into
        self.progress = progress
        self._answer: tuple[FetchOutcome, str] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._fetch, args=(git, remote), name="memsync-prefetch", daemon=True
        )
        self._thread.start()

    def _fetch(self, git: Git, remote: str) -> None:
        try:
            self._answer = git.fetch(remote, self.branch, self.into, progress=self.progress)
        except BaseException as exc:  # handed to the cycle's thread by `answer`
            self._error = exc

    def wait(self) -> None:
        """Until the fetch is over (its deadline bounds it: the box kills it when it runs out)."""
        self._thread.join()

    def answer(self) -> tuple[FetchOutcome, str]:
        """What `Git.fetch` returned, or the error it raised, raised here."""
        self.wait()
        if self._error is not None:
            raise self._error
        if self._answer is None:  # the thread always sets one of the two
            raise RuntimeError("the prefetch ended without an answer")
        return self._answer
