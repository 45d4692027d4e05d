"""The daemon's answers as plain JSON documents: what the wire models would dump, without
loading pydantic at rest (issue 18).

Producers give their values as plain documents (`SyncResult.document()`, the daemon's
status blocks); each builder keeps such a document when it has exactly the model's shape
(`wire.shape.fit`): such a document is what validating it through the model and dumping
it again gives, key for key. Anything else goes through the model, as before
(tests/unit/test_wire_documents.py proves both). `Answer` is a document written as
the model's `model_dump_json` writes it: compact, UTF-8 unescaped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from memsync.wire.shape import (
    DAEMON_STATUS,
    STATUS_REPORT,
    SYNC_REPORT,
    SYNC_RESULT,
    VALIDATE_REPORT,
    fit,
)


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


def sync_result_document(document: dict[str, Any]) -> dict[str, Any]:
    """`SyncResultModel.model_validate(document).model_dump(mode="json")` for a
    `SyncResult.document()`."""
    fitted: dict[str, Any] | None = fit(document, SYNC_RESULT)
    if fitted is not None:
        return fitted
    from memsync.wire.cli import SyncResultModel  # noqa: PLC0415 - an odd value only

    return SyncResultModel.model_validate(document).model_dump(mode="json")


def sync_report(results: Iterable[dict[str, Any]]) -> Answer:
    """`POST /v1/sync`'s answer, the `sync-now --json` document, from the results'
    `SyncResult.document()`s."""
    report = {"results": list(results)}
    fitted = fit(report, SYNC_REPORT)
    if fitted is not None:
        return Answer.of(fitted)
    from memsync.wire.cli import SyncReport  # noqa: PLC0415

    return Answer(SyncReport.model_validate(report).model_dump_json())


def validate_report(document: dict[str, Any]) -> Answer:
    """The `validate --json` document: the `ValidateReport` model's."""
    fitted = fit(document, VALIDATE_REPORT)
    if fitted is not None:
        return Answer.of(fitted)
    from memsync.wire.cli import ValidateReport  # noqa: PLC0415

    return Answer(ValidateReport.model_validate(document).model_dump_json())


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


def control_error(code: str, message: str) -> bytes:
    """The document every refusal of the control socket is (CONTRACT §6), as the client
    reads it: `{"error": {"code": ..., "message": ...}}`, written ASCII-escaped."""
    return json.dumps({"error": {"code": code, "message": message}}).encode()


def health() -> dict[str, Any]:
    """`GET /healthz` (the daemon's `http.listen`, CONTRACT §6): the loop is alive."""
    return {"status": "ok"}


def readiness(reasons: list[str]) -> dict[str, Any]:
    """`GET /readyz`: `ready`, or `unready` with what keeps the daemon so (answered 503)."""
    return {"status": "unready", "reasons": reasons} if reasons else {"status": "ready"}
