"""The control socket's request bodies read without pydantic (`wire.requests`) give what
the pydantic models made from the same dataclasses (`wire.requestmodels`) give: the same
values for a body either accepts, the same first line of words for one the model refuses
(issue 18). The CLI's bodies are the dataclasses' documents, read back as they were made."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from memsync.wire.requestmodels import model
from memsync.wire.requests import BadRequest, CycleRequest, PullRequest, SyncRequest, read

REQUESTS = (SyncRequest, PullRequest, CycleRequest)
NAMES = ["roots", "views", "root", "force", "accept_rewrite", "dry_run", "no_push", "extra"]

scalars = st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
scalars |= st.sampled_from(["true", "yes", "0", "1", "off", 0, 1, 1.0, "\ud800"])
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=6,
)
# Near misses: each field of the request, with a value of its own type or one the model may
# still take (lax) or refuse, an unknown field now and then.
near = {
    "roots": st.lists(st.text(max_size=3), max_size=2) | values,
    "views": st.lists(st.text(max_size=3), max_size=2) | values,
    "root": st.text(max_size=3) | values,
    "force": st.booleans() | values,
    "accept_rewrite": st.booleans() | values,
    "dry_run": st.booleans() | values,
    "no_push": st.booleans() | values,
    "extra": values,
}
bodies = (
    st.fixed_dictionaries({}, optional=near)
    | st.dictionaries(st.sampled_from(NAMES), values, max_size=4)
    | values
)


def by_model(cls: type, data: Any) -> tuple[str, Any]:
    try:
        valid = model(cls).model_validate(data)
    except ValidationError as exc:
        return ("refused", str(exc).splitlines()[0][:200])
    return ("read", repr(valid.model_dump()))  # repr: `1` is not `True`


def by_reader(cls: type, data: Any) -> tuple[str, Any]:
    try:
        return ("read", repr(asdict(read(cls, data))))
    except BadRequest as exc:
        return ("refused", str(exc))


@pytest.mark.parametrize("cls", REQUESTS)
@given(data=bodies)
def test_every_body_is_read_as_the_model_reads_it(cls: type, data: Any) -> None:
    assert by_reader(cls, data) == by_model(cls, data)


@pytest.mark.parametrize(
    ("cls", "data"),
    [
        (SyncRequest, {"roots": ["a"], "accept_rewrite": "yes"}),  # lax: the model's yes
        (SyncRequest, {"roots": "not a list"}),
        (SyncRequest, {"roots": [1, 2], "x": 1}),
        (CycleRequest, {"force": True}),
        (PullRequest, []),
        (CycleRequest, {"root": "a", "force": 1}),  # the model's True, not 1
        (SyncRequest, {"dry_run": 0.0}),
        (PullRequest, {"views": ("a",)}),
    ],
)
def test_what_is_not_exactly_well_formed_is_the_models_to_decide(cls: type, data: Any) -> None:
    assert by_reader(cls, data) == by_model(cls, data)


def test_a_well_formed_body_loads_no_pydantic() -> None:
    probe = """
import sys
from memsync.wire.requests import CycleRequest, PullRequest, SyncRequest, read
read(SyncRequest, {"roots": ["a"], "accept_rewrite": False, "dry_run": True, "no_push": False})
read(SyncRequest, {})
read(PullRequest, {"views": []})
read(CycleRequest, {"root": "a", "force": True})
print(sorted(m for m in sys.modules if m.split(".")[0] in ("pydantic", "pydantic_core")))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.strip() == "[]"


sync_requests = st.builds(
    SyncRequest,
    roots=st.lists(st.text(max_size=4), max_size=3),
    accept_rewrite=st.booleans(),
    dry_run=st.booleans(),
    no_push=st.booleans(),
)
made = (
    sync_requests
    | st.builds(PullRequest, views=st.lists(st.text(max_size=4), max_size=3))
    | st.builds(CycleRequest, root=st.text(max_size=4), force=st.booleans())
)


@given(made)
def test_what_the_cli_sends_is_read_back_as_it_was_made(request: Any) -> None:
    document = json.loads(json.dumps(request.document()))  # as it crosses the socket
    assert read(type(request), document) == request
    assert by_model(type(request), document) == ("read", repr(asdict(request)))


def test_the_documents_are_the_contracts() -> None:
    # CONTRACT §6's bodies, key for key and in this order (what the CLI always sent).
    assert json.dumps(SyncRequest(["a"], dry_run=True).document()) == (
        '{"roots": ["a"], "accept_rewrite": false, "dry_run": true, "no_push": false}'
    )
    assert json.dumps(PullRequest(["v"]).document()) == '{"views": ["v"]}'
    assert json.dumps(CycleRequest("r", force=True).document()) == '{"root": "r", "force": true}'
