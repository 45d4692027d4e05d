"""The hub's JSON bodies as plain documents: what `wire.hub`'s models would dump, without
loading pydantic (issue 18: a hub with no revision yet, every hub a test starts, loads no
model at all).

Each writer keeps its values when they are exactly what the model accepts unchanged (the
exact JSON types, text that UTF-8 can carry, the models' patterns); such a document is
what building the model and dumping it gives, byte for byte. Anything else goes through
the model itself, as before: a value the model refuses still raises its `ValidationError`.
A notify body is read without the model only in its one plain form (an object holding just
`"commit"` and 40 or 64 hex digits, no escapes); any other body goes to `NotifyBody`.
tests/unit/test_wire_hubanswers.py proves both ways equal to the models.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from memsync.names import is_name
from memsync.validators.problems import Problem

HEALTH = b'{"status":"ok"}'  # `Health(status="ok")`
_INT_RANGE = range(-(2**63), 2**64)
_SHA256 = re.compile("[0-9a-f]{64}")
_COMMIT = re.compile("[0-9a-f]{40}|[0-9a-f]{64}")
# A notify body in its plain form; JSON's whitespace is these four characters.
_NOTIFY = re.compile(
    rb'[ \t\n\r]*\{[ \t\n\r]*"commit"[ \t\n\r]*:[ \t\n\r]*"([0-9a-f]{40}|[0-9a-f]{64})"'
    rb"[ \t\n\r]*\}[ \t\n\r]*"
)


def _dump(document: object) -> bytes:
    """A document as a wire model's `model_dump_json` writes it: compact, UTF-8."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")).encode()


def _text(*values: object) -> bool:
    """Whether each value is a `str` that UTF-8 can carry (a lone surrogate cannot)."""
    for value in values:
        if type(value) is not str:
            return False
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return False
    return True


def _number(*values: object) -> bool:
    """Whether each value is an `int` every JSON reader of ours holds exactly."""
    return all(type(value) is int and value in _INT_RANGE for value in values)


def _sha256(value: object) -> bool:
    return _text(value) and _SHA256.fullmatch(str(value)) is not None


def _commit(value: object) -> bool:
    return _text(value) and _COMMIT.fullmatch(str(value)) is not None


def _view_id(value: object) -> bool:
    return _text(value) and is_name(str(value))


def error_body(code: str, message: str, problems: Sequence[Problem] = ()) -> bytes:
    """`ErrorBody` of every non-2xx answer; `problems` only when a publication was refused
    as invalid (the key is there only then)."""
    if not problems and _text(code, message):
        return _dump({"error": {"code": code, "message": message}})
    from memsync.wire import hub as wire  # noqa: PLC0415 - problems or an odd value
    from memsync.wire.problem import ProblemModel  # noqa: PLC0415

    error = wire.ErrorDetail(code=code, message=message)
    if problems:
        body = wire.ErrorBody(error=error, problems=[ProblemModel.of(p) for p in problems])
    else:
        body = wire.ErrorBody(error=error)
    return body.model_dump_json(exclude_unset=True).encode()


def view_entry(
    view_id: str,
    revision: int,
    published_at: str,
    expires: str,
    sha256: str,
    length: int,
    manifest_etag: str,
) -> dict[str, object]:
    """One `ViewEntry` of `GET /v1/views`, as its document."""
    if (
        _view_id(view_id)
        and _number(revision, length)
        and _text(published_at, expires, manifest_etag)
        and _sha256(sha256)
    ):
        return {
            "view_id": view_id,
            "revision": revision,
            "published_at": published_at,
            "expires": expires,
            "sha256": sha256,
            "length": length,
            "manifest_etag": manifest_etag,
        }
    from memsync.wire.hub import ViewEntry  # noqa: PLC0415 - an odd value

    entry = ViewEntry(
        view_id=view_id,
        revision=revision,
        published_at=published_at,
        expires=expires,
        sha256=sha256,
        length=length,
        manifest_etag=manifest_etag,
    )
    document: dict[str, object] = json.loads(entry.model_dump_json())
    return document


def view_list(entries: Sequence[dict[str, object]]) -> bytes:
    """`ViewList` of `view_entry` documents."""
    return _dump({"views": list(entries)})


def publish_result(status: str, view_id: str, revision: int, sha256: str) -> bytes:
    """`PublishResult`: `created` (201) or `unchanged` (200)."""
    plain = _view_id(view_id) and _number(revision) and _sha256(sha256)
    if plain and status in ("created", "unchanged"):
        return _dump({"status": status, "view_id": view_id, "revision": revision, "sha256": sha256})
    from memsync.wire.hub import PublishResult  # noqa: PLC0415 - an odd value

    result = PublishResult(status=status, view_id=view_id, revision=revision, sha256=sha256)
    return result.model_dump_json(exclude_unset=True).encode()


def notify_accepted(root: str, commit: str) -> bytes:
    """`NotifyAccepted` (202)."""
    if _text(root) and _commit(commit):
        return _dump({"root": root, "commit": commit})
    from memsync.wire.hub import NotifyAccepted  # noqa: PLC0415 - an odd value

    return NotifyAccepted(root=root, commit=commit).model_dump_json(exclude_unset=True).encode()


def notify_commit(body: bytes) -> str | None:
    """The commit a notify body names (`NotifyBody`), None when the model refuses it."""
    plain = _NOTIFY.fullmatch(body)
    if plain is not None:
        return plain[1].decode("ascii")
    from pydantic import ValidationError  # noqa: PLC0415 - any other form

    from memsync.wire.hub import NotifyBody  # noqa: PLC0415

    try:
        return NotifyBody.model_validate_json(body).commit
    except ValidationError:
        return None


def revision_event(view_id: str, revision: int, sha256: str) -> bytes:
    """The data of an SSE `event: revision` (`RevisionEvent`)."""
    if _view_id(view_id) and _number(revision) and _sha256(sha256):
        return _dump({"view_id": view_id, "revision": revision, "sha256": sha256})
    from memsync.wire.hub import RevisionEvent  # noqa: PLC0415 - an odd value

    event = RevisionEvent(view_id=view_id, revision=revision, sha256=sha256)
    return event.model_dump_json().encode()


def upstream_event(root: str, commit: str) -> bytes:
    """The data of an SSE `event: upstream` (`UpstreamEvent`)."""
    if _text(root) and _commit(commit):
        return _dump({"root": root, "commit": commit})
    from memsync.wire.hub import UpstreamEvent  # noqa: PLC0415 - an odd value

    return UpstreamEvent(root=root, commit=commit).model_dump_json().encode()
