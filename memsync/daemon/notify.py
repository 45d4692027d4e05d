"""sd_notify: tell the service manager how the daemon is doing, without a systemd library.

The protocol is one datagram of `KEY=value` lines sent to the AF_UNIX socket named by
`$NOTIFY_SOCKET` (a path, or `@name` for the abstract namespace). Nothing here may hurt the
daemon: with no `$NOTIFY_SOCKET` every call is a no-op, and a message that cannot be handed
over at once (the manager is gone, its queue is full) is dropped and logged at debug level,
so the event loop never waits on it.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Mapping

log = logging.getLogger(__name__)

STATUS_MAX = 200  # characters: `systemctl status` shows one short line


def _address(raw: str | None) -> str | bytes | None:
    """`$NOTIFY_SOCKET` as a `sendto` address; None when unset or of a kind we do not speak."""
    if not raw:
        return None
    if raw.startswith("@"):
        return b"\0" + os.fsencode(raw[1:])
    if raw.startswith("/"):
        return raw
    log.debug("NOTIFY_SOCKET %r is neither a path nor an abstract name; not notifying", raw)
    return None


def _watchdog_interval(env: Mapping[str, str], pid: int) -> float | None:
    """Half of `$WATCHDOG_USEC`, in seconds, when the watchdog is meant for process `pid`."""
    try:
        usec = int(env.get("WATCHDOG_USEC", ""))
    except ValueError:
        return None
    if usec <= 0:
        return None
    if "WATCHDOG_PID" in env:
        try:
            if int(env["WATCHDOG_PID"]) != pid:
                return None  # the watchdog belongs to another process (our parent, say)
        except ValueError:
            return None
    return usec / 2_000_000


def one_line(text: str, limit: int = STATUS_MAX) -> str:
    """`text` as one line of at most `limit` characters (whitespace runs become one space)."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "…"


class Notifier:
    """Sends `READY=1`, `RELOADING=1`, `STOPPING=1`, `STATUS=` and `WATCHDOG=1`."""

    def __init__(self, address: str | None, watchdog_interval: float | None = None) -> None:
        self.address = address
        self._target = _address(address)
        self._watchdog_interval = watchdog_interval

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Notifier:
        """The notifier systemd asked for (`$NOTIFY_SOCKET`, `$WATCHDOG_USEC`/`_PID`)."""
        env = os.environ if env is None else env
        return cls(env.get("NOTIFY_SOCKET"), _watchdog_interval(env, os.getpid()))

    @property
    def enabled(self) -> bool:
        return self._target is not None

    def ready(self, status: str = "") -> None:
        """Start-up (or a reload) is complete."""
        self._send("READY=1", *self._status_line(status))

    def reloading(self, status: str = "reloading the configuration") -> None:
        """A reload begins; `ready()` ends it. `MONOTONIC_USEC` is what systemd >= 253 wants
        with `Type=notify-reload` to match the message to the reload; older ones ignore it."""
        now = time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        self._send("RELOADING=1", f"MONOTONIC_USEC={now}", *self._status_line(status))

    def stopping(self, status: str = "stopping: letting running cycles finish") -> None:
        self._send("STOPPING=1", *self._status_line(status))

    def status(self, text: str) -> None:
        """A one-line summary for `systemctl status` (newlines folded, long text cut)."""
        self._send(*self._status_line(text))

    def watchdog(self) -> None:
        """Keep-alive: send it every `watchdog_interval()` seconds while the loop runs."""
        self._send("WATCHDOG=1")

    def watchdog_interval(self) -> float | None:
        """Seconds between `watchdog()` calls (half of `WatchdogSec=`), or None if unwatched."""
        return self._watchdog_interval

    @staticmethod
    def _status_line(text: str) -> tuple[str, ...]:
        line = one_line(text)
        return (f"STATUS={line}",) if line else ()

    def _send(self, *lines: str) -> None:
        if self._target is None or not lines:
            return
        message = "\n".join(lines).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.sendto(message, socket.MSG_DONTWAIT, self._target)
        except OSError as exc:
            log.debug("sd_notify to %s failed: %s", self.address, exc)
