"""One `git update-ref --stdin` for the ref transactions of one admission.

An admission moves refs twice: it pins the candidate under its candidate ref, and at the
end it moves the branch (compare-and-swap on the start) and drops the candidate ref in one
transaction. Both are git's own `start`/`prepare`/`commit` transactions, and git runs any
number of them, one after the other, in one `update-ref --stdin` (each atomic, each
committed when git answers `commit: ok`; nothing is locked between them). So the second
costs no process of its own. The reflog message is the process's (`-m`): both carry the
publication's (the candidate ref's own reflog, kept only with `logAllRefUpdates=always`,
goes with the ref).

Whatever goes wrong with the session (git gone, an answer that is not `ok`, the deadline),
the transaction is run again the usual way, by a process of its own, which commits it or
fails with git's own words exactly as before; a compare-and-swap makes a second attempt of
one that did commit fail, never apply twice.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memsync.transports.gitcore import GitCore
    from memsync.transports.process import Session

_ANSWERS = (b"start: ok\n", b"prepare: ok\n", b"commit: ok\n")


class RefSession:
    """The ref transactions of one box with one reflog message, in one git process (started
    at the first one); `close` ends it (between transactions: it holds no lock)."""

    def __init__(self, box: GitCore, reason: str) -> None:
        self.box = box
        self.reason = reason
        self._session: Session | None = None
        self._broken = False

    def commit(self, lines: Sequence[str]) -> bool:
        """Run one transaction of `update`/`delete` lines; True once git said `commit: ok`,
        False when the session could not (the caller runs it by a process of its own)."""
        if self._broken or any("\n" in line for line in lines):
            return False
        try:
            if self._session is None:
                self._session = self.box.session("update-ref", "-m", self.reason, "--stdin")
            body = "".join(f"{line}\n" for line in lines)
            self._session.ask(f"start\n{body}prepare\ncommit\n".encode())
            for answer in _ANSWERS:
                if self._session.read_line(len(answer)) != answer:
                    raise EOFError("not git's ok")
        except (EOFError, OSError):
            self._broken = True
            self.close()
            return False
        return True

    def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            session.close()
