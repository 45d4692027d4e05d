"""The run log: one JSON line per role executor call, in `<state>/roots/<root>/cycles.log`.

Each line says when, for which root and cycle, which operation, which role on which
executor, how long it took, how it ended (exit status, HTTP status, outcome), the token
counts the API reported in `usage`, and how much output there was; never the output
itself, never a secret (messages were scrubbed of the API key by the executor and lose
URL credentials here too). The file is bounded: past `MAX_BYTES` it is rotated to
`cycles.log.1` (one old generation kept), so a root's log never exceeds twice that.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsync import timefmt
from memsync.atomicfile import private_dir
from memsync.cycles.runrecord import RunRecord
from memsync.redaction import redact
from memsync.roots.layout import RootLayout

log = logging.getLogger(__name__)

MAX_BYTES = 1 << 20
MESSAGE_MAX = 500
NAME = "cycles.log"


@dataclass(frozen=True)
class RunLog:
    path: Path
    root: str
    cycle: str  # insight | prune
    max_bytes: int = MAX_BYTES

    @classmethod
    def for_root(cls, state_dir: Path, root: str, cycle: str) -> RunLog:
        return cls(RootLayout.for_root(state_dir, root).base / NAME, root, cycle)

    def line(self, record: RunRecord) -> dict[str, Any]:
        message = redact(record.message)
        if len(message) > MESSAGE_MAX:
            message = message[: MESSAGE_MAX - 1] + "…"
        return {
            "time": timefmt.rfc3339(timefmt.now()),
            "root": self.root,
            "cycle": self.cycle,
            "operation_id": record.operation_id,
            "executor": record.executor,
            "role": record.role,
            "duration_ms": record.duration_ms,
            "outcome": record.outcome,
            "exit_status": record.exit_status,
            "http_status": record.http_status,
            "attempts": record.attempts,
            "prompt_tokens": record.prompt_tokens,
            "completion_tokens": record.completion_tokens,
            "total_tokens": record.total_tokens,
            "output_bytes": len(record.stdout.encode("utf-8", "replace"))
            + len(record.stderr.encode("utf-8", "replace")),
            "truncated": record.truncated,
            "message": message,
        }

    def write(self, record: RunRecord | None) -> None:
        """Append the record's line; a log that cannot be written never fails the turn."""
        if record is None:
            return
        data = (json.dumps(self.line(record), ensure_ascii=False) + "\n").encode("utf-8")
        try:
            private_dir(self.path.parent)
            self._rotate(len(data))
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            try:
                os.write(fd, data)
            finally:
                os.close(fd)
        except OSError as exc:
            log.warning("the cycle run log %s could not be written: %s", self.path, exc.strerror)

    def _rotate(self, adding: int) -> None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size + adding > self.max_bytes:
            self.path.replace(self.path.with_name(self.path.name + ".1"))

    def read(self) -> list[dict[str, Any]]:
        """The current file's lines, oldest first (unreadable lines skipped)."""
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return []
        found: list[dict[str, Any]] = []
        for raw in text.splitlines():
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
        return found
