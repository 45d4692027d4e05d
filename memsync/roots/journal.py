"""The operation journal: every move of a root is recorded before it touches the root.

A record goes `running` -> `prepared` -> `committed` | `no_change` | `failed`. `running`
means a candidate may exist but the active root is untouched; `prepared` means the
candidate is validated and publication may have started, so recovery must finish or
undo it. Records are small JSON files, written atomically; settled ones are kept (newest
first, bounded) so every move can be explained afterwards.

Every record carries an operation key its caller derives from what the operation is
(`operation_key`: kind, start commit, upstream commit, inputs). When a record with a key
settles `committed` or `no_change`, the key is remembered (`keys/<key>`), so a caller can
ask `done(key)` before running an expensive step again (a role model's turn) after a crash.
The journal knows no operation kind in particular: `push` is the only kind that publishes
nothing, and recovery treats every other kind as a publication.
"""

from __future__ import annotations

import os
from pathlib import Path

from memsync import timefmt
from memsync.atomicfile import private_dir, read_json, write_json
from memsync.memodigest import sha256
from memsync.values import as_dict, field, names, replace, value

RUNNING = "running"
PREPARED = "prepared"
COMMITTED = "committed"
NO_CHANGE = "no_change"
FAILED = "failed"
UNSETTLED = frozenset({RUNNING, PREPARED})
DONE = frozenset({COMMITTED, NO_CHANGE})
KEEP_SETTLED = 200
KEEP_KEYS = 2000


@value
class Operation:
    """One journal record: an operation's kind, phase, commits and outcome."""

    id: str
    kind: str
    phase: str
    branch: str
    start: str
    upstream: str | None = None
    key: str = ""
    candidate: str | None = None
    message: str = ""
    files: tuple[str, ...] = ()
    pid: int = field(default_factory=os.getpid)
    created_at: str = field(default_factory=lambda: timefmt.rfc3339(timefmt.now()))
    updated_at: str = field(default_factory=lambda: timefmt.rfc3339(timefmt.now()))

    def to_json(self) -> dict[str, object]:
        data = as_dict(self)
        data["files"] = list(self.files)
        return data


def operation_key(kind: str, start: str, upstream: str | None, *inputs: str) -> str:
    """A deterministic key: the same operation on the same commits and inputs, the same key."""
    digest = sha256()  # CPython's own: a clean cycle loads no OpenSSL (`memodigest`)
    for part in (kind, start, upstream or "", *inputs):
        digest.update(part.encode("utf-8", "surrogateescape") + b"\0")
    return digest.hexdigest()[:32]


def new_operation_id(kind: str) -> str:
    stamp = timefmt.now().strftime("%Y%m%dT%H%M%S")
    # uuid4's first six bytes, without importing uuid (which imports platform)
    return f"{stamp}-{kind}-{os.urandom(6).hex()}"


class Journal:
    """Records live in `open/` while unsettled and move to the journal directory when settled.

    Settling writes the final record first and removes the open one second, so a crash in
    between leaves both and `unsettled` knows the operation is done. Finding the unsettled
    work at the start of every cycle is one small directory listing.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.open_dir = directory / "open"

    def _settled_path(self, operation_id: str) -> Path:
        return self.directory / f"{operation_id}.json"

    def _open_path(self, operation_id: str) -> Path:
        return self.open_dir / f"{operation_id}.json"

    def _key_path(self, key: str) -> Path:
        return self.directory / "keys" / key

    def begin(
        self, kind: str, branch: str, start: str, upstream: str | None, key: str | None = None
    ) -> Operation:
        op = Operation(
            id=new_operation_id(kind),
            kind=kind,
            phase=RUNNING,
            branch=branch,
            start=start,
            upstream=upstream,
            key=key or operation_key(kind, start, upstream),
        )
        private_dir(self.open_dir)
        # Not fsynced: a `running` record says only that the root is untouched. The
        # `prepared` record that replaces it is made durable (file and directory) before
        # publication starts; a power cut that loses a running record loses nothing else
        # (its candidate ref or worktree is swept by the next recovery).
        write_json(self._open_path(op.id), op.to_json(), durable=False)
        return op

    def advance(
        self,
        op: Operation,
        phase: str,
        *,
        message: str | None = None,
        candidate: str | None = None,
        files: tuple[str, ...] | None = None,
        durable_key: bool = True,
    ) -> Operation:
        """Record `phase`. `durable_key=False` when nobody asks `done` for this key (an
        admission that is not `once`): the key file is then written without fsync, since its
        loss after a power cut changes no decision. The records themselves always are."""
        updated = replace(
            op,
            phase=phase,
            updated_at=timefmt.rfc3339(timefmt.now()),
            pid=os.getpid(),
            message=op.message if message is None else message,
            candidate=op.candidate if candidate is None else candidate,
            files=op.files if files is None else files,
        )
        if phase in UNSETTLED:
            write_json(self._open_path(op.id), updated.to_json())
        else:
            write_json(self._settled_path(op.id), updated.to_json())
            if phase in DONE and op.key:
                private_dir(self._key_path(op.key).parent)
                write_json(
                    self._key_path(op.key),
                    {"operation_id": op.id, "phase": phase},
                    durable=durable_key,
                )
            self._open_path(op.id).unlink(missing_ok=True)
            self._trim()
        return updated

    def done(self, key: str) -> str | None:
        """The id of the operation that settled this key as committed or no_change, if any."""
        raw = read_json(self._key_path(key))
        if isinstance(raw, dict) and raw.get("phase") in DONE:
            return str(raw.get("operation_id") or "") or None
        return None

    def load(self, operation_id: str) -> Operation | None:
        return _parse(read_json(self._open_path(operation_id))) or _parse(
            read_json(self._settled_path(operation_id))
        )

    def unsettled(self) -> list[Operation]:
        try:  # what `glob("*.json")` lists, without compiling its pattern (every cycle)
            listed = list(self.open_dir.iterdir())
        except OSError:
            return []
        paths = sorted(path for path in listed if path.name.endswith(".json"))
        found: list[Operation] = []
        for path in paths:
            op = _parse(read_json(path))
            if op is None:
                continue
            if self._settled_path(op.id).exists():
                path.unlink(missing_ok=True)  # settled just before a crash
                continue
            found.append(op)
        return found

    def _trim(self) -> None:
        # Every settled operation lists the records and counts the keys (up to 200 and
        # 2,000 names): by name (`scandir`), not a `Path` each, on a cold sync's last steps.
        try:  # `glob("*.json")`, as in `unsettled`
            with os.scandir(self.directory) as listed:
                names = sorted(entry.name for entry in listed if entry.name.endswith(".json"))
        except OSError:
            return
        for name in names[:-KEEP_SETTLED] if len(names) > KEEP_SETTLED else []:
            (self.directory / name).unlink(missing_ok=True)
        keys = self.directory / "keys"
        try:
            with os.scandir(keys) as listed:
                count = sum(1 for _ in listed)
        except OSError:
            return
        if count > KEEP_KEYS:  # oldest first; rare, so the sort is affordable
            for path in sorted(keys.iterdir(), key=lambda p: p.stat().st_mtime)[
                : count - KEEP_KEYS
            ]:
                path.unlink(missing_ok=True)


def _parse(raw: object) -> Operation | None:
    if not isinstance(raw, dict):
        return None
    try:
        files = tuple(str(f) for f in raw.get("files") or ())
        fields = {k: v for k, v in raw.items() if k in names(Operation)}
        fields["files"] = files
        return Operation(**fields)
    except TypeError:
        return None
