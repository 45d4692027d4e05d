"""A root's sync status: the contract's exact words (CONTRACT §2), which a cycle's result
(`result.SyncResult`) carries and `status` shows, apart so that `status` loads no result.
"""

from __future__ import annotations

from enum import StrEnum


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
