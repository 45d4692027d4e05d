"""Pause records: `memsync pause` holds a root or a view until `resume` or a time.

One state file, `<state_dir>/pauses.json` (0600, written atomically), so a pause survives a
daemon restart and a `sync-now` in another process honours it. The running daemon is its
writer while it runs (the CLI goes through the control socket); without a daemon the CLI
writes it. A record past its `until` holds nothing: expiry is checked on every read, and
the daemon also wakes at that time to run the cycle the pause held back.

The file is bounded (`MAX_BYTES`, `MAX_RECORDS`); a record that does not parse is dropped,
a file that does not parse holds nothing (and is replaced by the next pause or resume).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from memsync import timefmt
from memsync.atomicfile import write_bytes
from memsync.names import is_name
from memsync.regularfile import read_regular
from memsync.values import value

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any, Literal

    Kind = Literal["root", "view"]
else:
    Kind = str  # the type checker's literal; a plain name at run time
KINDS: tuple[Kind, ...] = ("root", "view")
FILE_NAME = "pauses.json"
MAX_BYTES = 256 * 1024
MAX_RECORDS = 1024
MAX_DURATION = timedelta(days=3650)


@value
class Pause:
    """One pause: of a root or a view (`kind`, `name`), since when and until when."""

    kind: Kind
    name: str
    since: str  # RFC 3339
    until: str | None  # RFC 3339; None: until `memsync resume`

    def holds(self, now: datetime) -> bool:
        until = timefmt.parse(self.until)
        return until is None or now < until

    def describe(self) -> str:
        """`paused until 2026-12-01T18:00:00Z` / `paused until resumed`, with the way out."""
        when = f"until {self.until}" if self.until else "until resumed"
        return f"paused {when} (memsync resume {self.name})"


def pause_file(state_dir: Path) -> Path:
    return state_dir / FILE_NAME


def parse(raw: bytes) -> dict[tuple[Kind, str], Pause]:
    """The well-formed records of a pause file's bytes (junk holds nothing)."""
    try:
        data: Any = json.loads(raw)
    except ValueError:
        return {}
    records = data.get("pauses") if isinstance(data, dict) and data.get("version") == 1 else None
    if not isinstance(records, list):
        return {}
    found: dict[tuple[Kind, str], Pause] = {}
    for item in records[:MAX_RECORDS]:
        pause = _record(item)
        if pause is not None:
            found[(pause.kind, pause.name)] = pause
    return found


def _record(item: object) -> Pause | None:
    if not isinstance(item, dict):
        return None
    kind, name, since, until = (item.get(k) for k in ("kind", "name", "since", "until"))
    if kind not in KINDS or not isinstance(name, str) or not is_name(name):
        return None
    if not isinstance(since, str) or timefmt.parse(since) is None:
        return None
    if until is not None and (not isinstance(until, str) or timefmt.parse(until) is None):
        return None
    return Pause(kind, name, since, until)


def render(pauses: dict[tuple[Kind, str], Pause]) -> bytes:
    records = [
        {"kind": p.kind, "name": p.name, "since": p.since, "until": p.until}
        for _, p in sorted(pauses.items())
    ]
    return (json.dumps({"version": 1, "pauses": records}, indent=1) + "\n").encode()


def load(state_dir: Path) -> dict[tuple[Kind, str], Pause]:
    """Every record in the file (expired ones too: `holding` decides)."""
    try:
        return parse(read_regular(pause_file(state_dir), MAX_BYTES))
    except OSError:
        return {}


def holding(state_dir: Path, kind: Kind, name: str, now: datetime | None = None) -> Pause | None:
    """The pause that holds this root or view now, if any."""
    pause = load(state_dir).get((kind, name))
    return pause if pause is not None and pause.holds(now or timefmt.now()) else None


def until_after(duration: timedelta | None, now: datetime) -> str | None:
    """The `until` of a pause `--for duration` from `now`, rounded up to a whole second."""
    if duration is None:
        return None
    end = now + duration
    if end.microsecond:
        end = end.replace(microsecond=0) + timedelta(seconds=1)
    return timefmt.rfc3339(end)


def pause(
    state_dir: Path, kind: Kind, name: str, until: str | None, now: datetime | None = None
) -> Pause:
    """Record a pause (replacing any for the same root or view); expired records go."""
    moment = now or timefmt.now()
    records = {k: p for k, p in load(state_dir).items() if p.holds(moment)}
    record = Pause(kind, name, timefmt.rfc3339(moment), until)
    records[(kind, name)] = record
    write_bytes(pause_file(state_dir), render(records))
    return record


def resume(state_dir: Path, kind: Kind, name: str, now: datetime | None = None) -> Pause | None:
    """Drop the pause of this root or view; the one that held it (None when none did)."""
    moment = now or timefmt.now()
    records = load(state_dir)
    held = records.pop((kind, name), None)
    kept = {k: p for k, p in records.items() if p.holds(moment)}
    if held is not None or kept != records:
        write_bytes(pause_file(state_dir), render(kept))
    return held if held is not None and held.holds(moment) else None
