"""The syntax of scalar configuration values, free of pydantic: units first, then names.

Durations are `<int><ms|s|m|h|d>` and sizes `<int><B|KiB|MiB|GiB>`: ASCII digits then a
unit, nothing else (no spaces, signs, fractions or bare numbers); `format_*` give back the
shortest exact form. The `check_*` functions accept names, HOST:PORT addresses, URLs, branch
names and public keys. Errors are `ValueError` with a message that shows the accepted form
(never a URL, which may hold credentials); the schema turns them into located problems.
"""

from __future__ import annotations

import base64
import ipaddress
import re
from datetime import timedelta
from urllib.parse import urlsplit

from memsync.names import NAME_MAX, is_name

DURATION_FORM = "<int><ms|s|m|h|d>, e.g. 60s"
SIZE_FORM = "<int><B|KiB|MiB|GiB>, e.g. 4MiB"

_DURATION_RE = re.compile(r"([0-9]+)(ms|s|m|h|d)")
_SIZE_RE = re.compile(r"([0-9]+)(B|KiB|MiB|GiB)")

# Largest unit first: formatting picks the largest unit that divides the value exactly.
_DURATION_UNITS: tuple[tuple[str, timedelta], ...] = (
    ("d", timedelta(days=1)),
    ("h", timedelta(hours=1)),
    ("m", timedelta(minutes=1)),
    ("s", timedelta(seconds=1)),
    ("ms", timedelta(milliseconds=1)),
)
_SIZE_UNITS: tuple[tuple[str, int], ...] = (
    ("GiB", 1024**3),
    ("MiB", 1024**2),
    ("KiB", 1024),
    ("B", 1),
)
_DURATION_FACTOR = dict(_DURATION_UNITS)
_SIZE_FACTOR = dict(_SIZE_UNITS)
_REF_FORBIDDEN = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")
PUBLIC_KEY_PREFIX = "ed25519:"
_MAX_DIGITS = 18  # keeps the arithmetic cheap; no sane setting needs more


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_duration(value: object) -> timedelta:
    """Parse `<int><ms|s|m|h|d>` into a timedelta; raise ValueError otherwise."""
    if not isinstance(value, str):
        if isinstance(value, int) and not isinstance(value, bool):
            raise ValueError(f"duration {value} has no unit (use {DURATION_FORM})")
        raise ValueError(f"expected a duration string (use {DURATION_FORM})")
    match = _DURATION_RE.fullmatch(value)
    if match is None:
        raise ValueError(f"invalid duration {_shown(value)} (use {DURATION_FORM})")
    try:
        if len(match.group(1)) > _MAX_DIGITS:
            raise OverflowError
        return int(match.group(1)) * _DURATION_FACTOR[match.group(2)]
    except OverflowError:
        raise ValueError(f"duration {_shown(value)} is too large") from None


def parse_size(value: object) -> int:
    """Parse `<int><B|KiB|MiB|GiB>` into a number of bytes; raise ValueError otherwise."""
    if not isinstance(value, str):
        if isinstance(value, int) and not isinstance(value, bool):
            raise ValueError(f"size {value} has no unit (use {SIZE_FORM})")
        raise ValueError(f"expected a size string (use {SIZE_FORM})")
    match = _SIZE_RE.fullmatch(value)
    if match is None:
        raise ValueError(f"invalid size {_shown(value)} (use {SIZE_FORM})")
    if len(match.group(1)) > _MAX_DIGITS:
        raise ValueError(f"size {_shown(value)} is too large")
    return int(match.group(1)) * _SIZE_FACTOR[match.group(2)]


def format_duration(value: timedelta) -> str:
    """The shortest exact `<int><unit>` form of a whole number of milliseconds."""
    if value < timedelta(0):
        raise ValueError("a duration cannot be negative")
    if value % _DURATION_FACTOR["ms"]:
        raise ValueError("a duration must be a whole number of milliseconds")
    for unit, factor in _DURATION_UNITS:
        if value % factor == timedelta(0) and value:
            return f"{value // factor}{unit}"
    return "0s"


def format_size(value: int) -> str:
    """The shortest exact `<int><unit>` form of a number of bytes."""
    if value < 0:
        raise ValueError("a size cannot be negative")
    for unit, factor in _SIZE_UNITS:
        if value % factor == 0 and value:
            return f"{value // factor}{unit}"
    return "0B"


def check_name(value: str) -> str:
    """A root, view or role name (`memsync.names`)."""
    if not is_name(value):
        raise ValueError(
            f"invalid name {value[:70]!r} (letters, digits, '_', '.', '-'; "
            f"starts with a letter or digit; at most {NAME_MAX} characters)"
        )
    return value


def check_text(value: str) -> str:
    """A non-empty single line (headings, model names, role references)."""
    if not value.strip():
        raise ValueError("must not be empty")
    if any(ch in value for ch in "\r\n\x00"):
        raise ValueError("must be a single line")
    return value


def check_http_url(value: str) -> str:
    """An http(s) URL with a host and no credentials in it."""
    if any(ch.isspace() for ch in value):
        raise ValueError("a URL cannot contain spaces")
    try:
        parts = urlsplit(value)
        _ = parts.port
    except ValueError:
        raise ValueError("invalid URL (host or port)") from None
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError("expected an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None:
        raise ValueError("put credentials in a token secret, not in the URL")
    return value


def check_listen(value: str) -> str:
    """`HOST:PORT` with a host name, IPv4 address or `[IPv6]`, port 1-65535."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isascii() or not port.isdigit():
        raise ValueError(f"expected HOST:PORT, e.g. 127.0.0.1:8765, not {value[:60]!r}")
    if not 0 < int(port) < 65536:
        raise ValueError(f"port {port} is out of range 1-65535")
    if host.startswith("[") and host.endswith("]"):
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"invalid IPv6 address {host!r}") from None
    elif not re.fullmatch(r"[A-Za-z0-9]([A-Za-z0-9.-]{0,252})", host):
        raise ValueError(f"invalid host {host[:60]!r} (write IPv6 addresses as [::1]:PORT)")
    return value


def check_branch(value: str) -> str:
    """A plausible Git branch name (the main `git check-ref-format` rules)."""
    if (
        not value
        or _REF_FORBIDDEN.search(value)
        or value.startswith(("-", "/", "."))
        or value.endswith(("/", ".", ".lock"))
        or value == "@"
    ):
        raise ValueError(f"invalid branch name {value[:60]!r}")
    return value


def check_repo_path(value: str) -> str:
    """A relative `/`-separated path inside a repository, or `.`."""
    if value == ".":
        return value
    parts = value.split("/")
    if "\\" in value or any(part in {"", ".", ".."} for part in parts):
        raise ValueError("expected a relative path inside the repository, e.g. shares/auth")
    return value


def check_public_key(value: str) -> str:
    """`ed25519:<base64url of exactly 32 bytes, no padding>` in canonical form."""
    form = f"a public key is written {PUBLIC_KEY_PREFIX}<base64url of 32 bytes, no padding>"
    body = value.removeprefix(PUBLIC_KEY_PREFIX)
    if body == value or not re.fullmatch(r"[A-Za-z0-9_-]{43}", body):
        raise ValueError(form)
    raw = base64.urlsafe_b64decode(body + "=")
    if len(raw) != 32 or base64.urlsafe_b64encode(raw).decode().rstrip("=") != body:
        raise ValueError(form)
    return value
