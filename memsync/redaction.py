"""Redaction of credentials in free text: every URL loses its user-info, query and fragment,
and anything shaped like a hub token (`msk_…`, even cut short) is replaced.

Used on everything git prints and on every message memsync writes to a terminal, a log or a
state file. It errs on the side of hiding too much: a query or fragment is never shown.
"""

from __future__ import annotations

import re

from memsync.lazypattern import lazy

# A hub token, or any piece of one (`hub.tokens` has the exact form).
TOKENISH = lazy(r"msk_[^\s&/?#;,\"']*", re.IGNORECASE)
# A URL runs from its scheme to the first blank, quote or angle bracket.
_URL = lazy(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<rest>[^\s'\"<>`]*)")


def redact_url_text(match: re.Match[str]) -> str:
    scheme, rest = match.group("scheme"), match.group("rest")
    at = rest.rfind("@")
    if at >= 0:
        # Up to the last "@" of the whole URL: a password may itself hold "@", "/" or "?"
        # unescaped. An "@" in a path or query hides the host too; that is the safe side.
        rest = "***@" + rest[at + 1 :]
    for mark in ("?", "#"):
        cut = rest.find(mark)
        if cut >= 0:
            rest = rest[:cut] + mark + "***"
    return scheme + rest


def redact(text: str) -> str:
    """`text` with the user-info, query and fragment of every URL in it replaced by `***`."""
    if "://" not in text:
        return text
    return _URL.sub(redact_url_text, text)


def redact_secrets(text: str) -> str:
    """`redact`, and every token-shaped word replaced (for logs, where a library may quote
    a request's headers)."""
    text = redact(text)
    return TOKENISH.sub("msk_REDACTED", text) if "msk_" in text.lower() else text
