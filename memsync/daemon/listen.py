"""Why a listener of the daemon could not start, worded as the configuration error it is.

A port another process holds (`http.listen`), an address this host does not have, a
socket path too long for `AF_UNIX` (`control.socket`): each is something the operator fixes
in the configuration or on the host, so it is exit 2 with the setting and the address
named, not an internal error (systemd would restart a daemon that can never start).
"""

from __future__ import annotations

import errno
import socket

from memsync.errors import ConfigError

_WHY = {
    errno.EADDRINUSE: "the address is already in use (another process listens there)",
    errno.EADDRNOTAVAIL: "this host has no such address",
    errno.EACCES: "permission denied (ports below 1024 need privileges)",
    errno.EPERM: "permission denied",
}
_WHAT_TO_DO = {
    "http.listen": "stop the process that holds it (`ss -ltnp` names it), or set http.listen "
    "to a free HOST:PORT",
    "control.socket": "stop the process that holds it, or set control.socket to another path "
    "(a short one in a directory only you can write)",
}


class ListenError(ConfigError):
    """A listener's address is taken, foreign or unusable."""


def listen_error(setting: str, address: str, exc: OSError) -> ListenError:
    """The error for `setting` (`http.listen`, `control.socket`) failing to bind `address`."""
    if isinstance(exc, socket.gaierror):  # getaddrinfo: a host name that does not resolve
        why = f"the host name does not resolve ({exc.strerror or exc})"
    else:
        why = _WHY.get(exc.errno or 0) or exc.strerror or str(exc) or type(exc).__name__
    return ListenError(f"{setting} {address}: cannot listen: {why}", hint=_WHAT_TO_DO[setting])
