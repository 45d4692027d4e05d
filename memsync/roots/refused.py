"""What an admission (`roots.admit`) answers when it publishes nothing: a dry run, no
candidate made, a candidate that failed a check, a fence that broke, a key already settled,
nothing to land. Apart from `admit.Published` so that a clean cycle, which publishes, never
builds these classes (issue 18: a cold `sync-now` pays for what it uses).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memsync.values import value

if TYPE_CHECKING:
    from memsync.roots.candidate import MergeFailed
    from memsync.roots.publish import FenceBroken
    from memsync.validators.problems import Report


@value
class DryRun:
    """The candidate passed every check; a dry run publishes nothing."""

    operation_id: str
    candidate: str
    files: tuple[str, ...]


@value
class Unstaged:
    """The stage step made no candidate (a conflict, a failed merge or replay)."""

    operation_id: str
    failure: MergeFailed


@value
class Invalid:
    """The candidate failed a check (`report`); nothing was published."""

    operation_id: str
    candidate: str
    files: tuple[str, ...]
    report: Report


@value
class Fenced:
    """The active root changed under the operation; nothing was published."""

    operation_id: str
    fence: FenceBroken
    candidate: str | None = None  # the validated commit that could not land


@value
class AlreadyDone:
    """An operation with this key already settled; nothing was done again."""

    operation_id: str


@value
class NoChange:
    """The stage step had nothing to land; the operation settled `no_change`."""

    operation_id: str


Refused = DryRun | Unstaged | Invalid | Fenced | AlreadyDone | NoChange
