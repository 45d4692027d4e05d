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
    at the first one); `close` ends it (between transactions: it holds no lock). A
    transaction may be sent ahead (`send`) and its answer read later (`answered`), so
    that the caller works while git starts and commits it."""

    def __init__(self, box: GitCore, reason: str) -> None:
        self.box = box
        self.reason = reason
        self._session: Session | None = None
        self._broken = False
        self._sent = False  # a transaction is sent and its answers not read yet

    def commit(self, lines: Sequence[str]) -> bool:
        """Run one transaction of `update`/`delete` lines; True once git said `commit: ok`,
        False when the session could not (the caller runs it by a process of its own)."""
        return self.send(lines) and self.answered()

    def send(self, lines: Sequence[str]) -> bool:
        """Hand git one transaction of `update`/`delete` lines and return at once (git
        starts, reads and commits it meanwhile); `answered` then says whether it committed.
        False when the session cannot take it (broken, or an answer still unread): nothing
        was sent, and the caller runs it by a process of its own."""
        if self._broken or self._sent or any("\n" in line for line in lines):
            return False
        try:
            if self._session is None:
                self._session = self.box.session("update-ref", "-m", self.reason, "--stdin")
            body = "".join(f"{line}\n" for line in lines)
            self._session.ask(f"start\n{body}prepare\ncommit\n".encode())
        except (EOFError, OSError):
            self._broken = True
            self.close()
            return False
        self._sent = True
        return True

    def answered(self) -> bool:
        """Whether git said `commit: ok` to the transaction `send` handed it (waited for);
        False when it did not or could not say so (the session is then ended, between
        transactions or with git gone: the caller runs the transaction again by a process
        of its own, which commits it or fails with git's own words)."""
        sent, self._sent = self._sent, False
        if not sent or self._session is None:
            return False
        try:
            for answer in _ANSWERS:
                if self._session.read_line(len(answer)) != answer:
                    raise EOFError("not git's ok")
        except (EOFError, OSError):
            self._broken = True
            self.close()
            return False
        return True

    def close(self) -> None:
        """End the session (its git killed and reaped) between transactions, where it
        holds no lock: a transaction sent and not answered yet is waited for first."""
        if self._sent:
            self.answered()  # (ends the session itself when git said no)
        session, self._session = self._session, None
        if session is not None:
            session.close()
