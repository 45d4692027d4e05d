"""The repair seam: what a sync hands a repair role when a merge conflicts, what it gets
back, and the shape of the thing that settles it.

`roots` never imports the repair role (it sits above, in `cycles`): the caller of a sync
passes a `RepairMaker` in `SyncOptions.repair` (`cycles.repairer.make_repairer`, which
imports the role only when a merge conflicts), and the cycle makes its `Settler` with it.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Protocol

from memsync.roots.result import SyncStatus
from memsync.validators.problems import Problem
from memsync.values import value

if TYPE_CHECKING:
    from memsync.config.model import RootSettings
    from memsync.roots.layout import RootLayout
    from memsync.validators.graph import GraphValidator
    from memsync.validators.policy import SyncPolicy


@value
class Conflict:
    """What the sync found: the merge of `upstream` into `start` conflicted, or is invalid."""

    start: str
    upstream: str
    conflicted: bool  # True: unmerged paths; False: a clean merge whose result is invalid
    message: str
    files: tuple[str, ...]
    problems: tuple[Problem, ...] = ()

    def diagnostic(self) -> str:
        """The canonical JSON of what the role is asked to settle (part of the key)."""
        problems = [[p.code, p.path, p.line, p.message] for p in self.problems]
        data = {
            "conflicted": self.conflicted,
            "files": sorted(self.files),
            "message": self.message,
            "problems": problems,
        }
        return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@value
class Repaired:
    """The role's merge was validated and published."""

    operation_id: str
    candidate: str
    files: tuple[str, ...]
    role: str
    again: bool = False  # an earlier repair of this same conflict, published once more


@value
class NotRepaired:
    """The root stays as it was; `message` says why and what to do."""

    status: SyncStatus
    message: str
    operation_id: str | None = None
    files: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()


class Settler(Protocol):
    """Settles one root's sync conflicts (`cycles.repair.Repairer`)."""

    @property
    def ran(self) -> bool:
        """The role was asked (its own time was spent)."""
        ...

    def settle(self, conflict: Conflict) -> Repaired | NotRepaired: ...


class RepairMaker(Protocol):
    def __call__(
        self,
        root: RootSettings,
        layout: RootLayout,
        policy: SyncPolicy,
        graph: GraphValidator,
        branch: str,
    ) -> Settler: ...
