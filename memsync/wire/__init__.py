"""The one wire model: pydantic models of every JSON document memsync prints, serves or reads.

Producers and consumers import the same models from here: the CLI's `--json` output
(`wire.cli`), view manifests (`wire.manifest`) and the hub API (`wire.hub`).
"""

from memsync.wire.cli import (
    CycleStatus,
    DaemonStatus,
    InitReport,
    InsightStatus,
    KeyReport,
    ProblemModel,
    RootStatus,
    StatusReport,
    SyncReport,
    SyncResultModel,
    ValidateReport,
    ViewBuildReport,
    ViewPublishReport,
    ViewsPullReport,
    ViewStatus,
    ViewVerifyReport,
)

__all__ = [
    "CycleStatus",
    "DaemonStatus",
    "InitReport",
    "InsightStatus",
    "KeyReport",
    "ProblemModel",
    "RootStatus",
    "StatusReport",
    "SyncReport",
    "SyncResultModel",
    "ValidateReport",
    "ViewBuildReport",
    "ViewPublishReport",
    "ViewStatus",
    "ViewVerifyReport",
    "ViewsPullReport",
]
