"""Per-root state (`state.json`): the last result, success and failure times, trusted upstream.

A corrupt or missing file reads as an empty state: it never breaks a sync. The trusted
upstream is the newest upstream commit this root accepted (published, pushed or already
contained); the planner refuses any upstream that is not its descendant. It alone guards
safety, so it is also kept in `trusted.json` beside it, written (and fsynced) only when it
changes: `state.json` is rewritten every cycle without fsync, and a power cut could leave
it empty on some file systems, but never the trusted upstream with it.
"""

from __future__ import annotations

from pathlib import Path

from memsync import timefmt
from memsync.atomicfile import read_json, write_json
from memsync.redaction import redact
from memsync.values import as_dict, names, replace, value

OK_STATUSES = frozenset({"current", "synced", "pushed"})


@value
class RootState:
    """What a root remembers between cycles (its state file)."""

    trusted_upstream: str | None = None
    last_status: str | None = None
    last_message: str | None = None
    last_files: tuple[str, ...] = ()
    last_run_at: str | None = None
    last_success_at: str | None = None
    last_failure_at: str | None = None
    last_head: str | None = None
    last_upstream: str | None = None
    fetch_branch: str | None = None  # the upstream branch fetched last: the next prefetch's

    @classmethod
    def load(cls, path: Path) -> RootState:
        state = cls._read(path)
        kept = read_json(_trusted_file(path))
        trusted = kept.get("trusted_upstream") if isinstance(kept, dict) else None
        return replace(state, trusted_upstream=trusted) if isinstance(trusted, str) else state

    @classmethod
    def _read(cls, path: Path) -> RootState:
        raw = read_json(path)
        if not isinstance(raw, dict):
            return cls()
        known = {k: v for k, v in raw.items() if k in names(cls)}
        files = known.pop("last_files", ())
        try:
            return cls(**known, last_files=tuple(str(f) for f in files or ()))
        except TypeError:
            return cls()

    def save(self, path: Path, *, durable: bool = True) -> None:
        """Write the state; `durable` when the trusted upstream changed: it then goes to
        `trusted.json` first, fsynced, and `state.json` (reporting) needs no fsync."""
        if durable and self.trusted_upstream is not None:
            write_json(_trusted_file(path), {"trusted_upstream": self.trusted_upstream})
        data = as_dict(self)
        data["last_files"] = list(self.last_files)
        write_json(path, data, durable=durable and self.trusted_upstream is None)

    def recorded(
        self,
        status: str,
        message: str,
        files: tuple[str, ...],
        head: str | None,
        upstream: str | None,
        trusted: str | None,
    ) -> RootState:
        stamp = timefmt.rfc3339(timefmt.now())
        ok = status in OK_STATUSES
        return replace(
            self,
            trusted_upstream=trusted or self.trusted_upstream,
            last_status=status,
            last_message=redact(message),
            last_files=files,
            last_run_at=stamp,
            last_success_at=stamp if ok else self.last_success_at,
            last_failure_at=self.last_failure_at if ok else stamp,
            last_head=head or self.last_head,
            last_upstream=upstream or self.last_upstream,
        )


def _trusted_file(state_file: Path) -> Path:
    return state_file.with_name("trusted.json")
