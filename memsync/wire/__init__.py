"""The one wire model: pydantic models of every JSON document memsync prints, serves or reads.

Producers and consumers import the same models from here: the CLI's `--json` output
(`wire.cli`), view manifests (`wire.manifest`) and the hub API (`wire.hub`). The names
below load on first use, so that `wire.shape`, `wire.documents` (the daemon's answers,
equal to these models' documents) and `wire.requests` (the control socket's requests) are
cheap to import: standard library only.

One direction: producers convert their values to these documents (`SyncResult.model()`,
`.document()`); nothing here imports a producer (pyproject.toml's import-linter contract,
tests/unit/test_wire_layer.py).
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any

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


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("memsync.wire.cli"), name)
    globals()[name] = value
    return value
