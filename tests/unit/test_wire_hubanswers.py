"""The hub's plain answers (`wire.hubanswers`) are `wire.hub`'s models' documents: for every
value, the bytes the model would dump, or the model's own refusal (issue 18: a hub starts
without pydantic, and not one byte of an answer changed)."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from memsync.validators.problems import Problem
from memsync.wire import hub as wire
from memsync.wire import hubanswers as answers
from memsync.wire.problem import ProblemModel
from tests.unit.test_wire_documents import INTS, OPTIONAL, TEXT, outcome

HEX = "0123456789abcdef"
SHA256 = st.text(HEX, min_size=64, max_size=64)
COMMITS = st.text(HEX, min_size=40, max_size=40) | SHA256
NAMES = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}", fullmatch=True)
# Valid values mostly, and now and then one a model refuses (or coerces: a bool, a float).
ODD = TEXT | st.booleans() | st.floats(allow_nan=False) | INTS | st.none()
VIEW_IDS = NAMES | NAMES.map(lambda n: n + "\n") | ODD
SHAS = SHA256 | SHA256.map(str.upper) | SHA256.map(lambda s: s + "\n") | ODD
REVISIONS = INTS | ODD
COMMIT_VALUES = COMMITS | COMMITS.map(lambda c: c + "\n") | COMMITS.map(str.upper) | ODD
problems = st.builds(Problem, TEXT, OPTIONAL, st.none() | INTS, TEXT)


def dumped(model: Any, *, unset: bool = True) -> bytes:
    return bytes(model.model_dump_json(exclude_unset=unset).encode())


@given(TEXT, TEXT, st.lists(problems, max_size=2))
def test_an_error_body_is_the_models(code: str, message: str, found: list[Problem]) -> None:
    def model() -> bytes:
        error = wire.ErrorDetail(code=code, message=message)
        if found:
            return dumped(wire.ErrorBody(error=error, problems=[ProblemModel.of(p) for p in found]))
        return dumped(wire.ErrorBody(error=error))

    assert outcome(lambda: answers.error_body(code, message, found)) == outcome(model)


def test_health_is_the_models() -> None:
    assert dumped(wire.Health(status="ok")) == answers.HEALTH


@given(st.lists(st.tuples(VIEW_IDS, REVISIONS, TEXT, TEXT, SHAS, REVISIONS, TEXT), max_size=3))
@example([("v", 1, "p", "e", "a" * 64 + "\n", 2, "x")])
@example([("v\n", 1, "p", "e", "a" * 64, 2, "x"), ("w", 1, "p", "e", "a" * 64, 2, "x")])
@example([("v", 1, "p", "e", "a" * 64, False, "x")])
def test_a_view_list_is_the_models(entries: list[tuple[Any, ...]]) -> None:
    fields = ("view_id", "revision", "published_at", "expires", "sha256", "length")
    named = [dict(zip((*fields, "manifest_etag"), entry, strict=True)) for entry in entries]

    def plain() -> bytes:
        return answers.view_list([answers.view_entry(*entry) for entry in entries])

    def model() -> bytes:
        return dumped(wire.ViewList(views=[wire.ViewEntry(**e) for e in named]))

    assert outcome(plain) == outcome(model)


@given(st.sampled_from(["created", "unchanged", "other"]), VIEW_IDS, REVISIONS, SHAS)
@example("created", "v", 1, "a" * 64 + "\n")
@example("unchanged", "v\n", 1, "a" * 64)
@example("other", "v", 1, "a" * 64)
def test_a_publish_result_is_the_models(status: str, view_id: Any, revision: Any, sha: Any) -> None:
    def model() -> bytes:
        return dumped(
            wire.PublishResult(status=status, view_id=view_id, revision=revision, sha256=sha)  # type: ignore[arg-type]
        )

    plain = outcome(lambda: answers.publish_result(status, view_id, revision, sha))
    assert plain == outcome(model)


@given(TEXT | ODD, COMMIT_VALUES)
def test_notices_and_upstream_events_are_the_models(root: Any, commit: Any) -> None:
    accepted = outcome(lambda: dumped(wire.NotifyAccepted(root=root, commit=commit)))
    assert outcome(lambda: answers.notify_accepted(root, commit)) == accepted
    event = outcome(lambda: dumped(wire.UpstreamEvent(root=root, commit=commit), unset=False))
    assert outcome(lambda: answers.upstream_event(root, commit)) == event


@given(VIEW_IDS, REVISIONS, SHAS)
@example("v", 1, "a" * 64 + "\n")
@example("v\n", 1, "a" * 64)
@example("v", True, "a" * 64)
@example("v", 2**64, "a" * 64)
def test_a_revision_event_is_the_models(view_id: Any, revision: Any, sha: Any) -> None:
    def model() -> bytes:
        event = wire.RevisionEvent(view_id=view_id, revision=revision, sha256=sha)
        return dumped(event, unset=False)

    assert outcome(lambda: answers.revision_event(view_id, revision, sha)) == outcome(model)


SPACE = st.text(" \t\n\r", max_size=2) | st.text(" \t\n\r\x0b\x0c\xa0\u2028", max_size=2)
PLAIN_BODIES = st.builds(
    lambda s, key, commit: f'{s[0]}{{{s[1]}"{key}"{s[2]}:{s[3]}"{commit}"{s[4]}}}{s[5]}',
    st.lists(SPACE, min_size=6, max_size=6),
    st.sampled_from(["commit", "commit", "Commit", "commit ", "\\u0063ommit"]),
    COMMITS | COMMITS.map(str.upper) | COMMITS.map(lambda c: c[:-1] + "\\u0061") | TEXT,
).map(lambda text: text.encode("utf-8", "surrogatepass"))
BODIES = (
    PLAIN_BODIES
    | PLAIN_BODIES.map(lambda b: b.replace(b"}", b',"x":1}'))
    | PLAIN_BODIES.map(lambda b: b"\xef\xbb\xbf" + b)
    | PLAIN_BODIES.map(lambda b: b.replace(b"{", b'{"commit":"a",', 1))
    | st.binary(max_size=80)
)


@given(BODIES)
@example(b'{"commit":"' + b"a" * 40 + b'"}')
@example(b'{"commit":"' + b"a" * 40 + b'","commit":"' + b"b" * 40 + b'"}')
@example(b"[" * 3000 + b"]" * 3000)
@example(b'{"commit":"' + b"A" * 40 + b'"}')
@example(b'{"commit":"' + b"a" * 40 + b'"}\x0c')
@example(b'{"commit":"' + b"a" * 40 + b'"}\n')
@example(b'{"commit":"' + b"a" * 41 + b'"}')
def test_a_notify_body_is_read_as_the_model_reads_it(body: bytes) -> None:
    def model() -> str | None:
        try:
            return wire.NotifyBody.model_validate_json(body).commit
        except ValueError:
            return None

    assert answers.notify_commit(body) == model()
