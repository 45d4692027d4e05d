"""Status transitions of roots and views: the one place that sees every result the daemon
gets and says what changed.

`Transitions.observe` keeps each root's and view's previous status and returns a
`Transition` only when it changes (a `synced` or `pushed` to new commits counts as a
change: something moved). The daemon logs each transition once (`log`) and hands it to the
hooks; nothing is said while a status stays. Levels: a person's edit (`dirty`), a disabled
or paused root and `busy` are INFO; `rejected`, `conflict`, `rewound`, `offline`,
`auth-failed`, `host-key-changed`, `unconfigured` and a `stale` view are WARNING; `error`
and an `unavailable` view are ERROR; coming back to ok is INFO (event `recovered`), and
settling from `synced`/`pushed` back to `current` is DEBUG.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from memsync import timefmt

Kind = Literal["root", "view"]

ROOT_OK = frozenset({"current", "synced", "pushed"})
VIEW_OK = frozenset({"current", "pulled"})
MOVED = frozenset({"synced", "pushed", "pulled"})  # each one is news, even repeated
QUIET = frozenset({"dirty", "disabled", "paused", "busy"})  # normal: INFO
LOUD = frozenset({"error", "unavailable"})  # nothing works: ERROR
SHORT = 12  # hex digits of a commit id in a log line


@dataclass(frozen=True)
class Transition:
    """One root's or view's status change, with the result that made it."""

    kind: Kind
    name: str
    previous: str | None  # None: the first result since the daemon (re)configured it
    status: str
    event: str  # "status-changed", "recovered", "moved", "first"
    message: str
    level: int
    result: Mapping[str, Any] = field(default_factory=dict)  # the sync-now / views pull entry
    time: str = ""

    def document(self) -> dict[str, Any]:
        """The JSON document hooks get: the result entry, plus what changed and when."""
        return {
            **self.result,
            "kind": self.kind,
            "previous_status": self.previous,
            "event": self.event,
            "time": self.time,
        }

    def line(self) -> str:
        """`root bob: offline -> current (head 1a2b3c4d5e6f, upstream 1a2b…): message`."""
        change = f"{self.previous} -> {self.status}" if self.previous else self.status
        ids = [
            f"{key} {str(self.result[key])[:SHORT]}"
            for key in ("head", "upstream")
            if isinstance(self.result.get(key), str)
        ]
        revision = self.result.get("revision")
        if isinstance(revision, int):
            ids.append(f"revision {revision}")
        detail = f" ({', '.join(ids)})" if ids else ""
        codes = sorted(
            {str(p.get("code")) for p in self.result.get("problems") or () if isinstance(p, dict)}
        )
        problems = f" [{', '.join(codes)}]" if codes else ""
        return f"{self.kind} {self.name}: {change}{detail}: {self.message}{problems}"

    def fields(self) -> dict[str, Any]:
        """The structured fields of the log record (JSON format)."""
        keep = ("head", "upstream", "revision", "previous_revision", "rescue_ref", "files")
        found: dict[str, Any] = {"previous_status": self.previous, "status": self.status}
        found.update({k: self.result[k] for k in keep if self.result.get(k) not in (None, [])})
        problems = self.result.get("problems") or []
        if problems:
            found["problems"] = problems
        if self.result.get("operation_id"):
            found["operation_id"] = self.result["operation_id"]
        return found


def level_for(kind: Kind, previous: str | None, status: str) -> int:
    ok = ROOT_OK if kind == "root" else VIEW_OK
    if status in ok:
        if status == "current" and (previous is None or previous in ok):
            return logging.DEBUG if previous is not None else logging.INFO
        return logging.INFO
    if status in QUIET:
        return logging.INFO
    if status in LOUD:
        return logging.ERROR
    return logging.WARNING


def _event(kind: Kind, previous: str | None, status: str) -> str:
    ok = ROOT_OK if kind == "root" else VIEW_OK
    if previous is None:
        return "first"
    if status in ok and previous not in ok:
        return "recovered"
    if status == previous:
        return "moved"
    return "status-changed"


class Transitions:
    """The previous status of every root and view; `observe` says what changed."""

    def __init__(self) -> None:
        self._last: dict[tuple[Kind, str], tuple[str, object]] = {}

    def observe(
        self, kind: Kind, name: str, status: str, message: str, result: Mapping[str, Any]
    ) -> Transition | None:
        """The transition `result` makes for `kind` `name`, or None when its status stays."""
        key = (kind, name)
        moved_to = (result.get("head"), result.get("revision")) if status in MOVED else None
        previous = self._last.get(key)
        self._last[key] = (status, moved_to)
        if previous is not None and previous == (status, moved_to):
            return None
        before = previous[0] if previous is not None else None
        return Transition(
            kind=kind,
            name=name,
            previous=before,
            status=status,
            event=_event(kind, before, status),
            message=message,
            level=level_for(kind, before, status),
            result=dict(result),
            time=timefmt.rfc3339(timefmt.now()),
        )

    def forget(self, kind: Kind, name: str) -> None:
        """`name` is no longer configured: its next result (if it comes back) is a first."""
        self._last.pop((kind, name), None)


def log(logger: logging.Logger, transition: Transition) -> None:
    """One line for a transition (with its structured context for the JSON format)."""
    context = {
        transition.kind: transition.name,
        "event": transition.event,
        "fields": transition.fields(),
    }
    logger.log(transition.level, "%s", transition.line(), extra={"memsync": context})
