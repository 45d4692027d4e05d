"""The cycle run log: one JSON line per executor call (command and openai) under the root's
state dir, with durations, outcomes and the API's token counts; never a secret; bounded."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from memsync.config.model import Settings
from memsync.config.sections import CommandRoleSettings, OpenAIRoleSettings
from memsync.cycles.runlog import RunLog
from memsync.cycles.runner import cycle_now
from memsync.cycles.runrecord import RunRecord
from memsync.secrets import SecretRef
from tests.conftest import Team
from tests.fakes.chat_server import (
    USAGE,
    ChatServer,
    ChatState,
    Reply,
    answer,
    chat_server_thread,
    error,
)
from tests.helpers import snapshot

KEY = "sk-runlog-secret-key-0123456789abcdef"


@pytest.fixture
def provider() -> Iterator[ChatServer]:
    with chat_server_thread(ChatState()) as server:
        yield server


def settings(team: Team, role: CommandRoleSettings | OpenAIRoleSettings) -> Settings:
    root = replace(team.bob.settings, insight_enabled=True, insight_role=role.name, push=False)
    return Settings(
        state_dir=team.bob.state_dir,
        control_socket=team.bob.state_dir / "control.sock",
        roots=(root,),
        config_path=None,
        roles={role.name: role},
    )


def lines(team: Team) -> list[dict[str, object]]:
    return RunLog.for_root(team.bob.state_dir, "bob", "insight").read()


def openai(provider: ChatServer) -> OpenAIRoleSettings:
    return OpenAIRoleSettings(
        "insight",
        provider.base_url,
        "m",
        SecretRef.parse({"value": KEY}),
        timedelta(seconds=20),
    )


def test_an_openai_call_logs_duration_and_token_counts(team: Team, provider: ChatServer) -> None:
    provider.state.script(answer({"action": "write", "title": "Shape", "content": "It holds."}))
    result = cycle_now(settings(team, openai(provider)), "bob", "insight", force=True)
    assert result.status == "landed", result.message
    [line] = lines(team)
    assert line["root"] == "bob" and line["cycle"] == "insight"
    assert line["executor"] == "openai" and line["role"] == "insight"
    assert line["operation_id"] == result.operation_id
    assert line["outcome"] == "ok" and line["http_status"] == 200 and line["attempts"] == 1
    assert isinstance(line["duration_ms"], int) and line["duration_ms"] >= 0
    assert (line["prompt_tokens"], line["completion_tokens"], line["total_tokens"]) == (
        USAGE["prompt_tokens"],
        USAGE["completion_tokens"],
        USAGE["total_tokens"],
    )
    assert isinstance(line["output_bytes"], int) and line["output_bytes"] > 0
    assert isinstance(line["time"], str) and line["time"].endswith("Z")


def test_a_key_the_provider_echoes_never_reaches_the_log(team: Team, provider: ChatServer) -> None:
    provider.state.script(
        error(401, f"invalid key {KEY} for https://user:{KEY}@api.example/v1"),
    )
    result = cycle_now(settings(team, openai(provider)), "bob", "insight", force=True)
    assert result.status == "failed"
    assert provider.state.requests[0].authorization == f"Bearer {KEY}"  # it was sent
    [line] = lines(team)
    assert line["outcome"] == "http-status" and line["http_status"] == 401
    assert "invalid key" in str(line["message"])
    for path in team.bob.state_dir.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), path
    assert KEY not in result.message


DEEP = "[" * 100_000  # Python's JSON parser recursed once per level: RecursionError, exit 3
NESTED_REPLIES = {
    "whole-body": (Reply(body=DEEP.encode()),),
    "inside-the-completion": (
        Reply(body=b'{"choices": [{"message": {"content": "x"}}], "usage": ' + DEEP.encode()),
    ),
    "closed-whole-body": (Reply(body=(DEEP + "]" * 100_000).encode()),),
    "message-content": (answer(DEEP), answer(DEEP + "]" * 100_000)),  # the retry, too
    "nested-answer-field": (answer('{"action": "write", "title": ' + DEEP),) * 2,
}


@pytest.mark.parametrize("where", sorted(NESTED_REPLIES))
def test_deeply_nested_json_fails_the_turn_with_a_reason_and_a_log_line(
    team: Team, provider: ChatServer, where: str
) -> None:
    provider.state.script(*NESTED_REPLIES[where])
    before = snapshot(team.bob.path)
    result = cycle_now(settings(team, openai(provider)), "bob", "insight", force=True)
    assert result.status == "failed", result.message
    assert "nested" in result.message and "levels deep" in result.message
    [line] = lines(team)
    assert line["outcome"] in ("protocol", "malformed")
    assert "levels deep" in str(line["message"])
    assert snapshot(team.bob.path) == before


def test_command_calls_log_their_exit_status_and_output_size(team: Team, tmp_path: Path) -> None:
    script = tmp_path / "agent.sh"
    script.write_text("#!/bin/sh\ncat > /dev/null\necho thinking\necho 'no luck' >&2\nexit 3\n")
    script.chmod(0o755)
    role = CommandRoleSettings("insight", (str(script),), timedelta(seconds=20))
    first = cycle_now(settings(team, role), "bob", "insight", force=True)
    assert first.status == "failed"
    script.write_text("#!/bin/sh\ncat > /dev/null\necho fine\n")  # a no-op that succeeds
    second = cycle_now(settings(team, role), "bob", "insight", force=True)
    assert second.status == "noop", second.message
    failed, ok = lines(team)
    assert failed["executor"] == "command" and failed["exit_status"] == 3
    assert failed["outcome"] == "exit-status" and "no luck" in str(failed["message"])
    assert failed["output_bytes"] == len("thinking\nno luck\n")
    assert ok["exit_status"] == 0 and ok["outcome"] == "ok"
    assert ok["total_tokens"] is None
    assert isinstance(ok["duration_ms"], int)


def test_the_log_is_bounded(tmp_path: Path) -> None:
    log = RunLog(tmp_path / "cycles.log", "r", "prune", max_bytes=4_000)
    record = RunRecord("pruner", "command", "op", 5, "ok", exit_status=0, message="x" * 200)
    for _ in range(100):
        log.write(record)
    assert (tmp_path / "cycles.log").stat().st_size <= 4_000
    assert (tmp_path / "cycles.log.1").stat().st_size <= 4_000
    assert all(json.loads(raw) for raw in (tmp_path / "cycles.log").read_text().splitlines())
