"""The daemon's plain JSON answers (`wire.documents`) are the wire models' documents: for
every value the builders keep, validating through the model and dumping gives the same
text; a value of another shape goes through the model itself (issue 18: no pydantic at
rest, and not one byte of an answer changed)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from memsync.roots.result import SyncResult, SyncStatus
from memsync.validators.problems import Problem
from memsync.wire import documents
from memsync.wire.cli import (
    DaemonStatus,
    StatusReport,
    SyncReport,
    SyncResultModel,
    ValidateReport,
)
from memsync.wire.shape import (
    DAEMON_STATUS,
    STATUS_REPORT,
    SYNC_REPORT,
    SYNC_RESULT,
    VALIDATE_REPORT,
    Shape,
    fit,
)
from tests.e2e.test_startup import documents as shaped

# Any text JSON can carry, a lone surrogate too (`"\ud800"` decodes to one).
TEXT = st.text() | st.sampled_from(["\ud800", 'a"b\\c\n\x00\x7f\u2028é', ""])
INTS = st.integers(0, 2**63) | st.sampled_from([2**64, 2**70, -1])
OPTIONAL = st.none() | TEXT

problems = st.builds(Problem, TEXT, OPTIONAL, st.none() | INTS, TEXT)
results = st.builds(
    SyncResult,
    root=TEXT,
    status=st.sampled_from(list(SyncStatus)),
    message=TEXT,
    head=OPTIONAL,
    upstream=OPTIONAL,
    files=st.lists(TEXT, max_size=3).map(tuple),
    problems=st.lists(problems, max_size=2).map(tuple),
    rescue_ref=OPTIONAL,
    operation_id=OPTIONAL,
    duration_ms=INTS,
    dry_run=st.booleans(),
)


def shape_of(annotation: Any) -> Shape:
    """The shape `wire.shape` should hold for a wire model (or a field's type)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return {name: shape_of(info.annotation) for name, info in annotation.model_fields.items()}
    args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
    if len(args) < len(getattr(annotation, "__args__", ())):  # `X | None`
        inner = shape_of(args[0])
        assert isinstance(inner, str)
        return inner + "?"
    if getattr(annotation, "__origin__", None) is list:
        return [shape_of(annotation.__args__[0])]
    return {str: "str", int: "int", bool: "bool"}[annotation]


def outcome(make: Any) -> tuple[str, Any]:
    """What `make()` gives, or the kind of error it raises (both ways must agree)."""
    try:
        return ("value", make())
    except (ValueError, UnicodeEncodeError) as exc:
        return ("error", type(exc).__name__ if isinstance(exc, UnicodeEncodeError) else "value")


def test_the_shapes_are_the_wire_models() -> None:
    for model, shape in (
        (SyncResultModel, SYNC_RESULT),
        (SyncReport, SYNC_REPORT),
        (DaemonStatus, DAEMON_STATUS),
        (StatusReport, STATUS_REPORT),
        (ValidateReport, VALIDATE_REPORT),
    ):
        assert json.dumps(shape_of(model)) == json.dumps(shape)  # fields and their order


@given(results)
def test_a_sync_result_is_the_models_document(result: SyncResult) -> None:
    mine = outcome(lambda: documents.sync_result_document(result.document()))
    model = outcome(lambda: result.model().model_dump(mode="json"))
    assert mine == model


@given(st.lists(results, max_size=3))
def test_a_sync_report_is_the_models_text(listed: list[SyncResult]) -> None:
    mine = outcome(
        lambda: documents.sync_report(r.document() for r in listed).model_dump_json().encode()
    )
    model = outcome(
        lambda: SyncReport(results=[r.model() for r in listed]).model_dump_json().encode()
    )
    assert mine == model


@given(shaped(DAEMON_STATUS))
def test_the_daemon_block_is_the_models_text(document: dict[str, Any]) -> None:
    mine = documents.daemon_status(document).model_dump_json()
    assert mine == DaemonStatus.model_validate(document).model_dump_json()


@given(shaped(STATUS_REPORT))
def test_the_status_report_is_the_models_text(document: dict[str, Any]) -> None:
    mine = documents.status_report(document).model_dump_json()
    assert mine == StatusReport.model_validate(document).model_dump_json()


@given(shaped(VALIDATE_REPORT))
def test_the_validate_report_is_the_models_text(document: dict[str, Any]) -> None:
    mine = outcome(lambda: documents.validate_report(document).model_dump_json())
    model = outcome(lambda: ValidateReport.model_validate(document).model_dump_json())
    assert mine == model


def test_a_document_of_another_shape_goes_through_the_model() -> None:
    document: dict[str, Any] = {"running": 1, "schedule": []}  # lax: true to the model only
    assert documents.daemon_status(document).model_dump_json() == (
        DaemonStatus.model_validate(document).model_dump_json()
    )


def test_the_answers_at_rest_load_no_pydantic() -> None:
    probe = """
import sys
from memsync.roots.result import SyncResult, SyncStatus
from memsync.wire import documents
result = SyncResult("r", SyncStatus.CURRENT, "up to date", head="abc")
documents.sync_result_document(result.document())
documents.sync_report([result.document()]).model_dump_json()
print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core")))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


@given(results, st.data())
def test_a_sync_result_comes_back_from_its_document_as_from_its_model(
    result: SyncResult, data: st.DataObject
) -> None:
    # `sync-now` through a daemon reads an answer of the model's exact shape without the
    # model: the same result as through it. (Any other answer goes through the model.)
    document = {"results": [result.document()]}
    fitted = fit(document, SYNC_REPORT)
    if fitted is None:  # a lone surrogate, an int past 64 bits: the model's path, as before
        return
    [mine] = fitted["results"]
    [model] = SyncReport.model_validate(document).results
    assert SyncResult.from_document(mine) == SyncResult.from_model(model) == result
    # A status word this client does not know fails alike both ways.
    odd = {**mine, "status": data.draw(st.text().filter(lambda w: w not in set(SyncStatus)))}
    assert outcome(lambda: SyncResult.from_document(odd)) == outcome(
        lambda: SyncResult.from_model(SyncResultModel.model_validate(odd))
    )


@given(results)
def test_a_sync_result_comes_back_from_its_model(result: SyncResult) -> None:
    # The CLI prints a daemon's answer through the same value as an in-process result.
    assert SyncResult.from_model(result.model()) == result


def test_a_control_socket_refusal_is_written_as_ever() -> None:
    assert documents.control_error("bad-request", 'no "é"') == (
        b'{"error": {"code": "bad-request", "message": "no \\"\\u00e9\\""}}'
    )


def test_the_probes_documents() -> None:
    assert documents.health() == {"status": "ok"}
    assert documents.readiness([]) == {"status": "ready"}
    assert documents.readiness(["root bob: offline"]) == {
        "status": "unready",
        "reasons": ["root bob: offline"],
    }
