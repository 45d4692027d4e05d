"""The daemon's answers as plain JSON documents: what the wire models would dump, without
loading pydantic at rest (issue 18).

Each builder makes the document from the core's values and keeps it when it has exactly
the model's shape (`wire.shape.fit`): such a document is what validating it through the
model and dumping it again gives, key for key. Anything else goes through the model, as
before (tests/unit/test_wire_documents.py proves both). `Answer` is a document written as
the model's `model_dump_json` writes it: compact, UTF-8 unescaped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from memsync.roots.result import SyncResult
from memsync.wire.shape import DAEMON_STATUS, STATUS_REPORT, SYNC_REPORT, SYNC_RESULT, fit


class Answer:
    """A JSON document ready to send: what the control socket answers with."""

    __slots__ = ("_text",)

    def __init__(self, text: str) -> None:
        self._text = text

    @classmethod
    def of(cls, document: Mapping[str, Any]) -> Answer:
        return cls(json.dumps(document, ensure_ascii=False, separators=(",", ":")))

    def model_dump_json(self, *, indent: int | None = None) -> str:
        """The text (the name and signature of a wire model's, so both answer alike)."""
        return self._text


def _result(result: SyncResult) -> dict[str, Any]:
    return {
        "root": result.root,
        "status": result.status.value,
        "message": result.message,
        "head": result.head,
        "upstream": result.upstream,
        "files": list(result.files),
        "problems": [
            {"code": p.code, "path": p.path, "line": p.line, "message": p.message}
            for p in result.problems
        ],
        "rescue_ref": result.rescue_ref,
        "operation_id": result.operation_id,
        "duration_ms": result.duration_ms,
        "dry_run": result.dry_run,
    }


def sync_result_document(result: SyncResult) -> dict[str, Any]:
    """`SyncResultModel.of(result).model_dump(mode="json")`."""
    fitted: dict[str, Any] | None = fit(_result(result), SYNC_RESULT)
    if fitted is not None:
        return fitted
    from memsync.wire.cli import SyncResultModel  # noqa: PLC0415 - an odd value only

    return SyncResultModel.of(result).model_dump(mode="json")


def sync_report(results: Iterable[SyncResult]) -> Answer:
    """`POST /v1/sync`'s answer: the `sync-now --json` document."""
    listed = list(results)
    fitted = fit({"results": [_result(r) for r in listed]}, SYNC_REPORT)
    if fitted is not None:
        return Answer.of(fitted)
    from memsync.wire.cli import SyncReport, SyncResultModel  # noqa: PLC0415

    return Answer(SyncReport(results=[SyncResultModel.of(r) for r in listed]).model_dump_json())


def daemon_status(document: dict[str, Any]) -> Answer:
    """`GET /v1/daemon`'s answer: the `DaemonStatus` model's document."""
    fitted = fit(document, DAEMON_STATUS)
    if fitted is not None:
        return Answer.of(fitted)
    from memsync.wire.cli import DaemonStatus  # noqa: PLC0415

    return Answer(DaemonStatus.model_validate(document).model_dump_json())


def status_report(document: dict[str, Any]) -> Answer:
    """`GET /v1/status`'s answer: the `StatusReport` model's document."""
    fitted = fit(document, STATUS_REPORT)
    if fitted is not None:
        return Answer.of(fitted)
    from memsync.wire.cli import StatusReport  # noqa: PLC0415

    return Answer(StatusReport.model_validate(document).model_dump_json())
