"""The outcome of one sync cycle for one root (CONTRACT §2 statuses, exact words)."""

from __future__ import annotations

from memsync.roots.syncstatus import SyncStatus
from memsync.validators.problems import Problem
from memsync.values import value

TYPE_CHECKING = False  # `typing` loads after a cycle's first git processes start (issue 18)
if TYPE_CHECKING:  # pydantic loads for `--json` only (issue 18)
    from typing import Any

    from memsync.wire.cli import SyncResultModel

__all__ = ["HELD", "OK", "SyncResult", "SyncStatus"]


OK = frozenset({SyncStatus.CURRENT, SyncStatus.SYNCED, SyncStatus.PUSHED})
HELD = frozenset({SyncStatus.PAUSED})  # the operator asked for it: not a failure (exit 0)


@value
class SyncResult:
    """The outcome of one root's cycle, as the CLI and the daemon report it."""

    root: str
    status: SyncStatus
    message: str
    head: str | None = None
    upstream: str | None = None
    files: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()
    rescue_ref: str | None = None
    operation_id: str | None = None
    duration_ms: int = 0
    dry_run: bool = False

    @property
    def ok(self) -> bool:
        return self.status in OK

    def document(self) -> dict[str, Any]:
        """The `sync-now --json` entry as plain JSON values, keys in the wire model's order
        (`wire.documents` checks its shape; no pydantic)."""
        return {
            "root": self.root,
            "status": self.status.value,
            "message": self.message,
            "head": self.head,
            "upstream": self.upstream,
            "files": list(self.files),
            "problems": [p.document() for p in self.problems],
            "rescue_ref": self.rescue_ref,
            "operation_id": self.operation_id,
            "duration_ms": self.duration_ms,
            "dry_run": self.dry_run,
        }

    def model(self) -> SyncResultModel:
        """The `sync-now --json` entry as its wire model."""
        from memsync.wire.cli import ProblemModel, SyncResultModel  # noqa: PLC0415 - pydantic

        return SyncResultModel(
            root=self.root,
            status=self.status,
            message=self.message,
            head=self.head,
            upstream=self.upstream,
            files=list(self.files),
            problems=[ProblemModel.of(p) for p in self.problems],
            rescue_ref=self.rescue_ref,
            operation_id=self.operation_id,
            duration_ms=self.duration_ms,
            dry_run=self.dry_run,
        )

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> SyncResult:
        """Back from a daemon's answer that has exactly the wire model's shape
        (`wire.shape.fit(..., SYNC_RESULT)`): what `from_model` gives for it, without
        pydantic (tests/unit/test_wire_documents.py holds the two equal)."""
        return cls(
            root=document["root"],
            status=SyncStatus(document["status"]),
            message=document["message"],
            head=document["head"],
            upstream=document["upstream"],
            files=tuple(document["files"]),
            problems=tuple(
                Problem(p["code"], p["path"], p["line"], p["message"]) for p in document["problems"]
            ),
            rescue_ref=document["rescue_ref"],
            operation_id=document["operation_id"],
            duration_ms=document["duration_ms"],
            dry_run=document["dry_run"],
        )

    @classmethod
    def from_model(cls, model: SyncResultModel) -> SyncResult:
        """Back from the wire (a daemon's answer, printed like an in-process result)."""
        return cls(
            root=model.root,
            status=SyncStatus(model.status),
            message=model.message,
            head=model.head,
            upstream=model.upstream,
            files=tuple(model.files),
            problems=tuple(Problem(p.code, p.path, p.line, p.message) for p in model.problems),
            rescue_ref=model.rescue_ref,
            operation_id=model.operation_id,
            duration_ms=model.duration_ms,
            dry_run=model.dry_run,
        )
