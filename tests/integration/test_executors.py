"""Role executors for real: agent commands as real process groups in real git worktrees,
and the openai executor against a loopback chat-completions fake with scripted answers."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from types import MappingProxyType

import pytest

from memsync.config.sections import CommandRoleSettings, OpenAIRoleSettings
from memsync.cycles.answers import InsightNoop, InsightWrite, PruneCheckpoint, PruneRemove
from memsync.cycles.chat import Answer, ask_openai, ask_openai_blocking
from memsync.cycles.command import BASE_ENV, OUTPUT_CAP, run_command, uncommitted_changes
from memsync.cycles.insightprompt import InsightInputs, insight_prompt
from memsync.cycles.promptkit import Kind, Prompt
from memsync.cycles.runrecord import ExecutorFailed, FailureKind, RunRecord
from memsync.errors import InternalError
from memsync.roots.create import init_root
from memsync.secrets import SecretRef
from memsync.transports.git import Git
from memsync.transports.process import Deadline
from memsync.validators.grants import check_grants
from tests.fakes.chat_server import (
    ChatServer,
    ChatState,
    Reply,
    answer,
    chat_server_thread,
    error,
    hang,
    serve_chat,
)
from tests.helpers import commit, git, wait_for

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"
KEY = "sk-test-4f1c0ffee-do-not-log-me"
KEY_ENV = "MEMSYNC_TEST_OPENAI_KEY"
KEYS = MappingProxyType({KEY_ENV: KEY})  # the environment the key is resolved from
DAEMON_SECRET = "hub-token-that-must-stay-in-the-daemon"
WRITE = {"action": "write", "title": "Deploy rules cluster", "content": "# Shape\n\nThey agree."}


def command_role(*argv: str, timeout: float = 30.0, name: str = "insight") -> CommandRoleSettings:
    return CommandRoleSettings(name, argv, timedelta(seconds=timeout))


def run(
    role: CommandRoleSettings,
    worktree: Path,
    prompt: Prompt | str = "the prompt",
    *,
    deadline: float = 30.0,
    **options: object,
) -> RunRecord:
    return run_command(
        role,
        worktree=worktree,
        prompt=prompt,
        operation_id="op-1",
        deadline=Deadline.after(deadline),
        **options,  # type: ignore[arg-type]
    )


def failure(role: CommandRoleSettings, worktree: Path, **options: object) -> ExecutorFailed:
    with pytest.raises(ExecutorFailed) as raised:
        run(role, worktree, **options)  # type: ignore[arg-type]
    return raised.value


def gone(pattern: str) -> bool:
    found = subprocess.run(["pgrep", "-f", pattern], capture_output=True, check=False)
    return found.returncode == 1


@pytest.fixture
def worktree(tmp_path: Path) -> Path:
    path = tmp_path / "worktree"
    path.mkdir()
    return path


# -- command -----------------------------------------------------------------------------------


def test_whole_argument_templates_are_substituted_and_nothing_else(
    worktree: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    role = command_role(
        "printf",
        "%s\\n",
        "{prompt_file}",
        "{worktree}",
        "{role}",
        "--file={prompt_file}",
        "{other}",
        "$(touch pwned)",
        "; touch pwned2",
    )
    record = run(role, worktree, scratch=state)
    first, *rest = record.stdout.splitlines()
    prompt_file = Path(first)
    assert prompt_file.name == "prompt.md" and prompt_file.is_relative_to(state)
    assert not prompt_file.exists(), "the prompt file is removed after the run"
    assert rest == [
        str(worktree),
        "insight",
        "--file={prompt_file}",
        "{other}",
        "$(touch pwned)",
        "; touch pwned2",
    ]
    assert list(worktree.iterdir()) == [], "no shell ran, nothing was written"
    assert (record.outcome, record.exit_status, record.executor) == ("ok", 0, "command")


def test_the_prompt_is_on_stdin_and_in_a_private_file_and_the_env_is_clean(
    worktree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", DAEMON_SECRET)
    monkeypatch.setenv("MEMSYNC_HUB_TOKEN", DAEMON_SECRET)
    out = tmp_path / "out"
    out.mkdir()
    script = (
        'cat > "$1/stdin"; cp "$MEMSYNC_PROMPT_FILE" "$1/file"; '
        'stat -c %a "$MEMSYNC_PROMPT_FILE" > "$1/mode"; '
        'stat -c %a "$(dirname "$MEMSYNC_PROMPT_FILE")" > "$1/dirmode"; '
        'pwd -P > "$1/cwd"; env; env > "$1/env"'
    )
    prompt = insight_prompt(InsightInputs("personal", ["memory: deploys"]), "command")
    record = run(command_role("sh", "-c", script, "sh", str(out)), worktree, prompt)
    assert (out / "stdin").read_text() == prompt.text
    assert (out / "file").read_text() == prompt.text
    assert (out / "mode").read_text().strip() == "600"
    assert (out / "dirmode").read_text().strip() == "700"
    assert (out / "cwd").read_text().strip() == str(worktree.resolve())
    env = dict(line.split("=", 1) for line in (out / "env").read_text().splitlines() if "=" in line)
    assert env["MEMSYNC_ROLE"] == "insight"
    assert env["MEMSYNC_WORKTREE"] == str(worktree)
    assert env["MEMSYNC_OPERATION_ID"] == "op-1"
    assert Path(env["MEMSYNC_PROMPT_FILE"]).name == "prompt.md"
    assert not Path(env["MEMSYNC_PROMPT_FILE"]).is_relative_to(worktree)
    assert env["PATH"] == os.environ["PATH"]
    shell_own = {"PWD", "SHLVL", "_", "OLDPWD"}
    memsync_own = {
        "MEMSYNC_ROLE",
        "MEMSYNC_WORKTREE",
        "MEMSYNC_PROMPT_FILE",
        "MEMSYNC_OPERATION_ID",
    }
    assert set(env) - shell_own <= set(BASE_ENV) | memsync_own
    assert "OPENAI_API_KEY" not in env and "MEMSYNC_HUB_TOKEN" not in env
    assert DAEMON_SECRET not in (out / "env").read_text()
    assert DAEMON_SECRET not in json.dumps(record.as_dict())
    assert "MEMSYNC_OPERATION_ID=op-1" in record.stdout  # the output is what the log keeps


def test_a_timeout_kills_the_whole_group_including_a_grandchild(worktree: Path) -> None:
    # `; true` keeps the inner sh from exec'ing sleep: the sleep is a true grandchild.
    script = "sleep 31.4159 & sh -c 'sleep 31.4159; true' & echo started; wait"
    started = time.monotonic()
    failed = failure(command_role("sh", "-c", script, timeout=0.5), worktree)
    assert time.monotonic() - started < 5
    assert failed.kind is FailureKind.TIMEOUT and failed.transient
    assert "did not finish within 0.5s" in failed.message
    assert failed.record is not None
    assert (failed.record.outcome, failed.record.exit_status) == ("timeout", None)
    assert failed.record.stdout == "started\n"
    wait_for(lambda: gone("sleep 31.4159"), what="the children and grandchild to be killed")


def test_the_turn_deadline_bounds_the_command_when_shorter_than_the_role_timeout(
    worktree: Path,
) -> None:
    started = time.monotonic()
    failed = failure(command_role("sleep", "27.1828", timeout=600), worktree, deadline=0.4)
    assert failed.kind is FailureKind.TIMEOUT
    assert time.monotonic() - started < 5
    wait_for(lambda: gone("sleep 27.1828"), what="the command to be killed")


def test_no_time_left_runs_nothing(worktree: Path) -> None:
    failed = failure(command_role("touch", "ran"), worktree, deadline=0.0)
    assert failed.kind is FailureKind.TIMEOUT
    assert not (worktree / "ran").exists()


def test_output_is_kept_up_to_the_cap_from_the_end(worktree: Path) -> None:
    script = "head -c 300000 /dev/zero | tr '\\0' a; printf END; head -c 5000 /dev/zero >&2"
    record = run(command_role("sh", "-c", script), worktree, output_cap=1000)
    assert record.truncated
    assert record.stdout.startswith("[299003 earlier bytes cut]\n")
    assert record.stdout.endswith("a" * 997 + "END")
    assert record.stderr.startswith("[4000 earlier bytes cut]\n")
    assert len(record.stderr) < 1100


def test_the_default_cap_is_one_mebibyte(worktree: Path) -> None:
    script = "head -c 1500000 /dev/zero | tr '\\0' b"
    record = run(command_role("sh", "-c", script), worktree)
    assert record.truncated and OUTPUT_CAP == 1 << 20
    marker, kept = record.stdout.split("\n", 1)
    assert marker == f"[{1_500_000 - OUTPUT_CAP} earlier bytes cut]" and kept == "b" * OUTPUT_CAP


def test_a_non_zero_exit_is_a_failure_naming_the_status_and_the_last_words(
    worktree: Path,
) -> None:
    script = "echo working; echo 'first' >&2; echo 'no API access' >&2; exit 3"
    failed = failure(command_role("sh", "-c", script), worktree)
    assert failed.kind is FailureKind.EXIT_STATUS and not failed.transient
    assert failed.message == "the role insight exited with status 3: no API access"
    assert failed.record is not None
    assert (failed.record.exit_status, failed.record.stdout) == (3, "working\n")
    killed = failure(command_role("sh", "-c", "kill -9 $$"), worktree)
    assert "killed by signal 9" in killed.message


def test_a_missing_program_cannot_start(worktree: Path) -> None:
    failed = failure(command_role("/nonexistent/agent-cli", "-p"), worktree)
    assert failed.kind is FailureKind.CANNOT_START
    assert "'/nonexistent/agent-cli' was not found" in failed.message


def test_the_prompt_file_is_never_put_inside_the_worktree(worktree: Path) -> None:
    with pytest.raises(InternalError):
        run(command_role("true"), worktree, scratch=worktree / "state")


# -- example agents in a real root -------------------------------------------------------------


@pytest.fixture
def candidate(tmp_path: Path) -> tuple[Path, str]:
    """A root with one memory commit and a detached worktree at its HEAD (a candidate)."""
    root = tmp_path / "root"
    init_root(root)
    commit(root, {"MEMORY_deploys.md": "# Deploys\n\nShip on Tuesdays.\n"}, "memory: deploys")
    head = git(root, "rev-parse", "HEAD")
    path = tmp_path / "state" / "candidate"
    git(root, "worktree", "add", "-q", "--detach", str(path), head)
    return path, head


def test_the_example_insight_agent_commits_only_a_new_insight_log(
    candidate: tuple[Path, str], tmp_path: Path
) -> None:
    worktree, base = candidate
    role = command_role("sh", str(EXAMPLES / "write-insight.sh"), "{prompt_file}")
    prompt = insight_prompt(InsightInputs("personal", ["memory: deploys"]), "command")
    record = run(role, worktree, prompt, scratch=tmp_path / "state" / "prompts")
    assert record.outcome == "ok", record.message
    assert git(worktree, "rev-list", "--count", f"{base}..HEAD") == "1"
    head = git(worktree, "rev-parse", "HEAD")
    changes = Git(worktree).tree_diff(base, head)
    assert len(changes) == 1 and changes[0][0] == "A"
    assert changes[0][1].startswith("insight_logs/") and changes[0][1].endswith(".md")
    assert check_grants("insight", changes) == []
    assert git(worktree, "log", "-1", "--format=%s").startswith("insight: ")
    assert uncommitted_changes(worktree) == ()


def test_the_example_pruner_makes_an_empty_checkpoint_with_a_ledger(
    candidate: tuple[Path, str],
) -> None:
    worktree, base = candidate
    record = run(command_role("sh", str(EXAMPLES / "prune-checkpoint.sh"), name="pruner"), worktree)
    assert record.outcome == "ok", record.message
    head = git(worktree, "rev-parse", "HEAD")
    assert head != base and Git(worktree).tree_diff(base, head) == []
    assert check_grants("prune", []) == []
    body = git(worktree, "log", "-1", "--format=%B")
    assert body.startswith("prune: checkpoint\n\n")
    assert "operation op-1" in body and "Removed:\n- none\nRevival grace:\n- none" in body


def test_leftovers_are_reported_as_uncommitted_changes(candidate: tuple[Path, str]) -> None:
    worktree, _ = candidate
    script = "printf '# New\\n' > MEMORY_new.md; printf '# Changed\\n' >> MEMORY.md"
    run(command_role("sh", "-c", script), worktree)
    problems = uncommitted_changes(worktree)
    assert sorted((p.code, p.path) for p in problems) == [
        ("uncommitted-changes", "MEMORY.md"),
        ("uncommitted-changes", "MEMORY_new.md"),
    ]


# -- openai ------------------------------------------------------------------------------------

PROMPT = Prompt(system="You are the insight role. Answer in JSON.", user="# Context\n\nnothing")


def openai_role(server: ChatServer | str, *, timeout: float = 10.0) -> OpenAIRoleSettings:
    base = server if isinstance(server, str) else server.base_url
    return OpenAIRoleSettings(
        "insight", base, "qwen-test", SecretRef("env", KEY_ENV), timedelta(seconds=timeout)
    )


async def ask(
    server: ChatServer | str,
    kind: Kind = "insight",
    *,
    timeout: float = 10.0,
    environ: Mapping[str, str] | None = KEYS,
    **options: object,
) -> Answer:
    return await ask_openai(
        openai_role(server, timeout=timeout),
        kind,
        PROMPT,
        operation_id="op-7",
        deadline=Deadline.after(30),
        environ=environ,
        **options,  # type: ignore[arg-type]
    )


async def refused(
    server: ChatServer | str, kind: Kind = "insight", **options: object
) -> ExecutorFailed:
    with pytest.raises(ExecutorFailed) as raised:
        await ask(server, kind, **options)  # type: ignore[arg-type]
    return raised.value


async def test_a_valid_insight_answer_with_the_key_and_token_counts() -> None:
    async with serve_chat(ChatState.of(answer(WRITE))) as server:
        got = await ask(server)
    assert got.proposal == InsightWrite("Deploy rules cluster", "# Shape\n\nThey agree.")
    record = got.record
    assert (record.outcome, record.http_status, record.attempts) == ("ok", 200, 1)
    assert (record.prompt_tokens, record.completion_tokens, record.total_tokens) == (120, 30, 150)
    assert record.executor == "openai" and json.loads(record.stdout) == WRITE
    [request] = server.state.requests
    assert request.path == "/v1/chat/completions"
    assert request.authorization == f"Bearer {KEY}"
    assert request.body["model"] == "qwen-test"
    assert request.body["response_format"] == {"type": "json_object"}
    assert request.messages == [
        {"role": "system", "content": PROMPT.system},
        {"role": "user", "content": PROMPT.user},
    ]


async def test_noop_remove_and_checkpoint_answers() -> None:
    state = ChatState.of(
        answer({"action": "noop", "reason": "nothing new"}, usage=None),
        answer({"action": "remove", "remove": ["old", "older"], "ledger": "Removed:\n- `old`"}),
        answer({"action": "checkpoint", "ledger": "Removed:\n- none"}),
    )
    async with serve_chat(state) as server:
        noop = await ask(server)
        remove = await ask(server, "prune", known_ids={"old", "older", "kept"})
        checkpoint = await ask(server, "prune")
    assert noop.proposal == InsightNoop("nothing new")
    assert noop.record.total_tokens is None  # no usage reported: no counts invented
    assert remove.proposal == PruneRemove(("old", "older"), "Removed:\n- `old`")
    assert checkpoint.proposal == PruneCheckpoint("Removed:\n- none")


async def test_malformed_json_is_retried_once_quoting_the_parse_error() -> None:
    state = ChatState.of(answer('{"action": "write", "title": "x",'), answer(WRITE))
    async with serve_chat(state) as server:
        got = await ask(server)
    assert isinstance(got.proposal, InsightWrite)
    assert got.record.attempts == 2 and got.record.total_tokens == 300
    first, second = server.state.requests
    assert second.messages[:2] == first.messages
    assert second.messages[2] == {
        "role": "assistant",
        "content": '{"action": "write", "title": "x",',
    }
    quoted = second.messages[3]
    assert quoted["role"] == "user"
    assert (
        "the answer is not usable JSON: Expecting property name enclosed in double quotes"
        in (quoted["content"])
    )
    assert second.authorization == f"Bearer {KEY}"


async def test_an_unknown_id_is_quoted_back_on_the_retry() -> None:
    bad = {"action": "remove", "remove": ["F#old"], "ledger": "Removed:\n- `old`"}
    good = {"action": "remove", "remove": ["old"], "ledger": "Removed:\n- `old`"}
    async with serve_chat(ChatState.of(answer(bad), answer(good))) as server:
        got = await ask(server, "prune", known_ids={"old"})
    assert got.proposal == PruneRemove(("old",), "Removed:\n- `old`")
    assert "'F#old' is not an item id" in server.state.requests[1].messages[-1]["content"]


async def test_malformed_twice_fails_after_exactly_two_requests() -> None:
    state = ChatState.of(answer("Sure! Here is my insight."), answer('{"action": "maybe"}'))
    async with serve_chat(state) as server:
        failed = await refused(server)
    assert failed.kind is FailureKind.MALFORMED and not failed.transient
    assert "unusable twice" in failed.message and "action: must be 'write' or 'noop'" in (
        failed.message
    )
    assert len(server.state.requests) == 2
    assert failed.record is not None and failed.record.attempts == 2


async def test_a_500_fails_at_once_as_transient() -> None:
    async with serve_chat(ChatState.of(error(500, "the GPU fell over"))) as server:
        failed = await refused(server)
    assert failed.kind is FailureKind.HTTP_STATUS and failed.transient
    assert "answered HTTP 500: the GPU fell over" in failed.message
    assert failed.record is not None and failed.record.http_status == 500
    assert len(server.state.requests) == 1


async def test_a_hanging_provider_is_cut_off_at_the_role_timeout() -> None:
    async with serve_chat(ChatState.of(hang())) as server:
        started = time.monotonic()
        failed = await refused(server, timeout=0.5)
        assert time.monotonic() - started < 3
    assert failed.kind is FailureKind.TIMEOUT and failed.transient
    assert "did not answer within 0.5s" in failed.message


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_over_the_cap_is_refused(chunked: bool) -> None:
    big = {"action": "write", "title": "t", "content": "x" * 200_000}
    async with serve_chat(ChatState.of(answer(big, chunked=chunked))) as server:
        failed = await refused(server, response_cap=64 * 1024)
    assert failed.kind is FailureKind.TOO_LARGE
    assert len(server.state.requests) == 1


@pytest.mark.parametrize(
    "reply",
    [
        Reply(body=b"{", length=10 << 20, hang=True),  # declares too much, sends little
        Reply(body=b"x" * (80 * 1024), chunked=True, hang=True),  # sends too much, never ends
    ],
    ids=["declared", "streamed"],
)
async def test_the_cap_ends_the_read_at_once_not_at_the_timeout(reply: Reply) -> None:
    async with serve_chat(ChatState.of(reply)) as server:
        started = time.monotonic()
        failed = await refused(server, timeout=20, response_cap=64 * 1024)
        assert time.monotonic() - started < 10
    assert failed.kind is FailureKind.TOO_LARGE


async def test_a_large_answer_under_the_cap_read_in_many_pieces() -> None:
    long = {"action": "write", "title": "Long", "content": "word " * 12_000}  # 4 pieces
    async with serve_chat(ChatState.of(answer(long, chunked=True, pause=0.05))) as server:
        got = await ask(server)
    assert isinstance(got.proposal, InsightWrite) and len(got.proposal.content) == 59_999


async def test_a_200_that_is_not_a_completion_is_a_protocol_failure() -> None:
    async with serve_chat(ChatState.of(Reply(body=b"<html>proxy login</html>"))) as server:
        failed = await refused(server)
    assert failed.kind is FailureKind.PROTOCOL


async def test_the_api_key_never_reaches_the_record_the_log_or_a_message(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(KEY_ENV, KEY)  # resolved from the daemon's own environment
    echo = {"action": "write", "title": "keys", "content": f"the key is {KEY}"}
    state = ChatState.of(
        answer(WRITE),
        error(401, f"invalid api key {KEY}"),
        answer(echo),
        answer(echo),
    )
    seen: list[str] = []
    async with serve_chat(state) as server:
        ok = await ask(server, environ=None)
        seen += [repr(ok), json.dumps(ok.record.as_dict()), ok.record.summary()]
        rejected = await refused(server, environ=None)  # a 401 whose text echoes the key
        echoed = await refused(server, environ=None)  # answers that echo it, twice
    assert server.state.requests[0].authorization == f"Bearer {KEY}"
    assert rejected.kind is FailureKind.HTTP_STATUS
    assert "answered HTTP 401: invalid api key ********" in rejected.message
    assert echoed.kind is FailureKind.MALFORMED
    assert "contains the role's API key" in echoed.message
    assert echoed.record is not None and "the key is ********" in echoed.record.stdout
    for failed in (rejected, echoed):
        seen += [failed.message, repr(failed.record), json.dumps(failed.record.as_dict())]  # type: ignore[union-attr]
    assert "role insight (openai) ok: HTTP 200" in caplog.text  # the log did get the runs
    seen.append(caplog.text)
    assert all(KEY not in text for text in seen)


async def test_a_placeholder_key_is_no_reason_to_refuse_an_answer() -> None:
    said = {"action": "write", "title": "Local models", "content": "We moved to ollama."}
    async with serve_chat(ChatState.of(answer(said))) as server:
        got = await ask(server, environ={KEY_ENV: "ollama"})
    assert got.proposal == InsightWrite("Local models", "We moved to ollama.")
    assert server.state.requests[0].authorization == "Bearer ollama"


async def test_no_key_is_sent_over_plain_http_to_a_non_loopback_host() -> None:
    failed = await refused("http://192.0.2.1:9/v1")  # TEST-NET: refused before any I/O
    assert failed.kind is FailureKind.REFUSED and "use https" in failed.message


async def test_an_unset_key_variable_fails_naming_it() -> None:
    async with serve_chat(ChatState.of(answer(WRITE))) as server:
        failed = await refused(server, environ={})
    assert failed.kind is FailureKind.NO_KEY and KEY_ENV in failed.message
    assert server.state.requests == []


async def test_an_unreachable_endpoint_is_a_connection_failure() -> None:
    async with serve_chat() as server:
        url = server.base_url  # the port is closed once the block ends
    failed = await refused(url)
    assert failed.kind is FailureKind.CONNECTION and failed.transient


def test_the_blocking_form_from_a_worker_thread_with_the_threaded_fake() -> None:
    with chat_server_thread(ChatState.of(answer(WRITE))) as server:
        got = ask_openai_blocking(
            openai_role(server),
            "insight",
            PROMPT,
            operation_id="op-9",
            deadline=Deadline.after(10),
            environ={KEY_ENV: KEY},
        )
    assert isinstance(got.proposal, InsightWrite) and got.record.operation_id == "op-9"
    assert [r.authorization for r in server.state.requests] == [f"Bearer {KEY}"]
