"""Named fault points for the crash matrix.

When `MEMSYNC_FAULT` names a point, the process kills itself with SIGKILL on reaching it,
exactly as a power cut or an OOM kill would stop it there. Unset, this costs one dict lookup.
"""

from __future__ import annotations

import os
import signal

ENV = "MEMSYNC_FAULT"

POINTS = (
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


def fault(point: str) -> None:
    if os.environ.get(ENV) == point:
        os.kill(os.getpid(), signal.SIGKILL)
