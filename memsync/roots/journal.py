"""The operation journal: every move of a root is recorded before it touches the root.

A record goes `running` -> `prepared` -> `committed` | `no_change` | `failed`. `running`
means a candidate may exist but the active root is untouched; `prepared` means the
candidate is validated and publication may have started, so recovery must finish or
undo it. Records are small JSON files, written atomically; settled ones are kept (newest
first, bounded) so every move can be explained afterwards.
"""

from __future__ import annotations

import os
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from memsync import timefmt
from memsync.atomicfile import private_dir, read_json, write_json

RUNNING = "running"
PREPARED = "prepared"
COMMITTED = "committed"
NO_CHANGE = "no_change"
FAILED = "failed"
UNSETTLED = frozenset({RUNNING, PREPARED})
KEEP_SETTLED = 200


@dataclass(frozen=True)
class Operation:
    id: str
    kind: str
    phase: str
    branch: str
    start: str
    upstream: str | None = None
    candidate: str | None = None
    message: str = ""
    files: tuple[str, ...] = ()
    pid: int = field(default_factory=os.getpid)
    created_at: str = field(default_factory=lambda: timefmt.rfc3339(timefmt.now()))
    updated_at: str = field(default_factory=lambda: timefmt.rfc3339(timefmt.now()))

    def to_json(self) -> dict[str, object]:
        data = asdict(self)
        data["files"] = list(self.files)
        return data


def new_operation_id(kind: str) -> str:
    stamp = timefmt.now().strftime("%Y%m%dT%H%M%S")
    return f"{stamp}-{kind}-{uuid.uuid4().hex[:12]}"


class Journal:
    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def _path(self, operation_id: str) -> Path:
        return self.directory / f"{operation_id}.json"

    def begin(self, kind: str, branch: str, start: str, upstream: str | None) -> Operation:
        private_dir(self.directory)
        op = Operation(id=new_operation_id(kind), kind=kind, phase=RUNNING, branch=branch,
                       start=start, upstream=upstream)
        write_json(self._path(op.id), op.to_json())
        return op

    def advance(self, op: Operation, phase: str, **changes: object) -> Operation:
        updated = replace(op, phase=phase, updated_at=timefmt.rfc3339(timefmt.now()),
                          pid=os.getpid(), **changes)  # type: ignore[arg-type]
        write_json(self._path(op.id), updated.to_json())
        if phase not in UNSETTLED:
            self._trim()
        return updated

    def load(self, operation_id: str) -> Operation | None:
        return _parse(read_json(self._path(operation_id)))

    def all(self) -> list[Operation]:
        if not self.directory.is_dir():
            return []
        ops = [_parse(read_json(p)) for p in sorted(self.directory.glob("*.json"))]
        return [op for op in ops if op is not None]

    def unsettled(self) -> list[Operation]:
        return [op for op in self.all() if op.phase in UNSETTLED]

    def _trim(self) -> None:
        settled = [op for op in self.all() if op.phase not in UNSETTLED]
        for op in settled[:-KEEP_SETTLED] if len(settled) > KEEP_SETTLED else []:
            self._path(op.id).unlink(missing_ok=True)


def _parse(raw: object) -> Operation | None:
    if not isinstance(raw, dict):
        return None
    try:
        files = tuple(str(f) for f in raw.get("files") or ())
        fields = {k: v for k, v in raw.items() if k in Operation.__dataclass_fields__}
        fields["files"] = files
        return Operation(**fields)
    except TypeError:
        return None
