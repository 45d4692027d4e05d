"""Who may be at the other end of the control socket, and where that socket may live.

Standard library only (the CLI's client imports it). Two rules, each a pure decision over
plain facts with a thin reader of the facts beside it:

- The peer (SO_PEERCRED, read on a connected unix socket): the client talks only to a
  server running as its own uid, so a socket another user bound first can never hand it a
  verdict; the daemon answers only clients of its own uid, or root (who can read its state
  files anyway; the 0600 socket already lets root in).
- The directory: the socket's directory must belong to this uid and be writable by no one
  else, sticky or not (in a sticky `/tmp` another user can still bind the name first), and
  every directory above it must belong to root or this uid and be writable by others only
  when sticky (or the way to the socket's directory could be swapped). Symbolic links are
  followed before the chain is checked: the rule is about where the socket really is.
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a connected socket is the caller's: socket loads with it
    import socket

_UCRED = struct.Struct("3i")  # pid, uid, gid (struct ucred)


@dataclass(frozen=True)
class DirFacts:
    """One directory on the way to the socket: its path, owner and mode (`st_mode`)."""

    path: str
    uid: int
    mode: int


def peer_refusal(peer_uid: int, own_uid: int, *, serving: bool) -> str | None:
    """Why a peer of `peer_uid` may not be talked to, or None when it may.

    `serving`: the daemon judging a client (its own uid or root); otherwise a client
    judging the server (its own uid only: root's answer is not this user's daemon's).
    """
    if peer_uid == own_uid or (serving and peer_uid == 0):
        return None
    return f"it runs as uid {peer_uid}, not as this user (uid {own_uid})"


def directory_refusal(chain: list[DirFacts], own_uid: int) -> str | None:
    """Why the socket may not live in `chain[0]` (its directory, then each parent up to
    `/`), or None when only this uid (and root) can change what is there."""
    if not chain:
        return "its directory cannot be examined"
    first, *above = chain
    if not stat.S_ISDIR(first.mode):
        return f"{first.path} is not a directory"
    if first.uid != own_uid:
        return f"its directory {first.path} belongs to uid {first.uid}, not to this user"
    if first.mode & (stat.S_IWGRP | stat.S_IWOTH):
        return (
            f"its directory {first.path} is writable by other users "
            f"(mode {stat.S_IMODE(first.mode):04o}): another user could bind the socket first"
        )
    for parent in above:
        if parent.uid not in (0, own_uid):
            return f"{parent.path} above it belongs to uid {parent.uid}"
        if parent.mode & (stat.S_IWGRP | stat.S_IWOTH) and not parent.mode & stat.S_ISVTX:
            return (
                f"{parent.path} above it is writable by other users without the sticky bit "
                f"(mode {stat.S_IMODE(parent.mode):04o})"
            )
    return None


def directory_chain(directory: Path) -> list[DirFacts]:
    """The facts `directory_refusal` judges, for the real path of `directory` (OSError
    when a part of it cannot be examined)."""
    real = Path(os.path.realpath(directory))
    chain: list[DirFacts] = []
    for path in (real, *real.parents):
        info = path.stat()
        chain.append(DirFacts(str(path), info.st_uid, info.st_mode))
    return chain


def socket_directory_refusal(socket_path: Path) -> str | None:
    """Why `socket_path`'s directory is no place for a control socket, or None."""
    try:
        chain = directory_chain(socket_path.parent)
    except OSError as exc:
        return f"its directory {socket_path.parent} cannot be examined ({exc.strerror})"
    return directory_refusal(chain, os.geteuid())


def peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected unix socket."""
    import socket  # noqa: PLC0415 - loaded by whoever connected `sock`

    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    return int(_UCRED.unpack(raw)[1])
