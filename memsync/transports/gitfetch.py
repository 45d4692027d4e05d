"""The fetch, on the runner and its status alone: the box a cycle starts with.

A one-shot cycle's first git processes are its fetch and its preflight `git status`
(`roots.prefetch`, `roots.cycle`); this box (`Fetches`: `gitcore.GitCore`'s runner, the
config guard, `gitstatus.WorkStates` and the fetch) is all they need, so they start before
the rest of the box (trees, commits, history: `git.py`) loads, and that loads while they
run. `Git` inherits all of it; a cycle makes its `Git` `like` this box (`GitCore.like`: the
same directory, deadline, credentials, environment and config record), so each of its
processes runs as this box's would.
"""

from __future__ import annotations

from pathlib import Path

from memsync.progress import NO_PROGRESS, Progress
from memsync.transports.gitenv import FetchOutcome
from memsync.transports.gitstatus import WorkStates

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from collections.abc import Callable

# Every fetch: naming upload-pack keeps a repository's remote.*.uploadpack (a command in its
# config) from running; no tags, no FETCH_HEAD, no submodules.
FETCH = (
    "fetch",
    "--upload-pack=git-upload-pack",
    "--no-tags",
    "--no-write-fetch-head",
    "--no-recurse-submodules",
    "--quiet",
)


class Fetches(WorkStates):
    """The runner, its work tree's status and the fetch (see the module docstring)."""

    def fetch(
        self,
        remote: str,
        branch: str,
        into: str,
        timeout: float | None = None,
        progress: Progress = NO_PROGRESS,
        on_start: Callable[[int], None] | None = None,
    ) -> tuple[FetchOutcome, str]:
        """Fetch one upstream branch into `into` (forced: the planner judges rewinds);
        git's progress goes to `progress` when it shows anything; `on_start` as `run`'s."""
        # Naming upload-pack and receive-pack keeps a root's remote.*.uploadpack and
        # remote.*.receivepack settings (commands in repository config) from ever running.
        shown = progress.enabled
        if shown:
            from memsync.gitprogress import GitLines  # noqa: PLC0415 - on a terminal only
        result = self.run(
            *FETCH,
            *(["--progress"] if shown else []),
            "--end-of-options",
            remote,
            f"+refs/heads/{branch}:{into}",
            timeout=timeout,
            check=False,
            on_stderr_line=GitLines(progress) if shown else None,
            on_start=on_start,
        )
        if result.returncode == 0:
            return FetchOutcome.OK, ""
        text = result.stderr
        if "couldn't find remote ref" in text.lower():
            return FetchOutcome.MISSING_BRANCH, text
        from memsync.transports.gitparse import looks_like_bad_objects  # noqa: PLC0415 - failed

        if looks_like_bad_objects(text):
            return FetchOutcome.BAD_OBJECTS, text
        return FetchOutcome.UNREACHABLE, text

    def fetch_ref(self, repository: Path, ref: str, into: str) -> None:
        """Fetch one ref of a local repository memsync made (a role's) into `into`, with the
        same safeguards as an upstream fetch; GitError when git fails."""
        self.run(*FETCH, "--end-of-options", str(repository.absolute()), f"+{ref}:{into}")
