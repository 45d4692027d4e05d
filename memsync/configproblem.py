"""One configuration problem (`ConfigError.problems`): a dotted location, what is wrong
there, and the line. Made only where a configuration is judged (`config.load`, the
daemon's `configcheck`), so a cold `status` or `sync-now` of a configuration that loaded
before never creates the class (issue 18)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Located:
    """One configuration problem: a dotted location and what is wrong there."""

    location: str
    message: str
    line: int | None = None
