"""The outcome of one sync cycle for one root (CONTRACT §2 statuses, exact words)."""

from __future__ import annotations

from dataclasses import dataclass, field

from memsync.validators.problems import Problem

CURRENT = "current"
SYNCED = "synced"
PUSHED = "pushed"
DIRTY = "dirty"
CONFLICT = "conflict"
REJECTED = "rejected"
REWOUND = "rewound"
OFFLINE = "offline"
ERROR = "error"
BUSY = "busy"
DISABLED = "disabled"
UNCONFIGURED = "unconfigured"

OK = frozenset({CURRENT, SYNCED, PUSHED})


@dataclass(frozen=True)
class SyncResult:
    root: str
    status: str
    message: str
    head: str | None = None
    upstream: str | None = None
    files: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    rescue_ref: str | None = None
    operation_id: str | None = None
    duration_ms: int = 0
    dry_run: bool = False
    plan: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return self.status in OK
