"""Where a token may be sent: the one rule for every URL memsync talks to a hub at.

The HTTP box (`transports/http.py`) applies it before every request and on every redirect,
the event-stream follower and the push notification go through that box, and the
configuration applies it at load so that a URL that could never carry its token is refused
with its location before the daemon starts (the runtime check stays as a defence).

The rule: an http(s) URL with a host and no credentials in it; a token travels only over
https, or over plain http to a loopback host; plain http to any other host carries no token
and is allowed only when the configuration says so (`allow_http`); a redirect never goes
from https to http. (Redirects never carry the token to another origin: that is the box's,
which alone follows them.) Pure: nothing here resolves a name or opens a connection.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

__all__ = ["is_loopback", "url_problem"]


def is_loopback(host: str) -> bool:
    """`localhost` or a loopback address (127.0.0.0/8, ::1); never a name that resolves to
    one, which a resolver could answer differently tomorrow."""
    host = host.strip("[]").lower()
    if host in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_problem(
    url: str, *, token: bool, allow_http: bool = False, previous: str | None = None
) -> str | None:
    """Why `url` must not be requested (with a token when `token`); None when it may be.

    `previous` is the URL that redirected here, if any. The reason never quotes the URL.
    """
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        _ = parts.port
    except ValueError:
        return "not a valid URL"
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not host:
        return "not an http(s) URL"
    if parts.username is not None or parts.password is not None:
        return "credentials in a URL are refused"
    if previous is not None and urlsplit(previous).scheme.lower() == "https" and scheme == "http":
        return "redirect from https to http refused"
    if scheme == "http" and not is_loopback(host):
        if token:
            return "a token goes only over https (or plain http to a loopback host)"
        if not allow_http:
            return "plain http to a non-loopback host refused"
    return None
