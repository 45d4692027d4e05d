"""The control socket's request documents as pydantic models, made from their one
definition (the dataclasses of `wire.requests`): what decides any body that
`wire.requests.read` does not read by itself, with the same verdicts and words as ever.
Loaded only for such a body (issue 18: no pydantic at rest)."""

from __future__ import annotations

from dataclasses import MISSING, fields
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, create_model

_MADE: dict[type, type[BaseModel]] = {}


def model(cls: type) -> type[BaseModel]:
    """The pydantic model of the request dataclass `cls`: its name, fields, types and
    defaults, no other field allowed (made once)."""
    made = _MADE.get(cls)
    if made is None:
        made = _MADE[cls] = _make(cls)
    return made


def _make(cls: type) -> type[BaseModel]:
    hints = get_type_hints(cls)
    definitions: dict[str, Any] = {}
    for f in fields(cls):
        if f.default is not MISSING:
            default: Any = f.default
        elif f.default_factory is not MISSING:  # `[]`: pydantic copies it for each value
            default = f.default_factory()
        else:
            default = ...
        definitions[f.name] = (hints[f.name], default)
    made: type[BaseModel] = create_model(
        cls.__name__, __config__=ConfigDict(extra="forbid"), **definitions
    )
    return made
