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
        if paths is not None:
            if not paths:
                raise ValueError("a status limited to no paths would cover every path")
            env["GIT_LITERAL_PATHSPECS"] = "1"
            scope = ["--", *paths]
        raw = self.run(
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=none",
            *scope,
            env=env or None,
            on_start=on_start,
        ).stdout
        return parse_status_v2(raw)
