"""Why a network git call (fetch, push, ls-remote) failed, read from git's and ssh's words.

Three kinds (CONTRACT §2, §8): the upstream refused the credentials (`AUTH_FAILED`: HTTP
401/403, a prompt git may not show, ssh's `Permission denied (publickey…)`), the SSH host
key is not the one `known_hosts` pins (`HOST_KEY_CHANGED`: OpenSSH's "REMOTE HOST
IDENTIFICATION HAS CHANGED" banner), and anything else (`UNREACHABLE`). Each kind is an
allowlist of the phrases git and OpenSSH print; unknown text is `UNREACHABLE`.
"""

from __future__ import annotations

import functools
import re
from enum import Enum


class Failure(Enum):
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth-failed"
    HOST_KEY_CHANGED = "host-key-changed"


# The phrases, compiled when a call first fails (a command whose calls succeed never does).
_HOST_KEY_CHANGED = (
    (r"REMOTE HOST IDENTIFICATION HAS CHANGED", re.IGNORECASE),
    (r"host key for \S+ has changed and you have requested strict", re.IGNORECASE),
)
_AUTH_FAILED = (
    (r"\bAuthentication failed for\b", re.IGNORECASE),  # git over HTTP: 401
    (r"could not read (?:Username|Password) for", re.IGNORECASE),  # 401, no prompt
    (r"The requested URL returned error: 40[13]\b", re.IGNORECASE),
    (r"Permission denied \((?:publickey|password|keyboard-interactive|hostbased)", 0),
    (r"Too many authentication failures", re.IGNORECASE),
)
# "The fingerprint for the ED25519 key sent by the remote host is\nSHA256:….": one line
# once `cause` joins the pair, two in ssh's own output.
_FINGERPRINT = (
    (
        r"The fingerprint for the (?P<type>[A-Za-z0-9_-]{1,32}) key sent by the remote host is"
        r"\s*(?P<fp>(?:SHA256|MD5):[A-Za-z0-9+/=:]{1,128})",
        0,
    ),
)
FINGERPRINT_INTRO = "key sent by the remote host is"


@functools.cache
def _compiled(patterns: tuple[tuple[str, int], ...]) -> tuple[re.Pattern[str], ...]:
    return tuple(re.compile(pattern, flags) for pattern, flags in patterns)


def failure_of(text: str) -> Failure:
    """The kind of a failed network call, from its (redacted) stderr."""
    if any(p.search(text) for p in _compiled(_HOST_KEY_CHANGED)):
        return Failure.HOST_KEY_CHANGED
    if any(p.search(text) for p in _compiled(_AUTH_FAILED)):
        return Failure.AUTH_FAILED
    return Failure.UNREACHABLE


def offered_key(text: str) -> str | None:
    """The host key the remote offered, as ssh printed it (`ED25519 SHA256:…`), or None."""
    found = _compiled(_FINGERPRINT)[0].search(text)
    if found is None:
        return None
    return f"{found.group('type')} {found.group('fp').rstrip('.')}"


def is_important(line: str) -> bool:
    """A line `cause` keeps ahead of the others when it must shorten: the offered key."""
    return _compiled(_FINGERPRINT)[0].search(line) is not None
