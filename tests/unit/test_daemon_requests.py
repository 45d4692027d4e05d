"""The control socket's request bodies read without pydantic (`daemon.requests`) give what
the pydantic models (`wire.requests`) give: the same values for a body either accepts, the
same first line of words for one the model refuses (issue 18)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import asdict
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from memsync.daemon.requests import BadRequest, CycleRequest, PullRequest, SyncRequest, read
from memsync.wire import requests as models

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
        valid = getattr(models, cls.__name__).model_validate(data)
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
from memsync.daemon.requests import CycleRequest, PullRequest, SyncRequest, read
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
