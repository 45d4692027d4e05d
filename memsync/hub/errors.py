"""The hub's one error: an answer other than success, raised by handlers and readers and
rendered as JSON by the application's middleware (`app.py`)."""

from __future__ import annotations

from collections.abc import Sequence

from memsync.validators.problems import Problem


class ApiError(Exception):
    """An answer other than success, rendered as `{"error": {"code", "message"}}`."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        problems: Sequence[Problem] = (),
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.problems = tuple(problems)
        self.headers = headers or {}
