"""The control socket's request documents (`POST /v1/sync`, `/v1/views/pull`,
`/v1/cycles/*`, CONTRACT §6), defined once: the CLI sends `SyncRequest(...).document()`,
the daemon reads a body back with `read`. Standard library only.

A body whose every field is present with its exact JSON type (a string, `true`/`false`, a
list of strings) and no other field is read here: the pydantic model made from the same
dataclass (`wire.requestmodels`) would give the same values. Anything else (a missing or
unknown field, a number for a flag, not an object at all) goes through that model, which
decides it as it always has, with its words (tests/unit/test_daemon_requests.py proves the
two agree).
"""

from __future__ import annotations

from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import Any, TypeVar


@dataclass(frozen=True)
class SyncRequest:
    roots: list[str] = field(default_factory=list)
    accept_rewrite: bool = False
    dry_run: bool = False
    no_push: bool = False

    def document(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class PullRequest:
    views: list[str] = field(default_factory=list)

    def document(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class CycleRequest:
    root: str
    force: bool = False

    def document(self) -> dict[str, Any]:
        return asdict(self)


R = TypeVar("R", SyncRequest, PullRequest, CycleRequest)

# A field's annotation as the exact JSON type read here (every field's is one of these).
_KINDS = {"str": "str", "bool": "bool", "list[str]": "strs"}


def _spec(cls: type) -> dict[str, tuple[str, bool]]:
    """Each field of `cls`: the exact JSON type read here, and whether a body must name it."""
    return {
        f.name: (_KINDS[str(f.type)], f.default is MISSING and f.default_factory is MISSING)
        for f in fields(cls)
    }


_FIELDS: dict[type, dict[str, tuple[str, bool]]] = {
    cls: _spec(cls) for cls in (SyncRequest, PullRequest, CycleRequest)
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

    from memsync.wire.requestmodels import model  # noqa: PLC0415

    try:
        valid = model(cls).model_validate(data)
    except ValidationError as exc:
        raise BadRequest(str(exc).splitlines()[0][:200]) from None
    return cls(**{f.name: getattr(valid, f.name) for f in fields(cls)})
