"""The exact shape of a wire document, checked with the standard library only.

`memsync status` prints the daemon's answer without loading pydantic when the answer has
exactly the shape of `wire.cli.StatusReport` (every field present, each value of its exact
JSON type): such a document is what validating it through the model and dumping it again
would give, key for key (tests/e2e/test_startup.py proves both the table and that).
Anything else goes through the model, as before.

A shape is a type name (`"str"`, `"int"`, `"bool"`, with `?` when null is allowed), a dict
of field name to shape (an object, keys in the model's order) or a one-item list (a list
of that shape).
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any


Shape = str | dict[str, "Shape"] | list["Shape"]

_INT_RANGE = range(-(2**63), 2**64)  # what every JSON reader of ours holds exactly

_SCHEDULE_ENTRY: Shape = {
    "kind": "str",
    "name": "str",
    "next_run_at": "str?",
    "running": "bool",
    "failures": "int",
    "backoff_until": "str?",
    "held": "bool",
}
_DAEMON: Shape = {
    "running": "bool",
    "pid": "int?",
    "version": "str?",
    "started_at": "str?",
    "uptime_seconds": "int?",
    "schedule": [_SCHEDULE_ENTRY],
    "config": "str?",
    "other_config": "str?",
}
_ROOT: Shape = {
    "root": "str",
    "path": "str",
    "head": "str?",
    "branch": "str?",
    "status": "str?",
    "message": "str?",
    "last_success_at": "str?",
    "last_failure_at": "str?",
    "dirty": "bool?",
    "ahead": "int?",
    "behind": "int?",
    "pending_operations": "int",
    "trusted_upstream": "str?",
    "prune": {
        "enabled": "bool",
        "generation_commits": "int?",
        "commits": "int?",
        "last_result": "str?",
        "last_run_at": "str?",
    },
    "insight": {
        "enabled": "bool",
        "points": "int",
        "threshold": "int",
        "last_result": "str?",
        "last_run_at": "str?",
    },
    "paused": "bool",
    "paused_until": "str?",
    "admission": {
        "require": "str",
        "signers": ["str"],
        "signer_files": ["str"],
        "anchor": "str?",
        "since": "str?",
        "message": "str?",
    },
}
_VIEW: Shape = {
    "view": "str",
    "root": "str",
    "heading": "str",
    "status": "str",
    "revision": "int?",
    "fetched_at": "str?",
    "expires_at": "str?",
    "message": "str?",
    "paused": "bool",
    "paused_until": "str?",
}
STATUS_REPORT: Shape = {"daemon": _DAEMON, "roots": [_ROOT], "views": [_VIEW]}
DAEMON_STATUS: Shape = _DAEMON
_PROBLEM: Shape = {"code": "str", "path": "str?", "line": "int?", "message": "str"}
SYNC_RESULT: Shape = {
    "root": "str",
    "status": "str",
    "message": "str",
    "head": "str?",
    "upstream": "str?",
    "files": ["str"],
    "problems": [_PROBLEM],
    "rescue_ref": "str?",
    "operation_id": "str?",
    "duration_ms": "int",
    "dry_run": "bool",
}
SYNC_REPORT: Shape = {"results": [SYNC_RESULT]}
VALIDATE_REPORT: Shape = {
    "valid": "bool",
    "root": "str",
    "rev": "str?",
    "files": "int",
    "items": "int",
    "problems": [_PROBLEM],
    "tracked": "int",
    "memory_files": "int",
}


class _Misfit(Exception):
    pass


def fit(value: object, shape: Shape) -> Any:
    """`value` with its objects' keys in the shape's order, when it has exactly that shape;
    None when it does not."""
    try:
        return _fit(value, shape)
    except _Misfit:
        return None


def _fit(value: object, shape: Shape) -> Any:
    if isinstance(shape, dict):
        if type(value) is not dict or value.keys() != shape.keys():
            raise _Misfit
        return {key: _fit(value[key], inner) for key, inner in shape.items()}
    if isinstance(shape, list):
        if type(value) is not list:
            raise _Misfit
        return [_fit(item, shape[0]) for item in value]
    if value is None and shape.endswith("?"):
        return None
    kind = shape.rstrip("?")
    if kind == "str" and type(value) is str:
        try:
            value.encode("utf-8")  # a lone surrogate from a `\ud800` escape cannot be printed
        except UnicodeEncodeError:
            raise _Misfit from None
        return value
    if (kind == "int" and type(value) is int and value in _INT_RANGE) or (
        kind == "bool" and type(value) is bool
    ):
        return value
    raise _Misfit
