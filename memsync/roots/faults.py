"""Named fault points for the crash matrices: the one registry, every point of every flow.

When `MEMSYNC_FAULT` names a point, the process kills itself with SIGKILL on reaching it,
exactly as a power cut or an OOM kill would stop it there. Unset, this costs one dict lookup.
The e2e crash matrices run one case per point of their flow.
"""

from __future__ import annotations

import os
import signal

ENV = "MEMSYNC_FAULT"

SYNC_POINTS = (  # a root's cycle (roots/)
    "after-fetch",
    "after-staging",
    "after-merge",
    "after-validation",
    "after-prepared",
    "after-worktree-update",
    "after-ref-update",
    "after-publish",
    "before-push",
    "after-push",
)
VIEW_POINTS = (  # a view import's promotion (views/store.py)
    "view-after-extract",  # promote() entered: the candidate is extracted and validated
    "view-after-record",  # the promotion record is written, nothing moved yet
    "view-between-renames",  # two-step only: active moved to old, candidate not yet active
    "view-after-swap",  # the new import is active, trust.json still names the old one
    "view-after-trust-write",  # trust.json names the new revision; old tree and record remain
)
CYCLE_POINTS = (  # a prune or insight turn (cycles/); it then passes the sync points
    # from after-merge on (admit.py, publish.py): after-prepared, after-ref-update, ...
    "cycle-during-executor",  # the role's command exited or its HTTP answer arrived
    "cycle-after-role-commit",  # the role's commits are collapsed into one, not yet pinned
)
POINTS = SYNC_POINTS + VIEW_POINTS + CYCLE_POINTS


def fault(point: str) -> None:
    if os.environ.get(ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
