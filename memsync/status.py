"""`memsync status`: what each configured root looks like now, from local facts only.

No network: head, branch, dirty, ahead/behind against the last fetched upstream, pending
journal records and the last recorded cycle result.
"""

from __future__ import annotations

import os
from pathlib import Path

from memsync import __version__, timefmt
from memsync.config.model import RootSettings, Settings
from memsync.cycles.records import Pressure, PruneState
from memsync.errors import GitError
from memsync.roots import anchor, pause
from memsync.roots.edits import blocking_changes
from memsync.roots.journal import Journal
from memsync.roots.layout import RootLayout
from memsync.roots.state import RootState
from memsync.roots.syncstatus import SyncStatus
from memsync.transports.gitstatus import WorkStates
from memsync.validators.policy import SyncPolicy
from memsync.wire.shape import STATUS_REPORT, fit

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:  # the wire models (pydantic) load only for the daemon or an odd value
    from typing import Any

    from memsync.config.sections import ViewSettings
    from memsync.wire import RootStatus, StatusReport, ViewStatus

# The documents below are the wire models' (`memsync.wire.cli`) as `model_dump(mode="json")`
# gives them, keys in the models' order; `status_json` lets `wire.shape.fit` check that.


def root_status(settings: RootSettings, state_dir: Path) -> RootStatus:
    from memsync.wire import RootStatus  # noqa: PLC0415

    return RootStatus.model_validate(root_document(settings, state_dir))


def root_document(
    settings: RootSettings, state_dir: Path, *, resident: bool = True
) -> dict[str, Any]:
    """One root's status from local facts, as the `RootStatus` model's JSON document.
    `resident=False` (a one-shot `memsync status`): the git box asks git, never GitPython."""
    layout = RootLayout.for_root(state_dir, settings.name)
    state = RootState.load(layout.state_file)
    pending = len(Journal(layout.journal_dir).unsettled())
    pressure = Pressure.load(layout.base / "insight.json")
    prune = PruneState.load(layout.base / "prune.json")
    head = branch = None
    dirty: bool | None = None
    ahead = behind = None
    message = state.last_message
    # the box's `git status` alone (the same runner as `Git`'s: environment, config, guard)
    git = WorkStates(settings.path, timeout=settings.timeout.total_seconds(), resident=resident)
    try:
        if settings.path.is_dir() and git.git_dir() is not None:
            work = git.work_state()
            branch, head = work.branch, work.head
            dirty = bool(
                blocking_changes(work.entries, SyncPolicy(max_file_size=settings.max_file_size))
            )
            ahead, behind = work.ahead, work.behind
        else:
            message = f"{settings.path} is not the top level of a Git work tree"
    except GitError as exc:
        message = exc.message
    held = pause.holding(state_dir, "root", settings.name)
    return {
        "root": settings.name,
        "path": str(settings.path),
        "head": head,
        "branch": branch,
        "status": SyncStatus.PAUSED.value if held else state.last_status,
        "message": held.describe() if held else message,
        "last_success_at": state.last_success_at,
        "last_failure_at": state.last_failure_at,
        "dirty": dirty,
        "ahead": ahead,
        "behind": behind,
        "pending_operations": pending,
        "trusted_upstream": state.trusted_upstream,
        "prune": {
            "enabled": settings.prune_enabled,
            "generation_commits": settings.prune_generation_commits,
            "commits": prune.commits,
            "last_result": prune.last_result,
            "last_run_at": prune.last_run_at,
        },
        "insight": {
            "enabled": settings.insight_enabled,
            "points": pressure.points,
            "threshold": settings.insight_threshold,
            "last_result": pressure.last_result,
            "last_run_at": pressure.last_run_at,
        },
        "paused": held is not None,
        "paused_until": held.until if held else None,
        "admission": anchor.describe(layout.base, settings.admission),
    }


def view_status(view: ViewSettings, state_dir: Path) -> ViewStatus:
    from memsync.wire import ViewStatus  # noqa: PLC0415

    return ViewStatus.model_validate(view_document(view, state_dir))


def view_document(view: ViewSettings, state_dir: Path) -> dict[str, Any]:
    """A view's state from its trust record and import directory (no network), as the
    `ViewStatus` model's JSON document."""
    from memsync.views.layout import import_dir  # noqa: PLC0415 - a configuration with views
    from memsync.views.trust import TrustState, trust_path  # noqa: PLC0415

    trust = TrustState.load(trust_path(state_dir, view.name))
    active = import_dir(view.root_path, view.heading)
    status = trust.status(now=timefmt.now(), max_stale=view.max_stale, has_import=active.is_dir())
    held = pause.holding(state_dir, "view", view.name)
    return {
        "view": view.name,
        "root": view.root,
        "heading": view.heading,
        "status": "paused" if held else status,
        "revision": trust.revision,
        "fetched_at": trust.fetched_at,
        "expires_at": trust.expires_at,
        "message": held.describe() if held else trust.last_message,
        "paused": held is not None,
        "paused_until": held.until if held else None,
    }


def config_name(path: Path | None) -> str | None:
    """The configuration file as `status` names it: its resolved real path."""
    return os.path.realpath(path) if path is not None else None


def status_document(
    settings: Settings, *, other_config: str | None = None, resident: bool = True
) -> dict[str, Any]:
    """The report from local facts, as the `StatusReport` model's JSON document (no daemon
    answers); `other_config`: the file a daemon on the control socket serves instead."""
    return {
        "daemon": {
            "running": False,
            "pid": None,
            "version": __version__,
            "started_at": None,
            "uptime_seconds": None,
            "schedule": [],
            "config": config_name(settings.config_path),
            "other_config": other_config,
        },
        "roots": [root_document(r, settings.state_dir, resident=resident) for r in settings.roots],
        "views": [view_document(v, settings.state_dir) for v in settings.views],
    }


def status_report(settings: Settings, *, other_config: str | None = None) -> StatusReport:
    """The report from local facts as the wire model (the daemon adds itself to it)."""
    from memsync.wire import StatusReport  # noqa: PLC0415

    return StatusReport.model_validate(status_document(settings, other_config=other_config))


def status_json(settings: Settings, *, other_config: str | None = None) -> dict[str, Any]:
    """What `memsync status --json` prints without a daemon: the document when it has the
    report's exact shape (`wire.shape`), else what the model makes of it."""
    document = status_document(settings, other_config=other_config, resident=False)
    fitted: dict[str, Any] | None = fit(document, STATUS_REPORT)
    if fitted is not None:
        return fitted
    from memsync.wire import StatusReport  # noqa: PLC0415

    return StatusReport.model_validate(document).model_dump(mode="json")
