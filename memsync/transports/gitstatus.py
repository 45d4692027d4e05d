"""A work tree's state in one `git status`: branch, HEAD, upstream, ahead/behind and every
changed path (`WorkStates.work_state`, which `Git` inherits).

On the runner alone (`gitcore.GitCore`: the same process box, clean environment, forced
config and config guard as every call), so that a one-shot `memsync status`, which asks
only this of a root, loads none of the tree, commit and history reads of the rest of the
box (`git.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memsync.transports.gitcore import GitCore
from memsync.transports.workstate import WorkState, parse_status_v2

# A status of a few paths (the fence's) does not preload the index: the preload's threads
# (one per 500 entries, up to 20) each match their share of the entries against the paths
# to `lstat` the few that match, which costs a 10k-file root's status a quarter of its
# CPU and, on two cores, a third of its wall clock (git's answer is the same: the preload
# only marks the entries it finds up to date before the status looks at them).
NARROW_CONFIG = (("core.preloadIndex", "false"),)


class WorkStates(GitCore):
    """The box's `git status` (see the module docstring)."""

    def work_state(
        self,
        *,
        refresh: bool = False,
        paths: Sequence[str] | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> WorkState:
        """Branch, HEAD, upstream, ahead/behind and every changed path, in one call.

        `refresh` lets git write back refreshed stat data to the index (it takes the index
        lock briefly, as a plain `git status` does); without it, files git cannot trust by
        their stat data are hashed again on every call, which is slow on large roots.
        `paths` (literal, at least one) limits the changed paths asked about to those: git
        then looks at those files only, not at the whole work tree. `on_start`: as `run`'s.
        """
        env = {"GIT_OPTIONAL_LOCKS": "1"} if refresh else {}
        scope: list[str] = []
        config: tuple[tuple[str, str], ...] = ()
        if paths is not None:
            if not paths:
                raise ValueError("a status limited to no paths would cover every path")
            env["GIT_LITERAL_PATHSPECS"] = "1"
            scope = ["--", *paths]
            config = NARROW_CONFIG
        raw = self.run(
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=none",
            *scope,
            config=config,
            env=env or None,
            on_start=on_start,
        ).stdout
        return parse_status_v2(raw)
