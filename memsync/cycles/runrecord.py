"""What one role executor run did (`RunRecord`), how it failed (`ExecutorFailed`), and the
scrubber that keeps secrets out of both. Shared by the command and the chat executors.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

from memsync.errors import MemsyncError
from memsync.redaction import redact

HIDDEN = "********"
_REAL_KEY = 16  # shorter "keys" are placeholders local servers ignore, not secrets to guard


class FailureKind(StrEnum):
    CANNOT_START = "cannot-start"  # the program is missing or not runnable
    TIMEOUT = "timeout"
    EXIT_STATUS = "exit-status"
    HTTP_STATUS = "http-status"
    CONNECTION = "connection"
    TOO_LARGE = "too-large"
    PROTOCOL = "protocol"  # a 200 that is not a chat completion
    MALFORMED = "malformed"  # the model's answer, twice unusable
    REFUSED = "refused"  # a request memsync will not make (an API key over plain http)
    NO_KEY = "api-key"  # the API key's reference could not be resolved
    ESCAPED = "role-escaped"  # it left a process outside its group, or wrote the root


_TRANSIENT = frozenset({FailureKind.TIMEOUT, FailureKind.CONNECTION})


class ExecutorFailed(MemsyncError):
    """The role could not finish: nothing may land and the cycle keeps its pressure.

    `record` is what ran (when anything did), for the log; `message` never holds a secret.
    """

    def __init__(self, kind: FailureKind, message: str, *, record: RunRecord | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.record = record

    @property
    def transient(self) -> bool:
        """Worth retrying later (a timeout, a lost connection, a 5xx or a 429)."""
        if self.kind is FailureKind.HTTP_STATUS and self.record is not None:
            status = self.record.http_status or 0
            return status == 429 or status >= 500
        return self.kind in _TRANSIENT


@dataclass(frozen=True)
class RunRecord:
    """What one executor run did, for the log and the status. Never holds a secret."""

    role: str
    executor: str  # command | openai
    operation_id: str
    duration_ms: int
    outcome: str  # "ok" or a FailureKind
    exit_status: int | None = None
    http_status: int | None = None
    attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    stdout: str = ""  # command: its output; openai: the last answer's text
    stderr: str = ""
    truncated: bool = False  # some output was cut to the cap
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for the log (no output)."""
        status = (
            f"exit {self.exit_status}"
            if self.exit_status is not None
            else f"HTTP {self.http_status}"
            if self.http_status is not None
            else "-"
        )
        tokens = f", {self.total_tokens} tokens" if self.total_tokens is not None else ""
        return (
            f"role {self.role} ({self.executor}) {self.outcome}: {status}, "
            f"{self.duration_ms} ms, {self.attempts} attempt(s){tokens}"
        )


class Scrub:
    """Hides the given secrets (and URL credentials) in any text that reaches a record."""

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        self.secrets = tuple(s for s in secrets if s)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, HIDDEN)
        return redact(text)

    def found_in(self, texts: Iterable[str]) -> bool:
        """Whether a real key (not a placeholder such as `EMPTY` or `ollama`) is in `texts`."""
        keys = [secret for secret in self.secrets if len(secret) >= _REAL_KEY]
        return any(key in text for key in keys for text in texts)


def tail(data: bytes, cap: int, total: int | None = None) -> tuple[str, bool]:
    """The last `cap` bytes as text (the end of an output says most), and whether any was cut.

    `data` is the end of an output of `total` bytes (all of it when `total` is None); this
    bounds what a record (and a log) holds.
    """
    total = len(data) if total is None else total
    if total <= cap:
        return data.decode("utf-8", "replace"), False
    kept = data[len(data) - cap :].decode("utf-8", "replace")
    return f"[{total - cap} earlier bytes cut]\n{kept}", True


def last_line(text: str, limit: int = 300) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    return last if len(last) <= limit else last[: limit - 1] + "…"


def ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
