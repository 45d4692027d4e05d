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


# The first lines git writes once objects come (`--progress`; a fetch that brings no object
# writes none of them): the remote packing them, then this side receiving or unpacking them.
OBJECT_LINES = (
    b"remote: Enumerating objects:",
    b"remote: Counting objects:",
    b"remote: Compressing objects:",
    b"remote: Total ",
    b"Receiving objects:",
    b"Unpacking objects:",
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
        on_objects: Callable[[], None] | None = None,
    ) -> tuple[FetchOutcome, str]:
        """Fetch one upstream branch into `into` (forced: the planner judges rewinds);
        git's progress goes to `progress` when it shows anything; `on_start` as `run`'s;
        `on_objects` is called (once, on the thread that reads git's stderr) when git says
        objects come: git then runs with `--progress`, whose lines only this reads."""
        # Naming upload-pack and receive-pack keeps a root's remote.*.uploadpack and
        # remote.*.receivepack settings (commands in repository config) from ever running.
        shown = progress.enabled
        lines: Callable[[bytes], None] | None = None
        if shown:
            from memsync.gitprogress import GitLines  # noqa: PLC0415 - on a terminal only

            lines = GitLines(progress)
        if on_objects is not None:
            lines = _heard(on_objects, lines)
        result = self.run(
            *FETCH,
            *(["--progress"] if lines is not None else []),
            "--end-of-options",
            remote,
            f"+refs/heads/{branch}:{into}",
            timeout=timeout,
            check=False,
            on_stderr_line=lines,
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


def _heard(
    on_objects: Callable[[], None], then: Callable[[bytes], None] | None
) -> Callable[[bytes], None]:
    """A stderr line callback that calls `on_objects` at the first of `OBJECT_LINES`, and
    hands every line on to `then` (a terminal's progress) when there is one."""
    told = False

    def heard(line: bytes) -> None:
        nonlocal told
        if not told and line.startswith(OBJECT_LINES):
            told = True
            on_objects()
        if then is not None:
            then(line)

    return heard
