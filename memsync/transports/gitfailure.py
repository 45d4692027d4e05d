"""Why a network git call (fetch, push, ls-remote) failed, read from git's and ssh's words.

Three kinds (CONTRACT §2, §8): the upstream refused the credentials (`AUTH_FAILED`: HTTP
401/403, a prompt git may not show, ssh's `Permission denied (publickey…)`), the SSH host
key is not the one `known_hosts` pins (`HOST_KEY_CHANGED`: OpenSSH's "REMOTE HOST
IDENTIFICATION HAS CHANGED" banner), and anything else (`UNREACHABLE`). Each kind is an
allowlist of the phrases git and OpenSSH print; unknown text is `UNREACHABLE`.
"""

from __future__ import annotations

import re
from enum import Enum


class Failure(Enum):
    UNREACHABLE = "unreachable"
    AUTH_FAILED = "auth-failed"
    HOST_KEY_CHANGED = "host-key-changed"


_HOST_KEY_CHANGED = (
    re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED", re.IGNORECASE),
    re.compile(r"host key for \S+ has changed and you have requested strict", re.IGNORECASE),
)
_AUTH_FAILED = (
    re.compile(r"\bAuthentication failed for\b", re.IGNORECASE),  # git over HTTP: 401
    re.compile(r"could not read (?:Username|Password) for", re.IGNORECASE),  # 401, no prompt
    re.compile(r"The requested URL returned error: 40[13]\b", re.IGNORECASE),
    re.compile(r"Permission denied \((?:publickey|password|keyboard-interactive|hostbased)"),
    re.compile(r"Too many authentication failures", re.IGNORECASE),
)
# "The fingerprint for the ED25519 key sent by the remote host is\nSHA256:….": one line
# once `cause` joins the pair, two in ssh's own output.
_FINGERPRINT = re.compile(
    r"The fingerprint for the (?P<type>[A-Za-z0-9_-]{1,32}) key sent by the remote host is\s*"
    r"(?P<fp>(?:SHA256|MD5):[A-Za-z0-9+/=:]{1,128})"
)
FINGERPRINT_INTRO = "key sent by the remote host is"


def failure_of(text: str) -> Failure:
    """The kind of a failed network call, from its (redacted) stderr."""
    if any(p.search(text) for p in _HOST_KEY_CHANGED):
        return Failure.HOST_KEY_CHANGED
    if any(p.search(text) for p in _AUTH_FAILED):
        return Failure.AUTH_FAILED
    return Failure.UNREACHABLE


def offered_key(text: str) -> str | None:
    """The host key the remote offered, as ssh printed it (`ED25519 SHA256:…`), or None."""
    found = _FINGERPRINT.search(text)
    if found is None:
        return None
    return f"{found.group('type')} {found.group('fp').rstrip('.')}"


def is_important(line: str) -> bool:
    """A line `cause` keeps ahead of the others when it must shorten: the offered key."""
    return _FINGERPRINT.search(line) is not None
