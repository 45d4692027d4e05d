"""What kind of failure an HTTP request (`transports/http.py`) ended in: a word the view
sources and their callers decide on. Kept apart from the HTTP box so that a Git share's
source (`views/gitsource.py`), which reports the same kinds, loads no HTTP client (aiohttp,
issue 18)."""

from __future__ import annotations

from enum import StrEnum


class ErrorKind(StrEnum):
    REFUSED = "refused"  # a URL or redirect we will not follow (scheme, host, loop)
    TOO_LARGE = "too-large"
    TRUNCATED = "truncated"
    TIMEOUT = "timeout"
    NOT_FOUND = "not-found"
    UNAUTHORIZED = "unauthorized"
    FORBIDDEN = "forbidden"
    RATE_LIMITED = "rate-limited"
    SERVER = "server"
    CONNECTION = "connection"  # refused, reset, DNS: nothing usable came back
    PROTOCOL = "protocol"  # an answer we cannot use (odd status, malformed response)
    STORAGE = "storage"  # the body could not be written locally
