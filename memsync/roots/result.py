"""The outcome of one sync cycle for one root (CONTRACT §2 statuses, exact words)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from memsync.validators.problems import Problem


class SyncStatus(StrEnum):
    """A root's sync status; the values are the contract's exact words."""

    CURRENT = "current"
    SYNCED = "synced"
    PUSHED = "pushed"
    DIRTY = "dirty"
    CONFLICT = "conflict"
    REJECTED = "rejected"
    REWOUND = "rewound"
    OFFLINE = "offline"
    AUTH_FAILED = "auth-failed"
    HOST_KEY_CHANGED = "host-key-changed"
    ERROR = "error"
    BUSY = "busy"
    DISABLED = "disabled"
    PAUSED = "paused"
    UNCONFIGURED = "unconfigured"


OK = frozenset({SyncStatus.CURRENT, SyncStatus.SYNCED, SyncStatus.PUSHED})
HELD = frozenset({SyncStatus.PAUSED})  # the operator asked for it: not a failure (exit 0)


@dataclass(frozen=True)
class SyncResult:
    root: str
    status: SyncStatus
    message: str
    head: str | None = None
    upstream: str | None = None
    files: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    rescue_ref: str | None = None
    operation_id: str | None = None
    duration_ms: int = 0
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return self.status in OK
