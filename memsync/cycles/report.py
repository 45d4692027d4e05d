"""The `memsync cycle prune|insight --json` document (CONTRACT §2) without pydantic.

A turn's result gives its values as a plain document (`CycleResult.document()`), and a
daemon answers `POST /v1/cycles/<kind>` with one. When such a document has exactly the
shape of the wire model `wire.cli.CycleReport` (`wire.shape.fit`: every field, each value
of its exact JSON type), it is what validating it through the model and dumping it again
gives, key for key, and it is printed as it is; anything else goes through the model, as
before (tests/unit/test_cycle_report.py proves both).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memsync.wire.shape import Shape, fit

if TYPE_CHECKING:
    from memsync.wire.cli import CycleReport

_PROBLEM: Shape = {"code": "str", "path": "str?", "line": "int?", "message": "str"}
CYCLE_REPORT: Shape = {
    "root": "str",
    "cycle": "str",
    "status": "str",
    "operation_id": "str?",
    "commit": "str?",
    "files": ["str"],
    "problems": [_PROBLEM],
    "message": "str",
    "duration_ms": "int",
}


class Report:
    """One cycle's report: its fields as the model holds them (`values`; the problems as
    dicts), and, for a value of another shape than the model's own document, the model
    itself (`model`, which prints it as ever); None when `values` is that document."""

    __slots__ = ("model", "values")

    def __init__(self, values: dict[str, Any], model: CycleReport | None = None) -> None:
        self.values = values
        self.model = model

    @classmethod
    def of(cls, document: dict[str, Any]) -> Report:
        """The report of a turn's `document()` or a daemon's answer."""
        fitted: dict[str, Any] | None = fit(document, CYCLE_REPORT)
        if fitted is not None:
            return cls(fitted)
        from memsync.wire.cli import CycleReport  # noqa: PLC0415 - pydantic, an odd value only

        model = CycleReport.model_validate(document)
        return cls(model.model_dump(), model)
