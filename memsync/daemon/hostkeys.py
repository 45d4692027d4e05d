"""The known_hosts files a root's ssh reads, and a stamp that changes when any of them does.

A root whose upstream offered a changed SSH host key (`host-key-changed`) is not synced
again automatically until its configuration or one of these files changes: retrying
cannot help, and each try hands the suspect host another connection. The files are
stat'ed (never read): a stamp is cheap enough to take at every timer tick.
"""

from __future__ import annotations

from pathlib import Path

from memsync.config.model import RootSettings

# OpenSSH's defaults when `UserKnownHostsFile` and `GlobalKnownHostsFile` are not given.
_USER_DEFAULTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
_GLOBAL_DEFAULTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")

Stamp = tuple[tuple[str, tuple[int, int, int, int] | None], ...]


def known_hosts_files(settings: RootSettings) -> list[Path]:
    """The files ssh checks the root's upstream's host key against."""
    creds = settings.git_credentials
    if creds is not None and creds.known_hosts is not None:
        users = [creds.known_hosts]
    else:
        users = [Path(p).expanduser() for p in _USER_DEFAULTS]
    return [*users, *(Path(p) for p in _GLOBAL_DEFAULTS)]


def stamp(settings: RootSettings) -> Stamp:
    """Identity, size and times of each known_hosts file (None for a missing one)."""
    out: list[tuple[str, tuple[int, int, int, int] | None]] = []
    for path in known_hosts_files(settings):
        try:
            st = path.stat()
        except OSError:
            out.append((str(path), None))
            continue
        out.append((str(path), (st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)))
    return tuple(out)
