"""A root's own Git configuration, object store and attributes (`unsafe-repo-config`).

Two kinds of finding, both reported by `validate` and `doctor`, neither ever showing a
value (a helper command line may carry a credential):

- what **refuses** the root: a config key outside memsync's allowlist, an alternate object
  store, a grafts file (see `transports/gitkeys.py`). git does not run on the root, so no
  cycle syncs it, until the person removes it; the finding says how.
- what memsync **defuses**: a key or attribute that names a program memsync overrides on
  every call (filters, drivers, helpers, signers). Nothing runs; the person may remove it.
"""

from __future__ import annotations

from pathlib import Path

from memsync.transports.git import Git
from memsync.transports.gitconfig import attribute_drivers, program_entries, split_key
from memsync.transports.gitenv import FORCED_KEYS
from memsync.transports.gitguard import GUARD
from memsync.transports.gitkeys import Kind, classify
from memsync.validators.problems import Problem

CODE = "unsafe-repo-config"
_NEVER_RUN = "memsync never runs it; remove it if you do not need it"


def repo_config_problems(root: Path) -> tuple[Problem, ...]:
    """Every `unsafe-repo-config` problem of the repository whose work tree is `root`:
    first what refuses the root, then what memsync defuses."""
    git = Git(root)
    if git.git_dir() is None:
        return ()
    return (*refusing_problems(git), *_defused(git, root))


def refusing_problems(git: Git) -> tuple[Problem, ...]:
    """What makes git refuse to run on this repository (empty when it may run)."""
    return tuple(Problem(CODE, u.where, None, u.message) for u in GUARD.unsafe(git))


def _defused(git: Git, root: Path) -> list[Problem]:
    entries = git.config_entries()
    problems: list[Problem] = []
    for entry, reason in program_entries(entries):
        if classify(entry, FORCED_KEYS).kind is Kind.REFUSED:
            continue  # reported as refusing the root
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
    return problems


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
