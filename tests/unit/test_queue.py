"""The update queue (lease, candidates, recovery) and update records: strict JSON shapes."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.problems import Problem
from memsync.validators.queue import Candidate, batch_id, check_queue, check_records
from memsync.validators.tree import MODE_SYMLINK, Entry, TreeView

U1, U2, U3 = "1" * 32, "2" * 32, "3" * 32
WHEN = "2026-01-05T10:00:00+00:00"
LEASE = "update_queue/lease.json"


def cand(uid: str, /, **changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "schema_version": 1,
        "uid": uid,
        "session_id": "session-a",
        "display_id": int(uid[0]),
        "message": f"update {uid[0]}",
        "submitted_at": WHEN,
    }
    return {**data, **changes}


def bid(*uids: str) -> str:
    found = [
        Candidate(u, "session-a", int(u[0]), f"update {u[0]}", WHEN) for u in uids
    ]  # the same values `cand` writes
    return batch_id(found)


def lease(*uids: str, **changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "schema_version": 1,
        "holder": "a" * 32,
        "token": "b" * 32,
        "base_commit": "c" * 40,
        "batch_id": bid(*uids),
        "candidate_uids": list(uids),
        "expires_at": "2026-01-05T16:00:00+00:00",
    }
    return {**data, **changes}


def recovery(*uids: str, **changes: object) -> dict[str, object]:
    data: dict[str, object] = {
        "schema_version": 1,
        "batch_id": bid(*uids),
        "candidate_uids": list(uids),
        "attempts": 2,
        "reason_code": "push_rejected",
        "retry_at": "2026-01-05T11:00:00+00:00",
        "manual_recovery": False,
    }
    return {**data, **changes}


def record(*uids: str, **changes: object) -> dict[str, object]:
    data = {"schema_version": 1, "operation_id": bid(*uids), "candidates": [cand(u) for u in uids]}
    return {**data, **changes}


def dump(value: object) -> bytes:
    return (json.dumps(value, indent=2, sort_keys=True) + "\n").encode()


def candidate_path(uid: str) -> str:
    return f"update_queue/candidates/{uid}.json"


def recovery_path(batch: str) -> str:
    return f"update_queue/recovery/{batch}.json"


def record_path(batch: str) -> str:
    return f"update_records/{batch}.json"


def good_files() -> dict[str, bytes]:
    return {
        candidate_path(U1): dump(cand(U1)),
        candidate_path(U2): dump(cand(U2)),
        candidate_path(U3): dump(cand(U3)),
        LEASE: dump(lease(U1)),
        recovery_path(bid(U2, U3)): dump(recovery(U2, U3)),
        record_path(bid(U1, U2)): dump(record(U1, U2)),
    }


def queue(changes: Mapping[str, bytes | None]) -> list[Problem]:
    files = {**good_files(), **changes}
    return check_queue(TreeView.from_bytes({p: b for p, b in files.items() if b is not None}))


def records(changes: Mapping[str, bytes | None]) -> list[Problem]:
    files = {**good_files(), **changes}
    return check_records(TreeView.from_bytes({p: b for p, b in files.items() if b is not None}))


def found(problems: list[Problem]) -> list[tuple[str, str | None]]:
    return [(p.code, p.path) for p in problems]


def test_valid_queue_and_records_are_clean() -> None:
    assert queue({}) == []
    assert records({}) == []
    assert check_queue(TreeView({})) == [] and check_records(TreeView({})) == []


def test_batch_id_is_the_hash_of_the_canonical_job_list() -> None:
    # Written out by hand: peers recompute this identity, so its form must not drift.
    canonical = (
        '[{"jobs":[{"candidate_uid":"' + U1 + '","id":1,"message":"update 1",'
        '"submitted_at":"' + WHEN + '"},{"candidate_uid":"' + U2 + '","id":2,'
        '"message":"update 2","submitted_at":"' + WHEN + '"}],"session_id":"session-a"}]'
    )
    expected = "update-batch-" + hashlib.sha256(canonical.encode()).hexdigest()
    assert bid(U1, U2) == bid(U2, U1) == expected
    other = Candidate(U1, "session-b", 1, "update 1", WHEN)
    assert batch_id([other]) != bid(U1)


@pytest.mark.parametrize(
    "changes",
    [
        {"schema_version": 2},
        {"schema_version": True},
        {"schema_version": "1"},
        {"uid": "A" * 32},
        {"session_id": ""},
        {"session_id": " session-a"},
        {"session_id": "."},
        {"session_id": "a/b"},
        {"session_id": "a\\b"},
        {"session_id": 7},
        {"display_id": 0},
        {"display_id": True},
        {"display_id": 1.0},
        {"message": "   "},
        {"message": None},
        {"submitted_at": "2026-01-05T10:00:00Z"},
        {"submitted_at": "2026-01-05T10:00:00"},
        {"submitted_at": "2026-01-05T11:00:00+01:00"},
        {"submitted_at": "soon"},
        {"extra": 1},
    ],
)
def test_candidate_values(changes: dict[str, object]) -> None:
    assert found(queue({candidate_path(U1): dump(cand(U1, **changes))})) == [
        ("queue-invalid", candidate_path(U1))
    ]


def test_candidate_missing_key_and_wrong_name() -> None:
    data = cand(U1)
    del data["message"]
    assert found(queue({candidate_path(U1): dump(data)})) == [("queue-invalid", candidate_path(U1))]
    problems = queue({candidate_path(U1): dump(cand(U3))})
    assert found(problems) == [("queue-invalid", candidate_path(U1))]
    assert problems[0].line == 7  # the "uid" line of the sorted, indented object


def test_field_problems_carry_the_line_of_their_key() -> None:
    problems = queue({candidate_path(U1): dump(cand(U1, display_id=-1))})
    assert [p.line for p in problems] == [2]  # "display_id" sorts first


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('{\n  "uid": "x",\n  "uid": "y"\n}\n', 3),
        ('{\n  "a": NaN\n}\n', None),
        ('{\n  "a": Infinity\n}\n', None),
        ('{\n  "a": 1,\n  oops\n}\n', 3),
        ("[]\n", None),
        ("", 1),
        ('{"a": ' + "1" * 5000 + "}", None),
        ("[" * 100_000, None),
    ],
)
def test_strict_json(text: str, line: int | None) -> None:
    problems = queue({candidate_path(U1): text.encode()})
    assert [(p.code, p.path, p.line) for p in problems] == [
        ("queue-invalid", candidate_path(U1), line)
    ]


def test_unpaired_surrogate_is_refused() -> None:
    text = dump(cand(U1)).replace(b"update 1", b"update \\ud800")
    assert found(queue({candidate_path(U1): text})) == [("queue-invalid", candidate_path(U1))]


def test_unreadable_files_are_left_to_the_path_rules() -> None:
    files = {**good_files(), candidate_path(U1): b"\xff\xfe"}
    tree = TreeView.from_bytes(files)
    # The lease names U1, whose file is broken: the lease is not blamed for it.
    assert check_queue(tree) == []
    entries = {p: Entry(0o100644, len(b), data=b) for p, b in good_files().items()}
    entries[LEASE] = Entry(MODE_SYMLINK, 3, data=b"../x")
    assert check_queue(TreeView(entries)) == []


@pytest.mark.parametrize(
    "changes",
    [
        {"holder": "A" * 32},
        {"token": "b" * 31},
        {"base_commit": "c" * 39},
        {"base_commit": "C" * 40},
        {"batch_id": "update-batch-xyz"},
        {"candidate_uids": []},
        {"candidate_uids": "not a list"},
        {"candidate_uids": [U1, U1]},
        {"candidate_uids": ["nope"]},
        {"expires_at": "2026-01-05"},
        {"schema_version": 0},
    ],
)
def test_lease_values(changes: dict[str, object]) -> None:
    assert found(queue({LEASE: dump(lease(U1, **changes))})) == [("queue-invalid", LEASE)]


def test_lease_accepts_sha256_commits() -> None:
    assert queue({LEASE: dump(lease(U1, base_commit="d" * 64))}) == []


def test_lease_references() -> None:
    missing = queue({candidate_path(U1): None})
    assert found(missing) == [("queue-invalid", LEASE)]
    assert U1 in missing[0].message
    wrong = queue({LEASE: dump(lease(U1, batch_id=bid(U2)))})
    assert found(wrong) == [("queue-invalid", LEASE)]
    assert wrong[0].line == 3  # the "batch_id" key
    unsorted = dump(lease(U1, U2, candidate_uids=[U2, U1]))
    assert found(queue({LEASE: unsorted})) == [("queue-invalid", LEASE)]


def test_lease_may_not_take_candidates_of_another_recovery() -> None:
    problems = queue({LEASE: dump(lease(U2))})
    assert found(problems) == [("queue-invalid", LEASE)]
    assert "recovery" in problems[0].message
    # The lease of the recovery's own batch is fine.
    assert queue({LEASE: dump(lease(U2, U3))}) == []


@pytest.mark.parametrize(
    "changes",
    [
        {"attempts": -1},
        {"attempts": "2"},
        {"reason_code": "Push"},
        {"reason_code": "x" * 65},
        {"reason_code": "1abc"},
        {"manual_recovery": "no"},
        {"manual_recovery": True},
        {"retry_at": None},
        {"retry_at": "later"},
    ],
)
def test_recovery_values(changes: dict[str, object]) -> None:
    path = recovery_path(bid(U2, U3))
    assert found(queue({path: dump(recovery(U2, U3, **changes))})) == [("queue-invalid", path)]


def test_manual_recovery_has_no_retry_time() -> None:
    path = recovery_path(bid(U2, U3))
    manual = recovery(U2, U3, manual_recovery=True, retry_at=None, attempts=0)
    assert queue({path: dump(manual)}) == []


def test_recovery_name_and_references() -> None:
    path = recovery_path(bid(U2, U3))
    renamed = recovery_path("update-batch-" + "0" * 64)
    assert found(queue({path: None, renamed: dump(recovery(U2, U3))})) == [
        ("queue-invalid", renamed)
    ]
    missing = queue({candidate_path(U3): None})
    assert found(missing) == [("queue-invalid", path)]
    mismatch = queue({path: None, recovery_path(bid(U2)): dump(recovery(U2, batch_id=bid(U2, U3)))})
    assert found(mismatch) == [("queue-invalid", recovery_path(bid(U2)))]


def test_a_candidate_belongs_to_one_recovery() -> None:
    second = recovery_path(bid(U3))
    problems = queue({second: dump(recovery(U3))})
    paths = {p.path for p in problems}
    assert [p.code for p in problems] == ["queue-invalid"]
    assert paths <= {second, recovery_path(bid(U2, U3))}


@pytest.mark.parametrize(
    "changes",
    [
        {"schema_version": 2},
        {"operation_id": 5},
        {"operation_id": bid(U1)},
        {"candidates": []},
        {"candidates": {}},
        {"candidates": [cand(U1), cand(U1)]},
        {"candidates": [cand(U1), cand(U2, display_id=0)]},
        {"extra": True},
    ],
)
def test_record_values(changes: dict[str, object]) -> None:
    path = record_path(bid(U1, U2))
    assert found(records({path: dump(record(U1, U2, **changes))})) == [("records-invalid", path)]


def test_record_name_must_be_its_operation_id() -> None:
    wrong = record_path(bid(U3))
    problems = records({wrong: dump(record(U1, U2))})
    assert found(problems) == [("records-invalid", wrong)]
    assert problems[0].line is not None


def test_record_candidate_order_is_free() -> None:
    path = record_path(bid(U1, U2))
    reordered = record(U1, U2, candidates=[cand(U2), cand(U1)])
    assert records({path: dump(reordered)}) == []


def test_records_do_not_need_queue_candidates() -> None:
    only = {record_path(bid(U1, U2)): dump(record(U1, U2))}
    assert check_records(TreeView.from_bytes(only)) == []


json_st = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
PATHS = [candidate_path(U1), LEASE, recovery_path(bid(U2, U3)), record_path(bid(U1, U2))]


@given(st.sampled_from(PATHS), json_st)
def test_arbitrary_json_never_crashes(path: str, value: object) -> None:
    tree = TreeView.from_bytes({**good_files(), path: json.dumps(value).encode()})
    for problems in (check_queue(tree), check_records(tree)):
        assert isinstance(problems, list)
        assert {p.code for p in problems} <= {"queue-invalid", "records-invalid"}


@given(st.sampled_from(PATHS), st.sampled_from(sorted(cand(U1))), json_st)
def test_arbitrary_field_values_never_crash(path: str, key: str, value: object) -> None:
    data = cand(U1, **{key: value})
    tree = TreeView.from_bytes({**good_files(), path: dump(data)})
    assert isinstance(check_queue(tree), list) and isinstance(check_records(tree), list)


@given(st.sampled_from(PATHS), st.binary() | st.text().map(str.encode))
def test_arbitrary_bytes_never_crash(path: str, data: bytes) -> None:
    tree = TreeView.from_bytes({**good_files(), path: data})
    assert isinstance(check_queue(tree), list) and isinstance(check_records(tree), list)
