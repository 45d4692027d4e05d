"""A root's own Git configuration and attributes that name programs (`unsafe-repo-config`).

memsync never runs such programs (the git box neutralizes them on every call); this module
reports them so that `validate` and `doctor` can tell the person who owns the root. Values
are never shown: a helper command line may carry a credential.
"""

from __future__ import annotations

from pathlib import Path

from memsync.transports.git import Git
from memsync.transports.gitconfig import attribute_drivers, program_entries, split_key
from memsync.validators.problems import Problem

CODE = "unsafe-repo-config"
_NEVER_RUN = "memsync never runs it; remove it if you do not need it"


def repo_config_problems(root: Path) -> tuple[Problem, ...]:
    """Every `unsafe-repo-config` problem of the repository whose work tree is `root`."""
    git = Git(root)
    if git.git_dir() is None:
        return ()
    entries = git.config_entries()
    problems: list[Problem] = []
    for entry, reason in program_entries(entries):
        where = entry.origin.removeprefix("file:") if entry.origin.startswith("file:") else None
        problems.append(Problem(CODE, where, None, f"{entry.key}: {reason}; {_NEVER_RUN}"))
    defined = {split_key(e.key)[:2] for e in entries if e.scope != "command"}
    common = git.common_dir()
    attributes = common / "info" / "attributes" if common is not None else None
    if attributes is not None and attributes.is_file():
        text = attributes.read_bytes().decode("utf-8", "replace")
        shown = _shown(attributes, root)
        for line, attribute, driver in attribute_drivers(text):
            if attribute == "diff" and (attribute, driver) not in defined:
                continue  # a built-in diff pattern (diff=python): no program
            problems.append(
                Problem(
                    CODE,
                    shown,
                    line,
                    f"'{attribute}={driver}' asks git to run the {attribute} driver "
                    f"'{driver}' on matching files; {_NEVER_RUN}",
                )
            )
    return tuple(problems)


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
