"""From configuration to a turn: which role runs a root's prune or insight cycle, and how.

`cycle_now` is what `memsync cycle` (without a daemon) and the daemon's cycle workers call:
it builds the cycle's settings and its role from the configuration, runs one turn under the
root lock, and, when something landed and the root pushes, runs a sync cycle to push it.
"""

from __future__ import annotations

from dataclasses import replace

from memsync.config.model import RootSettings, Settings
from memsync.config.sections import CommandRoleSettings
from memsync.cycles.repairer import make_oneshot_repairer, make_repairer
from memsync.cycles.rolegroups import RoleGroups
from memsync.cycles.roles import CommandRole, OpenAIRole
from memsync.cycles.runlog import RunLog
from memsync.cycles.turn import (
    FAILED,
    LANDED,
    CycleResult,
    CycleSettings,
    Role,
    run_cycle,
)
from memsync.errors import UsageError
from memsync.roots import pause
from memsync.roots.layout import RootLayout

# What an agent CLI may see of the daemon's environment: enough to run, no secrets.
_PASSED_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "USER", "LOGNAME", "TERM")
MAX_LOG = 64 * 1024


def cycle_settings(root: RootSettings, kind: str) -> CycleSettings:
    if kind == "insight":
        return CycleSettings(
            "insight",
            root.insight_enabled,
            threshold=root.insight_threshold,
            points_per_commit=root.insight_points_per_commit,
        )
    return CycleSettings(
        "prune",
        root.prune_enabled,
        threshold=root.prune_generation_commits,
        revival_grace=root.prune_revival_grace,
    )


def role_for(settings: Settings, root: RootSettings, kind: str) -> tuple[Role, float]:
    """The configured role for this cycle and its timeout in seconds."""
    name = root.insight_role if kind == "insight" else root.prune_role
    role = settings.roles.get(name)
    if role is None:
        raise UsageError(
            f"roots.{root.name}.{kind}.role names {name!r}, which is not under `roles`",
            hint="define the role under `roles:` (executor: command or openai)",
        )
    runlog = RunLog.for_root(settings.state_dir, root.name, kind)
    if isinstance(role, CommandRoleSettings):
        groups = RoleGroups(RootLayout.for_root(settings.state_dir, root.name).base)
        return CommandRole(role, runlog=runlog, groups=groups), role.timeout.total_seconds()
    return OpenAIRole(role, runlog), role.timeout.total_seconds()


def cycle_now(
    settings: Settings,
    root_name: str,
    kind: str,
    *,
    force: bool,
    push: bool = True,
    resident: bool = True,
) -> CycleResult:
    """One turn for one root now; with `push`, a landed commit is pushed by a sync cycle
    right after (the daemon asks its own sync trigger instead, which also notifies).
    `resident`: this process lives on (the daemon), as `Git.resident` says."""
    root = settings.root(root_name)
    if root is None:
        raise UsageError(f"unknown root {root_name!r}")
    held = pause.holding(settings.state_dir, "root", root.name)
    if held is not None:  # `memsync pause` holds the maintenance cycles too (even --force)
        return CycleResult(root.name, kind, "not-due", held.describe())
    cycle = cycle_settings(root, kind)
    if not cycle.enabled and not force:
        return CycleResult(
            root.name, kind, "not-due", f"{kind} is off (roots.{root.name}.{kind}.enabled)"
        )
    try:
        role, timeout = role_for(settings, root, kind)
    except UsageError as exc:
        return CycleResult(root.name, kind, FAILED, exc.message)
    cycle = replace(cycle, enabled=True, timeout=timeout)
    # An agent a killed memsync process left running on this root ends before a new turn.
    RoleGroups(RootLayout.for_root(settings.state_dir, root.name).base).end_left()
    result = run_cycle(root, cycle, role, settings.state_dir, force=force, resident=resident)
    if push and result.status == LANDED and root.push and root.sync_enabled:
        from memsync.roots.cycle import SyncOptions, sync_root  # noqa: PLC0415 - a push only

        repair = make_repairer if resident else make_oneshot_repairer
        pushed = sync_root(root, settings.state_dir, SyncOptions(wait=60.0, repair=repair))
        note = "pushed" if pushed.ok else f"not pushed yet ({pushed.status}: {pushed.message})"
        result = CycleResult(**{**result.__dict__, "message": f"{result.message}; {note}"})
    return result
