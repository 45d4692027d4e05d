"""The control socket's request bodies (`POST /v1/sync`, `/v1/views/pull`, `/v1/cycles/*`)
as plain values, read without pydantic when they are exactly well formed.

A body whose every field is present with its exact JSON type (a string, `true`/`false`, a
list of strings) and no other field is read here: the pydantic model (`wire.requests`)
would give the same values. Anything else (a missing or unknown field, a number for a
flag, not an object at all) goes through the model, which decides it as it always has,
with its words (tests/unit/test_daemon_requests.py proves the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, TypeVar


@dataclass(frozen=True)
class SyncRequest:
    roots: list[str] = field(default_factory=list)
    accept_rewrite: bool = False
    dry_run: bool = False
    no_push: bool = False


@dataclass(frozen=True)
class PullRequest:
    views: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CycleRequest:
    root: str
    force: bool = False


R = TypeVar("R", SyncRequest, PullRequest, CycleRequest)

# Each request's fields: the exact JSON type read here, and whether the body must name it.
_FIELDS: dict[type, dict[str, tuple[str, bool]]] = {
    SyncRequest: {
        "roots": ("strs", False),
        "accept_rewrite": ("bool", False),
        "dry_run": ("bool", False),
        "no_push": ("bool", False),
    },
    PullRequest: {"views": ("strs", False)},
    CycleRequest: {"root": ("str", True), "force": ("bool", False)},
}


class BadRequest(ValueError):
    """The body is not a valid request; the message is the model's first line."""


def _exact(value: object, kind: str) -> bool:
    if kind == "str":
        return type(value) is str
    if kind == "bool":
        return type(value) is bool
    return type(value) is list and all(type(item) is str for item in value)


def read(cls: type[R], data: Any) -> R:
    """`data` (decoded JSON) as a `cls`; BadRequest with the model's words when invalid."""
    spec = _FIELDS[cls]
    if (
        type(data) is dict
        and data.keys() <= spec.keys()
        and all(name in data for name, (_, required) in spec.items() if required)
        and all(_exact(value, spec[name][0]) for name, value in data.items())
    ):
        values: dict[str, Any] = {k: list(v) if type(v) is list else v for k, v in data.items()}
        return cls(**values)
    return _through_model(cls, data)


def _through_model(cls: type[R], data: Any) -> R:
    from pydantic import ValidationError  # noqa: PLC0415 - an odd body only

    from memsync.wire import requests  # noqa: PLC0415

    model = getattr(requests, cls.__name__)
    try:
        valid = model.model_validate(data)
    except ValidationError as exc:
        raise BadRequest(str(exc).splitlines()[0][:200]) from None
    return cls(**{f.name: getattr(valid, f.name) for f in fields(cls)})
