"""Per-view trust state (`<state_dir>/views/<view>/trust.json`) and the reported view status.

The trust state is what a consumer remembers between pulls: the accepted revision and
package hash (rollback and equivocation checks), the manifest expiry (freeze check), the
keys that signed it, when it was fetched and last checked (a `304` counts as a check), the
ETags for conditional requests, and the last outcome. A missing or corrupt file reads as
an empty state and never raises: the next pull simply starts from nothing known.

`status()` turns the state into the words of CONTRACT.md §2: `unavailable` without a valid
import, `stale` when the manifest expired, the last refresh failed, or the last successful
check is older than `max_stale`; otherwise `pulled` (this refresh installed a revision) or
`current`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from memsync import timefmt
from memsync.atomicfile import read_json, write_json
from memsync.errors import MemsyncError
from memsync.names import NAME_MAX, is_name
from memsync.views.layout import view_state_dir

PULLED = "pulled"
CURRENT = "current"
STALE = "stale"
UNAVAILABLE = "unavailable"


class ViewStateError(MemsyncError):
    """A view's name or on-disk state cannot be used as asked."""


def check_name(kind: str, name: str) -> str:
    """`name` if it is safe as one path component, else ViewStateError (`kind` names it)."""
    if not is_name(name):
        raise ViewStateError(
            f"invalid {kind} {name[:70]!r}: use letters, digits, '.', '_' or '-', "
            f"starting with a letter or digit (at most {NAME_MAX} characters)"
        )
    return name


def trust_path(state_dir: Path, view: str) -> Path:
    return view_state_dir(state_dir, check_name("view name", view)) / "trust.json"


def _stamp(moment: datetime) -> str:
    return timefmt.rfc3339(moment)


@dataclass(frozen=True)
class TrustState:
    revision: int | None = None
    sha256: str | None = None
    expires_at: str | None = None
    key_ids: tuple[str, ...] = ()
    fetched_at: str | None = None
    checked_at: str | None = None
    manifest_etag: str | None = None
    package_etag: str | None = None
    last_status: str | None = None
    last_message: str | None = None
    last_error_at: str | None = None

    # -- disk -------------------------------------------------------------------------

    @classmethod
    def load(cls, path: Path) -> TrustState:
        """The state in `path`; an empty state when it is missing or corrupt (never raises)."""
        return cls.from_json(read_json(path))

    @classmethod
    def from_json(cls, raw: object) -> TrustState:
        """Tolerant parse: wrong types drop to the field's default, unknown keys are ignored."""
        if not isinstance(raw, dict):
            return cls()
        values: dict[str, Any] = {}
        for spec in fields(cls):
            value = raw.get(spec.name)
            if spec.name == "revision":
                ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
                values[spec.name] = value if ok else None
            elif spec.name == "key_ids":
                items = value if isinstance(value, list) else []
                values[spec.name] = tuple(k for k in items if isinstance(k, str))
            else:
                values[spec.name] = value if isinstance(value, str) else None
        return cls(**values)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["key_ids"] = list(self.key_ids)
        return data

    def save(self, path: Path) -> None:
        """Write atomically (0600 file in 0700 directories)."""
        write_json(path, self.to_json())

    # -- transitions (pure) -----------------------------------------------------------

    def accepted(
        self,
        *,
        revision: int,
        sha256: str,
        expires_at: str | None,
        key_ids: tuple[str, ...],
        now: datetime,
        manifest_etag: str | None = None,
        package_etag: str | None = None,
    ) -> TrustState:
        """The state after a new revision was verified and installed at `now`."""
        stamp = _stamp(now)
        return replace(
            self,
            revision=revision,
            sha256=sha256,
            expires_at=expires_at,
            key_ids=key_ids,
            fetched_at=stamp,
            checked_at=stamp,
            manifest_etag=manifest_etag,
            package_etag=package_etag,
        )

    def checked(
        self, now: datetime, *, manifest_etag: str | None = None, expires_at: str | None = None
    ) -> TrustState:
        """The state after a successful check that changed nothing (a `304`, same revision)."""
        return replace(
            self,
            checked_at=_stamp(now),
            manifest_etag=manifest_etag or self.manifest_etag,
            expires_at=expires_at or self.expires_at,
        )

    def failed(self, now: datetime, message: str) -> TrustState:
        """The state after a failed refresh (the import and its trust fields stay)."""
        return replace(self, last_error_at=_stamp(now), last_message=message)

    def reported(self, status: str, message: str) -> TrustState:
        return replace(self, last_status=status, last_message=message)

    # -- derived facts ----------------------------------------------------------------

    def is_expired(self, now: datetime) -> bool:
        """True when `expires_at` is at or before `now`, or unreadable; no expiry is never."""
        if self.expires_at is None:
            return False
        expires = timefmt.parse(self.expires_at)
        return expires is None or expires <= now

    def age(self, now: datetime) -> timedelta | None:
        """Time since the last successful check, or None when there never was a readable one."""
        checked = timefmt.parse(self.checked_at)
        return None if checked is None else now - checked

    def last_refresh_failed(self) -> bool:
        """True when the last refresh failed.

        The refresh's own recorded verdict decides when there is one: times have one-second
        resolution, so a failure in the same second as the check before it cannot be told
        apart by time. Older states without a verdict fall back to comparing the times.
        """
        if self.last_status is not None:
            return self.last_status in (STALE, UNAVAILABLE)
        error = timefmt.parse(self.last_error_at)
        if error is None:
            return False
        checked = timefmt.parse(self.checked_at)
        return checked is None or error > checked

    def is_past_max_stale(self, now: datetime, max_stale: timedelta) -> bool:
        age = self.age(now)
        return age is None or age > max_stale

    def status(
        self,
        *,
        now: datetime,
        max_stale: timedelta,
        has_import: bool,
        refresh_failed: bool | None = None,
        promoted: bool = False,
    ) -> str:
        """The reported status (CONTRACT.md §2).

        `has_import`: the active import directory exists (and, where the caller checked it,
        validates); an import with no trusted revision on record is not a valid import.
        `refresh_failed`: None derives it from the recorded times. `promoted`: this refresh
        installed a new revision, so a fresh healthy state reads `pulled`, not `current`.
        """
        if not has_import or self.revision is None:
            return UNAVAILABLE
        failed = self.last_refresh_failed() if refresh_failed is None else refresh_failed
        if failed or self.is_expired(now) or self.is_past_max_stale(now, max_stale):
            return STALE
        return PULLED if promoted else CURRENT
