"""The synchronized update queue and update records: strict JSON files with exact shapes.

Files checked (the allowlist keeps every other name out; the path rules report those):

* `update_queue/candidates/<uid>.json`: one immutable update candidate;
* `update_queue/lease.json`: the cross-device claim on a batch of candidates;
* `update_queue/recovery/update-batch-<sha256>.json`: retry state of a failed batch;
* `update_records/update-batch-<sha256>.json`: the exact candidates an update consumed.

Every file is strict JSON (UTF-8, no duplicate keys, no NaN or Infinity) holding one object
with an exact key set, `schema_version` 1, and values of the documented types. A name must
match its content, and a batch id must be the hash of the candidates it names. Files that
are not regular or not UTF-8 are skipped here: the path and byte rules report them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Generic, NoReturn, TypeVar

from memsync.lazypattern import lazy
from memsync.validators.auxpaths import queue_paths
from memsync.validators.problems import Problem
from memsync.validators.tree import TreeView

LEASE_PATH = "update_queue/lease.json"
CANDIDATE_PATH = lazy(r"update_queue/candidates/([0-9a-f]{32})\.json")
RECOVERY_PATH = lazy(r"update_queue/recovery/(update-batch-[0-9a-f]{64})\.json")
RECORD_PATH = lazy(r"update_records/(update-batch-[0-9a-f]{64})\.json")
SCHEMA_VERSION = 1

_UID = lazy(r"[0-9a-f]{32}")
_OID = lazy(r"[0-9a-f]{40}|[0-9a-f]{64}")
_BATCH = lazy(r"update-batch-[0-9a-f]{64}")
_REASON = lazy(r"[a-z][a-z0-9_]{0,63}")
CANDIDATE_KEYS = frozenset({"schema_version", "uid", "session_id", "display_id", "message",
                            "submitted_at"})  # fmt: skip
LEASE_KEYS = frozenset({"schema_version", "holder", "token", "base_commit", "batch_id",
                        "candidate_uids", "expires_at"})  # fmt: skip
RECOVERY_KEYS = frozenset({"schema_version", "batch_id", "candidate_uids", "attempts",
                           "reason_code", "retry_at", "manual_recovery"})  # fmt: skip
RECORD_KEYS = frozenset({"schema_version", "operation_id", "candidates"})
T = TypeVar("T")


class QueueFormatError(ValueError):
    """One violation; `key` names the top-level field it concerns, to find its line."""

    def __init__(self, message: str, key: str | None = None, *, repeated: bool = False) -> None:
        super().__init__(message)
        self.message, self.key, self.repeated = message, key, repeated


@dataclass(frozen=True)
class Candidate:
    """One queued update candidate, as its file records it."""

    uid: str
    session_id: str
    display_id: int
    message: str
    submitted_at: str


@dataclass(frozen=True)
class Batch:
    """A batch of candidates, by its id."""

    batch_id: str
    candidate_uids: tuple[str, ...]


def load_strict_json(text: str) -> object:
    """Parse JSON refusing duplicate keys and NaN/Infinity (`ValueError` when it fails)."""

    def pairs(items: list[tuple[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, value in items:
            if key in out:
                raise QueueFormatError(f"duplicate key {_show(key)}", key, repeated=True)
            out[key] = value
        return out

    def constant(name: str) -> object:
        raise QueueFormatError(f"{name} is not a JSON number")

    return json.loads(text, object_pairs_hook=pairs, parse_constant=constant)


def batch_id(candidates: Iterable[Candidate]) -> str:
    """`update-batch-<sha256>` of the canonical per-session job list (RightMemory's identity)."""
    sessions: dict[str, list[Candidate]] = {}
    for item in candidates:
        sessions.setdefault(item.session_id, []).append(item)
    participants = [
        {
            "session_id": session,
            "jobs": [
                {"id": c.display_id, "candidate_uid": c.uid, "message": c.message,
                 "submitted_at": c.submitted_at}
                for c in sorted(items, key=lambda c: (c.display_id, c.submitted_at, c.uid))
            ],
        }
        for session, items in sorted(sessions.items())
    ]  # fmt: skip
    canonical = json.dumps(
        participants, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False
    )
    import hashlib  # noqa: PLC0415 - OpenSSL's load: an update batch to name

    return "update-batch-" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _show(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "...")


class _Object:
    """One JSON object under check: exact keys, `schema_version` 1, then typed fields."""

    def __init__(self, data: object, keys: frozenset[str], label: str) -> None:
        if not isinstance(data, dict):
            raise QueueFormatError(f"{label} must be a JSON object")
        missing, unknown = sorted(keys - data.keys()), sorted(data.keys() - keys)
        if missing:
            raise QueueFormatError(f"{label} is missing key(s): {', '.join(missing)}")
        if unknown:
            shown = ", ".join(_show(k) for k in unknown[:5])
            raise QueueFormatError(f"{label} has unexpected key(s): {shown}", unknown[0])
        self.data: dict[str, object] = data
        self.label = label
        version = data["schema_version"]
        if type(version) is not int or version != SCHEMA_VERSION:
            self.fail("schema_version", f"must be {SCHEMA_VERSION}")

    def fail(self, key: str, what: str) -> NoReturn:
        raise QueueFormatError(f"{self.label} {key} {what}", key)

    def text(self, key: str) -> str:
        value = self.data[key]
        if not isinstance(value, str):
            self.fail(key, "must be a string")
        if any("\ud800" <= char <= "\udfff" for char in value):
            self.fail(key, "holds an unpaired surrogate escape")
        return value

    def match(self, key: str, pattern: re.Pattern[str]) -> str:
        value = self.text(key)
        if pattern.fullmatch(value) is None:
            self.fail(key, f"must match {pattern.pattern}")
        return value

    def count(self, key: str, minimum: int) -> int:
        value = self.data[key]
        if type(value) is not int or value < minimum:
            self.fail(key, f"must be an integer of at least {minimum}")
        return value

    def utc(self, key: str) -> str:
        """A UTC time exactly as Python's `isoformat` writes it (`+00:00`, not `Z`)."""
        value = self.text(key)
        try:
            parsed = datetime.fromisoformat(value)
            ok = parsed.tzinfo is not None and parsed.astimezone(UTC).isoformat() == value
        except (ValueError, OverflowError):
            ok = False
        if not ok:
            self.fail(key, "must be a UTC time written like 2026-01-31T09:30:00+00:00")
        return value

    def uids(self, key: str) -> tuple[str, ...]:
        value = self.data[key]
        if not isinstance(value, list) or not value:
            self.fail(key, "must be a non-empty list")
        if not all(isinstance(v, str) and _UID.fullmatch(v) for v in value):
            self.fail(key, "must hold 32-character lowercase hex uids")
        if value != sorted(set(value)):
            self.fail(key, "must be sorted and free of repeats")
        return tuple(value)


def parse_candidate(data: object, label: str = "candidate") -> Candidate:
    """A candidate object (a queue file or one entry of a record)."""
    obj = _Object(data, CANDIDATE_KEYS, label)
    uid, session = obj.match("uid", _UID), obj.text("session_id")
    # A session id names a directory on the devices that read it: one safe path segment.
    if session != session.strip() or session in {"", ".", ".."} or {"/", "\\"} & set(session):
        obj.fail("session_id", "must be one non-blank path segment")
    display, message = obj.count("display_id", 1), obj.text("message")
    if not message.strip():
        obj.fail("message", "must not be blank")
    return Candidate(uid, session, display, message, obj.utc("submitted_at"))


def _parse_lease(data: object) -> Batch:
    obj = _Object(data, LEASE_KEYS, "lease")
    for key, pattern in (("holder", _UID), ("token", _UID), ("base_commit", _OID)):
        obj.match(key, pattern)
    # Only the expiry's form is checked: whether it has passed depends on the clock.
    obj.utc("expires_at")
    return Batch(obj.match("batch_id", _BATCH), obj.uids("candidate_uids"))


def _parse_recovery(data: object) -> Batch:
    obj = _Object(data, RECOVERY_KEYS, "recovery")
    obj.count("attempts", 0)
    obj.match("reason_code", _REASON)
    manual = obj.data["manual_recovery"]
    if not isinstance(manual, bool):
        obj.fail("manual_recovery", "must be true or false")
    if manual and obj.data["retry_at"] is not None:
        obj.fail("retry_at", "must be null when manual_recovery is true")
    if not manual:
        obj.utc("retry_at")
    return Batch(obj.match("batch_id", _BATCH), obj.uids("candidate_uids"))


def _parse_record(data: object) -> Batch:
    obj = _Object(data, RECORD_KEYS, "record")
    operation, raw = obj.text("operation_id"), obj.data["candidates"]
    if not isinstance(raw, list) or not raw:
        obj.fail("candidates", "must be a non-empty list")
    try:
        found = [parse_candidate(item, f"candidate {n}") for n, item in enumerate(raw, 1)]
    except QueueFormatError as exc:
        raise QueueFormatError(f"record {exc.message}", "candidates") from None
    if len({c.uid for c in found}) != len(found):
        obj.fail("candidates", "repeat a uid")
    # The reference fixes no order for a record's candidates, and the batch hash sorts them.
    if operation != batch_id(found):
        obj.fail("operation_id", "is not the batch id of its candidates")
    return Batch(operation, tuple(sorted(c.uid for c in found)))


def _skip(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t\n\r":
        pos += 1
    return pos


def _line(text: str, key: str | None, *, repeated: bool = False) -> int | None:
    """The line of top-level `key` (of its second use when `repeated`); best effort."""
    decoder, pos, line, counted = json.JSONDecoder(), _skip(text, 0), 1, 0
    seen = 0
    try:
        while key is not None and text[pos : pos + 1] in ("{", ","):
            name, end = decoder.raw_decode(text, _skip(text, pos + 1))
            line, counted = line + text.count("\n", counted, end), end
            if name == key:
                seen += 1
                if seen == 2 or not repeated:
                    return line
            pos = _skip(text, end)
            if not isinstance(name, str) or text[pos : pos + 1] != ":":
                break
            pos = _skip(text, decoder.raw_decode(text, _skip(text, pos + 1))[1])
    except (ValueError, RecursionError):
        pass
    return None


@dataclass(frozen=True)
class _Loaded(Generic[T]):
    """A file of the queue, read and parsed."""

    path: str
    text: str
    value: T


class _Checker:
    """Loads files of one kind and collects their problems under one code."""

    def __init__(self, tree: TreeView, code: str) -> None:
        self.tree, self.code, self.problems = tree, code, list[Problem]()

    def add(self, loaded: _Loaded[T], key: str, message: str) -> None:
        self.problems.append(Problem(self.code, loaded.path, _line(loaded.text, key), message))

    def load(self, path: str, parse: Callable[[object], T]) -> _Loaded[T] | None:
        """The parsed file; None when it is broken (with a problem, unless the path or byte
        rules own it: a file that is not regular, or not UTF-8)."""
        entry = self.tree.get(path)
        if entry is None or not entry.is_regular:
            return None
        try:
            text = self.tree.content(path).decode("utf-8")
        except (KeyError, UnicodeDecodeError):
            return None
        line: int | None = None
        try:
            return _Loaded(path, text, parse(load_strict_json(text)))
        except QueueFormatError as exc:
            line, message = _line(text, exc.key, repeated=exc.repeated), exc.message
        except json.JSONDecodeError as exc:
            line, message = exc.lineno, f"invalid JSON: {exc.msg}"
        except (ValueError, RecursionError) as exc:  # over-long integers, absurd nesting
            message = f"invalid JSON: {exc}"
        self.problems.append(Problem(self.code, path, line, message))
        return None


def check_queue(tree: TreeView, paths: Sequence[str] | None = None) -> list[Problem]:
    """`queue-invalid` problems of `update_queue/`: each file, then the references between them.
    `paths`: `queue_paths(tree)` when the caller has it.

    A reference to a candidate whose file exists but is itself broken is not reported again.
    """
    listed = queue_paths(tree) if paths is None else paths
    names = {p: m.group(1) for p in listed if (m := CANDIDATE_PATH.fullmatch(p))}
    recovery_paths = [p for p in listed if RECOVERY_PATH.fullmatch(p)]
    tree.preload([*names, *recovery_paths, LEASE_PATH])
    check = _Checker(tree, "queue-invalid")
    candidates: dict[str, Candidate] = {}
    for path, uid in names.items():
        found = check.load(path, parse_candidate)
        if found is not None and found.value.uid != uid:
            check.add(found, "uid", "uid differs from the file name")
        elif found is not None:
            candidates[uid] = found.value
    broken = set(names.values()) - candidates.keys()

    def batch(path: str, parse: Callable[[object], Batch]) -> _Loaded[Batch] | None:
        found = check.load(path, parse)
        if found is None:
            return None
        wanted, uids = found.value.batch_id, found.value.candidate_uids
        if path not in (LEASE_PATH, f"update_queue/recovery/{wanted}.json"):
            check.add(found, "batch_id", "batch_id differs from the file name")
            return None
        missing = [u for u in uids if u not in candidates and u not in broken]
        if missing:
            check.add(found, "candidate_uids", f"names missing candidate(s) {', '.join(missing)}")
        elif not broken & set(uids) and batch_id(candidates[u] for u in uids) != wanted:
            check.add(found, "batch_id", "batch_id is not the batch id of the named candidates")
        return found

    owner: dict[str, str] = {}  # candidate uid -> the recovery batch that holds it
    recoveries: dict[str, Batch] = {}
    for path in recovery_paths:
        recovery = batch(path, _parse_recovery)
        if recovery is None:
            continue
        recoveries[recovery.value.batch_id] = recovery.value
        for uid in recovery.value.candidate_uids:
            first = owner.setdefault(uid, recovery.value.batch_id)
            if first != recovery.value.batch_id:
                check.add(recovery, "candidate_uids", f"candidate {uid} is also in {first}")
    lease = batch(LEASE_PATH, _parse_lease)
    if lease is not None:
        mine, uids = lease.value.batch_id, lease.value.candidate_uids
        others = sorted({owner[u] for u in uids if owner.get(u, mine) != mine})
        if others:
            check.add(lease, "candidate_uids", f"candidates also in recovery {', '.join(others)}")
        same = recoveries.get(mine)
        if same is not None and same.candidate_uids != uids:
            check.add(lease, "candidate_uids", "candidates differ from the recovery of this batch")
    return check.problems


def check_records(tree: TreeView, listed: Sequence[str] | None = None) -> list[Problem]:
    """`records-invalid` problems of `update_records/update-batch-<sha256>.json` files.
    `listed`: `queue_paths(tree)` when the caller has it."""
    listed = queue_paths(tree) if listed is None else listed
    paths = [p for p in listed if RECORD_PATH.fullmatch(p)]
    tree.preload(paths)
    check = _Checker(tree, "records-invalid")
    for path in paths:
        found = check.load(path, _parse_record)
        if found is not None and path != f"update_records/{found.value.batch_id}.json":
            check.add(found, "operation_id", "operation_id differs from the file name")
    return check.problems
