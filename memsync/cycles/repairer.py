"""The repair role as a sync's callers hand it to `roots` (`roots/repairing.py`): made,
and `cycles.repair` imported, only when a merge conflicts. The daemon hands
`make_repairer`; a one-shot process (`sync-now`, `cycle` without a daemon) hands
`make_oneshot_repairer`, whose git box asks git what GitPython's import would answer
(`Git.resident`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memsync.config.model import RootSettings
    from memsync.roots.layout import RootLayout
    from memsync.roots.repairing import Settler
    from memsync.validators.graph import GraphValidator
    from memsync.validators.policy import SyncPolicy


def make_repairer(
    root: RootSettings,
    layout: RootLayout,
    policy: SyncPolicy,
    graph: GraphValidator,
    branch: str,
    *,
    resident: bool = True,
) -> Settler:
    from memsync.cycles.repair import Repairer  # noqa: PLC0415 - on a conflict only

    return Repairer(root, layout, policy, graph, branch, resident=resident)


def make_oneshot_repairer(
    root: RootSettings,
    layout: RootLayout,
    policy: SyncPolicy,
    graph: GraphValidator,
    branch: str,
) -> Settler:
    """`make_repairer` for a one-shot process: its git box keeps no resident handle."""
    return make_repairer(root, layout, policy, graph, branch, resident=False)
