"""Role write grants (CONTRACT §7): which paths a role's commit may change (pure).

insight: only add `insight_logs/<name>.md`, exactly one file per turn (grants count files,
not only paths: a second log is a `grant-violation` too); pruner: change `MEMORY.md` and
`MEMORY_*.md` except the two fixed Agent Correction collections; a repair role: the
synchronized paths.
Every cycle write then passes the full gate as well.
"""

from __future__ import annotations

from collections.abc import Sequence

from memsync.lazypattern import lazy
from memsync.validators.corrections import COLLECTION_PATHS
from memsync.validators.paths import printable
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem

_INSIGHT_LOG = lazy(r"insight_logs/[A-Za-z0-9_.-]+\.md")
_MEMORY = lazy(r"MEMORY(?:_[^/]*)?\.md")

INSIGHT, PRUNE, REPAIR = "insight", "prune", "repair"

# How many files a role's one commit may add, per kind (unlisted kinds: no count limit).
MAX_ADDED = {INSIGHT: 1}


def allowed(kind: str, status: str, path: str, policy: SyncPolicy) -> bool:
    """Whether a role of `kind` may make this (status, path) change."""
    if kind == INSIGHT:
        return status == "A" and _INSIGHT_LOG.fullmatch(path) is not None
    if kind == PRUNE:
        return _MEMORY.fullmatch(path) is not None and path not in COLLECTION_PATHS
    if kind == REPAIR:
        return policy.allows(path)
    return False


def check_grants(
    kind: str, changes: Sequence[tuple[str, str]], policy: SyncPolicy | None = None
) -> list[Problem]:
    """`grant-violation` for every change outside the role's grants and for every file past
    the kind's count (insight: one log per turn); `empty-commit` when
    there is no change at all and the kind may not make empty commits (only prune may:
    `prune: checkpoint`)."""
    policy = policy or SyncPolicy()
    problems: list[Problem] = []
    for status, path in changes:
        if not allowed(kind, status, path, policy):
            shown = printable(path)
            what = {"A": "add", "D": "delete", "M": "change", "T": "retype"}.get(status, "change")
            problems.append(
                Problem(
                    "grant-violation",
                    shown,
                    None,
                    f"the {kind} role may not {what} '{shown}'",
                )
            )
    limit = MAX_ADDED.get(kind)
    added = [
        path for status, path in changes if status == "A" and allowed(kind, status, path, policy)
    ]
    if limit is not None and len(added) > limit:
        for path in sorted(added)[limit:]:
            shown = printable(path)
            problems.append(
                Problem(
                    "grant-violation",
                    shown,
                    None,
                    f"the {kind} role may add {limit} file(s) per turn; '{shown}' is one "
                    f"more ({len(added)} added)",
                )
            )
    if not changes and kind != PRUNE:
        problems.append(Problem("empty-commit", None, None, f"the {kind} role made no change"))
    return problems
