"""`memsync validate`'s check of a root, as one result: its work tree on disk or one commit,
through the gate's tree rules and the memory graph, plus the repository's own config.

The command line parses the arguments and renders what `check_root` returns; the assembly
(which tree, which policy, the parse cache under the state dir) is decided here.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from memsync.errors import UsageError
from memsync.validators.problems import Problem
from memsync.values import value


@value
class RootCheck:
    """What `check_root` found: the counts it checked and every problem (none: valid)."""

    root: Path  # absolute
    rev: str | None
    files: int  # memory documents the graph parsed
    items: int
    problems: tuple[Problem, ...]
    tracked: int  # every file checked for name, mode, size and text
    memory_files: int

    @property
    def valid(self) -> bool:
        return not self.problems


def check_root(path: Path, rev: str | None = None, *, state_dir: Path | None = None) -> RootCheck:
    """Check the root at `path`: its work tree, or the commit `rev` names (UsageError when it
    names none). A repository git refuses to run on is not read: its config's problems are
    the result. Files parsed by an earlier check (same bytes) are not parsed again: the
    cache lives under `state_dir` (default: the default state dir; in memory when that is
    unusable); it is only a cache, and damaged or foreign entries are ignored."""
    from memsync.config.paths import default_state_dir  # noqa: PLC0415
    from memsync.roots.disktree import disk_tree_view  # noqa: PLC0415
    from memsync.transports.git import Git  # noqa: PLC0415
    from memsync.transports.repoconfig import refusing_problems, repo_config_problems  # noqa: PLC0415
    from memsync.validators.cache import STATE_CACHE_DIR, open_persistent  # noqa: PLC0415
    from memsync.validators.gate import validate_tree  # noqa: PLC0415
    from memsync.validators.policy import SyncPolicy  # noqa: PLC0415
    from memsync.validators.rightmemory import default_graph_validator  # noqa: PLC0415

    root = path.absolute()
    policy = SyncPolicy()
    refused = refusing_problems(Git(path)) if Git(path).git_dir() is not None else ()
    if refused:  # git does not run on this root: say why (every key), read nothing through it
        return RootCheck(root, rev, 0, 0, repo_config_problems(path) or refused, 0, 0)
    if rev is not None:
        git = Git(path)
        commit = git.rev_parse(rev)
        if commit is None:
            raise UsageError(
                f"{rev!r} is not a commit in {path}",
                hint="give a branch, tag or commit id that exists",
            )
        tree = git.tree_view(commit)
    else:
        tree = disk_tree_view(path)
    cache_home = state_dir if state_dir is not None else default_state_dir()
    with contextlib.suppress(OSError):  # no usable state dir: the cache stays in memory
        cache_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    cache = open_persistent(cache_home / STATE_CACHE_DIR, records=True)
    try:
        graph = default_graph_validator(enforce_capacity=True, cache=cache)
        report = validate_tree(tree, policy, graph)
    finally:
        cache.close()
    # The repository's own config is the root's too, whichever commit is checked.
    problems = (*report.problems, *repo_config_problems(path))
    return RootCheck(
        root, rev, report.files, report.items, problems, len(tree.entries), report.files
    )
