"""How a failed network call (a fetch or a push) reads as a root's status and message.

`offline` when the upstream could not be reached, `auth-failed` when it refused the
credentials, `host-key-changed` when its SSH host key is not the one `known_hosts` pins
(the message names the key it offered): CONTRACT §2 and §8.
"""

from __future__ import annotations

from memsync.roots.result import SyncStatus
from memsync.transports.gitenv import cause
from memsync.transports.gitfailure import Failure, failure_of, offered_key

STATUSES = {
    Failure.UNREACHABLE: SyncStatus.OFFLINE,
    Failure.AUTH_FAILED: SyncStatus.AUTH_FAILED,
    Failure.HOST_KEY_CHANGED: SyncStatus.HOST_KEY_CHANGED,
}


def unreachable(detail: str, what: str) -> tuple[SyncStatus, str]:
    """The status and message for a network call that failed with stderr `detail`
    (redacted); `what` says which call, for the `offline` message."""
    kind = failure_of(detail)
    said = cause(detail)
    if kind is Failure.AUTH_FAILED:
        return SyncStatus.AUTH_FAILED, f"the upstream refused the credentials: {said}"
    if kind is Failure.HOST_KEY_CHANGED:
        offered = offered_key(detail) or "a key ssh did not name"
        return SyncStatus.HOST_KEY_CHANGED, (
            f"the upstream's SSH host key is not the one known_hosts pins: it offered "
            f"{offered}; check it with the host's owner, then update known_hosts (automatic "
            f"syncs wait until known_hosts or the configuration changes): {said}"
        )
    return STATUSES[kind], f"{what}: {said}"
