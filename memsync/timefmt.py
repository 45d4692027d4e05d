"""RFC 3339 UTC timestamps, the one time format in state files and JSON output."""

from __future__ import annotations

from datetime import UTC, datetime


def now() -> datetime:
    return datetime.now(UTC)


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return None


def from_timestamp(seconds: float) -> datetime:
    """A POSIX timestamp as an aware UTC datetime."""
    return datetime.fromtimestamp(seconds, UTC)
