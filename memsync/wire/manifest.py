"""Wire models of a view manifest (CONTRACT §5): `{"signed": {…}, "signatures": […]}`.

`decode_document` reads the JSON text unambiguously (UTF-8 only; duplicate keys, NaN,
Infinity and non-integer numbers refused). The models are strict (no coercion: a string is
never read as a number) and forbid unknown fields. They describe the shape only:
signatures, revisions and expiry are judged by `memsync.views.manifest`, which verifies
signatures over the parsed JSON itself, never over these models.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StringConstraints

from memsync.names import NAME_PATTERN

MANIFEST_TYPE = "memsync.view-manifest"
SPEC_VERSION = 1
MAX_INT = 2**63 - 1  # integers stay within what every JSON consumer can hold exactly

Sha256Hex = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
# The name rule (a view id becomes a directory name).
ViewId = Annotated[str, StringConstraints(pattern=rf"^{NAME_PATTERN}$")]


def _real_moment(value: str) -> str:
    datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ")  # ValueError for 2026-02-30 and the like
    return value


Timestamp = Annotated[
    str,
    StringConstraints(pattern=r"^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z$"),
    AfterValidator(_real_moment),
]


def parse_timestamp(value: str) -> datetime:
    """A manifest timestamp (`YYYY-MM-DDTHH:MM:SSZ`) as an aware UTC datetime."""
    return datetime.strptime(value, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class PackageRef(_Wire):
    length: Annotated[int, Field(ge=0, le=MAX_INT)]
    sha256: Sha256Hex


class SignedManifest(_Wire):
    type_: Literal["memsync.view-manifest"] = Field(alias="_type")
    spec_version: Literal[1]
    view_id: ViewId
    revision: Annotated[int, Field(ge=1, le=MAX_INT)]
    published_at: Timestamp
    expires: Timestamp
    package: PackageRef
    files: dict[str, Sha256Hex]

    @property
    def expires_time(self) -> datetime:
        return parse_timestamp(self.expires)


class Signature(_Wire):
    keyid: Sha256Hex
    sig: str


class Manifest(_Wire):
    signed: SignedManifest
    signatures: list[Signature]


def decode_document(data: bytes, *, max_bytes: int) -> dict[str, Any]:
    """The JSON object in `data`, read strictly; `ValueError` says what is wrong."""
    if len(data) > max_bytes:
        raise ValueError(f"{len(data)} bytes, over the {max_bytes}-byte cap")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not UTF-8 (bad byte at offset {exc.start})") from exc
    try:
        document = json.loads(
            text,
            object_pairs_hook=_unique_object,
            parse_float=_refuse_float,
            parse_constant=_refuse_constant,
        )
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from exc
    except RecursionError as exc:
        raise ValueError("JSON nested too deeply") from exc
    # Other ValueErrors (from the hooks below, or an integer over Python's digit limit)
    # already say what is wrong and propagate as they are.
    if not isinstance(document, dict):
        raise ValueError(f"the top level is a JSON {type(document).__name__}, not an object")
    return document


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise ValueError(f"duplicate key {key[:80]!r} (ambiguous JSON)")
        result[key] = value
    return result


def _refuse_float(text: str) -> object:
    raise ValueError(f"non-integer number {text[:40]} (only integers are allowed)")


def _refuse_constant(text: str) -> object:
    raise ValueError(f"{text} is not a JSON number")
