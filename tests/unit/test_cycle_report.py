"""`memsync cycle --json` prints its document without pydantic (`cycles.report`): for every
value the report keeps, the text is the wire model's; a value of another shape goes through
the model itself (issue 18: not one byte of the output changed)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from memsync.cycles.report import CYCLE_REPORT, Report
from memsync.cycles.turn import CycleResult
from memsync.validators.problems import Problem
from memsync.wire.cli import CycleReport
from tests.unit.test_wire_documents import INTS, OPTIONAL, TEXT, outcome, shape_of

problems = st.builds(Problem, TEXT, OPTIONAL, st.none() | INTS, TEXT)
results = st.builds(
    CycleResult,
    root=TEXT,
    cycle=st.sampled_from(["insight", "prune"]) | TEXT,
    status=st.sampled_from(["landed", "noop", "not-due", "refused", "failed"]),
    message=TEXT,
    operation_id=OPTIONAL,
    commit=OPTIONAL,
    files=st.lists(TEXT, max_size=3).map(tuple),
    problems=st.lists(problems, max_size=2).map(tuple),
    duration_ms=INTS,
)


def test_the_shape_is_the_wire_model() -> None:
    assert json.dumps(shape_of(CycleReport)) == json.dumps(CYCLE_REPORT)


def printed(report: Report) -> str:
    """What `cycle --json` prints for the report (`cli.cycle`)."""
    if report.model is not None:
        return report.model.model_dump_json()
    return json.dumps(report.values, ensure_ascii=False, separators=(",", ":"))


@given(results)
def test_a_cycle_result_prints_the_models_text(result: CycleResult) -> None:
    mine = outcome(lambda: printed(Report.of(result.document())).encode())
    model = outcome(lambda: result.model().model_dump_json().encode())
    assert mine == model


@given(results)
def test_the_text_lines_read_the_models_values(result: CycleResult) -> None:
    def values() -> dict[str, Any]:
        return Report.of(result.document()).values

    got = outcome(values)
    if got[0] == "value":
        assert got[1] == result.model().model_dump()


def test_an_answer_of_another_shape_goes_through_the_model() -> None:
    # A daemon's answer the model reads laxly (an int as a string): the model's text.
    answer: dict[str, Any] = {
        **CycleResult("bob", "insight", "noop", "done").document(),
        "duration_ms": "7",
    }
    report = Report.of(answer)
    assert report.model is not None
    assert printed(report) == CycleReport.model_validate(answer).model_dump_json()
    assert report.values["duration_ms"] == 7
