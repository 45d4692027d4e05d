"""An openai role's answers (validated, typed, explained) and the command executor's pure
parts: argv substitution, the clean environment, the run record."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.cycles.answers import (
    TITLE_MAX,
    AnswerError,
    InsightNoop,
    InsightWrite,
    PruneCheckpoint,
    PruneRemove,
    parse_answer,
)
from memsync.cycles.command import BASE_ENV, command_argv, role_env
from memsync.cycles.promptkit import Kind
from memsync.cycles.runrecord import ExecutorFailed, FailureKind, RunRecord


def problem(kind: Kind, text: str, known: set[str] | None = None) -> str:
    with pytest.raises(AnswerError) as raised:
        parse_answer(kind, text, known)
    return str(raised.value)


def test_valid_answers_become_typed_proposals() -> None:
    write = '{"action": "write", "title": "Deploys cluster", "content": "Prose.\\n"}'
    assert parse_answer("insight", write) == InsightWrite("Deploys cluster", "Prose.")
    noop = '{"action": "noop", "reason": "quiet week"}'
    assert parse_answer("insight", noop) == InsightNoop("quiet week")
    remove = '{"action": "remove", "remove": ["a", "b.c", "a"], "ledger": "Removed:\\n- `a`"}'
    assert parse_answer("prune", remove) == PruneRemove(("a", "b.c"), "Removed:\n- `a`")
    checkpoint = '{"action": "checkpoint", "ledger": ""}'
    assert parse_answer("prune", checkpoint) == PruneCheckpoint("")


def test_think_blocks_fences_and_extra_keys_are_tolerated() -> None:
    text = (
        "<think>the user wants JSON</think>\n```json\n"
        '{"action": "noop", "reason": "nothing", "confidence": 0.2}\n```'
    )
    assert parse_answer("insight", text) == InsightNoop("nothing")


@pytest.mark.parametrize(
    ("kind", "text", "expected"),
    [
        ("insight", "", "the answer was empty"),
        ("insight", "Sure, here you go", "not usable JSON: Expecting value at line 1 column 1"),
        ("insight", "[1, 2]", "must be a JSON object, not list"),
        ("insight", '{"action": "noop", "action": "write"}', "'action' appear twice"),
        ("insight", '{"reason": "x"}', "action: must be 'write' or 'noop'"),
        ("insight", '{"action": "remove"}', "action: must be 'write' or 'noop'"),
        ("prune", '{"action": "write"}', "action: must be 'remove' or 'checkpoint'"),
        ("insight", '{"action": "write", "title": "t"}', "content: Field required"),
        ("insight", '{"action": "write", "title": 7, "content": "c"}', "title: Input should be"),
        ("insight", '{"action": "write", "title": "a\\nb", "content": "c"}', "one line"),
        ("insight", '{"action": "write", "title": "a\\u202eb", "content": "c"}', "printable"),
        ("insight", '{"action": "write", "title": "   ", "content": "c"}', "title: must not be"),
        ("insight", '{"action": "write", "title": "t", "content": " "}', "content: must not be"),
        ("insight", '{"action": "write", "title": "t", "content": "a\\u0000"}', "NUL"),
        ("prune", '{"action": "remove", "remove": [], "ledger": "l"}', "at least 1 item"),
        ("prune", '{"action": "remove", "remove": "a", "ledger": "l"}', "valid list"),
        ("prune", '{"action": "remove", "remove": ["F#a"], "ledger": "l"}', "no kind prefix"),
        ("prune", '{"action": "remove", "remove": ["a"], "ledger": ""}', "ledger: must not be"),
    ],
)
def test_unusable_answers_are_explained(kind: Kind, text: str, expected: str) -> None:
    assert expected in problem(kind, text)


def test_a_long_title_is_refused_and_an_insight_prefix_dropped() -> None:
    long = json.dumps({"action": "write", "title": "t" * (TITLE_MAX + 1), "content": "c"})
    assert f"at most {TITLE_MAX}" in problem("insight", long)
    named = '{"action": "write", "title": "insight: Deploys", "content": "c"}'
    assert parse_answer("insight", named) == InsightWrite("Deploys", "c")


def test_known_ids_make_an_unknown_id_unusable() -> None:
    text = '{"action": "remove", "remove": ["kept", "ghost"], "ledger": "Removed:"}'
    assert "'ghost'" in problem("prune", text, {"kept"})
    assert parse_answer("prune", text, {"kept", "ghost"}) == PruneRemove(
        ("kept", "ghost"), "Removed:"
    )


def proposal_or_reason(kind: Kind, text: str, known: set[str] | None = None) -> None:
    """Whatever a model sends: a proposal of the asked kind, or an AnswerError saying why."""
    try:
        got = parse_answer(kind, text, known)
    except AnswerError as exc:
        assert str(exc)
        return
    allowed = (InsightWrite, InsightNoop) if kind == "insight" else (PruneRemove, PruneCheckpoint)
    assert isinstance(got, allowed)


@given(st.text(max_size=200))
def test_any_text_is_a_proposal_or_an_answer_error(text: str) -> None:
    for kind in ("insight", "prune"):
        proposal_or_reason(kind, text)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)


@given(
    st.fixed_dictionaries(
        {"action": st.sampled_from(["write", "noop", "remove", "checkpoint", "x"])},
        optional={
            "title": json_values,
            "content": json_values,
            "reason": json_values,
            "remove": json_values,
            "ledger": json_values,
        },
    )
)
def test_any_json_object_is_a_proposal_or_an_answer_error(value: dict[str, object]) -> None:
    for kind in ("insight", "prune"):
        proposal_or_reason(kind, json.dumps(value), {"a"})


def test_proposals_name_their_commit_and_file() -> None:
    write = InsightWrite("Deploys cluster", "Prose.")
    assert write.subject == "insight: Deploys cluster" and write.text == "Prose.\n"
    when = datetime(2026, 11, 30, 21, 5, 9, tzinfo=timezone(timedelta(hours=2)))
    assert InsightWrite.log_path(when) == "insight_logs/2026-11-30-190509.md"
    assert InsightWrite.log_path(when.astimezone(UTC)) == "insight_logs/2026-11-30-190509.md"
    remove = PruneRemove(("a",), "Removed:\n- `a` stale")
    assert remove.message == "prune: expired active memory\n\nRemoved:\n- `a` stale\n"
    assert PruneCheckpoint("").message == "prune: checkpoint\n"
    assert PruneCheckpoint("Removed:\n- none").message == "prune: checkpoint\n\nRemoved:\n- none\n"


# -- the command executor's pure parts --------------------------------------------------------


@given(st.lists(st.text(max_size=30), max_size=6))
def test_arguments_that_are_not_a_whole_template_pass_unchanged(argv: list[str]) -> None:
    values = {"{prompt_file}": "/p", "{worktree}": "/w", "{role}": "r"}
    got = command_argv(argv, values)
    assert got == [values.get(arg, arg) for arg in argv]
    assert all(a == b for a, b in zip(argv, got, strict=True) if a not in values)


def test_the_role_env_is_the_base_plus_memsync_variables_only() -> None:
    daemon = {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "LANG": "C.UTF-8",
        "OPENAI_API_KEY": "sk-daemon",
        "AWS_SECRET_ACCESS_KEY": "aws",
        "GIT_DIR": "/elsewhere/.git",
        "CREDENTIALS_DIRECTORY": "/run/credentials/memsync.service",
    }
    env = role_env(
        role="pruner",
        worktree=Path("/w"),
        prompt_file=Path("/s/prompt.md"),
        operation_id="op",
        environ=daemon,
    )
    assert env == {
        "PATH": "/usr/bin",
        "HOME": "/home/me",
        "LANG": "C.UTF-8",
        "MEMSYNC_ROLE": "pruner",
        "MEMSYNC_WORKTREE": "/w",
        "MEMSYNC_PROMPT_FILE": "/s/prompt.md",
        "MEMSYNC_OPERATION_ID": "op",
    }
    assert not any("SECRET" in name or "KEY" in name or "TOKEN" in name for name in BASE_ENV)


def test_a_record_summarises_in_one_line_and_serialises() -> None:
    record = RunRecord("insight", "openai", "op", 1234, "ok", http_status=200, total_tokens=150)
    assert (
        record.summary() == "role insight (openai) ok: HTTP 200, 1234 ms, 1 attempt(s), 150 tokens"
    )
    assert json.loads(json.dumps(record.as_dict()))["total_tokens"] == 150
    command = RunRecord("pruner", "command", "op", 5, "exit-status", exit_status=2)
    assert command.summary() == "role pruner (command) exit-status: exit 2, 5 ms, 1 attempt(s)"


@pytest.mark.parametrize(
    ("kind", "status", "transient"),
    [
        (FailureKind.TIMEOUT, None, True),
        (FailureKind.CONNECTION, None, True),
        (FailureKind.HTTP_STATUS, 503, True),
        (FailureKind.HTTP_STATUS, 429, True),
        (FailureKind.HTTP_STATUS, 401, False),
        (FailureKind.MALFORMED, 200, False),
        (FailureKind.EXIT_STATUS, None, False),
    ],
)
def test_which_failures_are_worth_retrying_later(
    kind: FailureKind, status: int | None, transient: bool
) -> None:
    record = RunRecord("r", "openai", "op", 1, kind.value, http_status=status)
    assert ExecutorFailed(kind, "m", record=record).transient is transient
