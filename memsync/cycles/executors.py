"""Role executors (CONTRACT §7): how a prune or insight turn asks its model.

`run_command` runs an agent CLI in the candidate worktree through the process box: argv
templates substituted whole (never a shell), the prompt on stdin and in a private file
outside the worktree, a clean environment plus `MEMSYNC_*`, the process group killed at
the timeout, output kept up to a cap. The role commits its own work; `uncommitted_changes`
reports what it left behind.

`ask_openai` asks an OpenAI-compatible chat-completions endpoint for one JSON object,
validates it (one retry that quotes the problem back), and returns a typed proposal the
caller applies: this module never writes a file for an `openai` role.

Both produce a `RunRecord` (what ran, how long, how it ended, token counts, output cut to
a cap), which never holds a secret: the API key and the daemon's environment stay out.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import hdrs
from yarl import URL

from memsync.config.model import CommandRoleSettings, OpenAIRoleSettings
from memsync.config.secrets import resolve
from memsync.cycles.prompts import AnswerError, Kind, Prompt, Proposal, correction, parse_answer
from memsync.errors import InternalError, MemsyncError, SecretError
from memsync.redaction import redact
from memsync.transports.git import Git
from memsync.transports.process import Completed, Deadline, run_process
from memsync.validators.paths import printable
from memsync.validators.problems import Problem

log = logging.getLogger("memsync.cycles")

OUTPUT_CAP = 1 << 20  # bytes of a command's stdout and of its stderr kept for the log
RESPONSE_CAP = 1 << 20  # bytes of a chat-completions response body read at most
ANSWER_ECHO = 8_000  # characters of an unusable answer quoted back on the retry
CONNECT_TIMEOUT = 10.0
_HIDDEN = "********"
_REAL_KEY = 16  # shorter "keys" are placeholders local servers ignore, not secrets to guard

# What an agent CLI gets of the daemon's environment: enough to find its tools, its own
# login (under HOME or XDG_*) and a git identity; never the daemon's secrets.
BASE_ENV = (
    *("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR"),
    *("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES"),
    *("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"),
    *("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"),
)


class FailureKind(StrEnum):
    CANNOT_START = "cannot-start"  # the program is missing or not runnable
    TIMEOUT = "timeout"
    EXIT_STATUS = "exit-status"
    HTTP_STATUS = "http-status"
    CONNECTION = "connection"
    TOO_LARGE = "too-large"
    PROTOCOL = "protocol"  # a 200 that is not a chat completion
    MALFORMED = "malformed"  # the model's answer, twice unusable
    REFUSED = "refused"  # a request memsync will not make (an API key over plain http)
    NO_KEY = "api-key"  # the API key's reference could not be resolved


_TRANSIENT = frozenset({FailureKind.TIMEOUT, FailureKind.CONNECTION})


class ExecutorFailed(MemsyncError):
    """The role could not finish: nothing may land and the cycle keeps its pressure.

    `record` is what ran (when anything did), for the log; `message` never holds a secret.
    """

    def __init__(self, kind: FailureKind, message: str, *, record: RunRecord | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.record = record

    @property
    def transient(self) -> bool:
        """Worth retrying later (a timeout, a lost connection, a 5xx or a 429)."""
        if self.kind is FailureKind.HTTP_STATUS and self.record is not None:
            status = self.record.http_status or 0
            return status == 429 or status >= 500
        return self.kind in _TRANSIENT


@dataclass(frozen=True)
class RunRecord:
    """What one executor run did, for the log and the status. Never holds a secret."""

    role: str
    executor: str  # command | openai
    operation_id: str
    duration_ms: int
    outcome: str  # "ok" or a FailureKind
    exit_status: int | None = None
    http_status: int | None = None
    attempts: int = 1
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    stdout: str = ""  # command: its output; openai: the last answer's text
    stderr: str = ""
    truncated: bool = False  # some output was cut to the cap
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line for the log (no output)."""
        status = (
            f"exit {self.exit_status}"
            if self.exit_status is not None
            else f"HTTP {self.http_status}"
            if self.http_status is not None
            else "-"
        )
        tokens = f", {self.total_tokens} tokens" if self.total_tokens is not None else ""
        return (
            f"role {self.role} ({self.executor}) {self.outcome}: {status}, "
            f"{self.duration_ms} ms, {self.attempts} attempt(s){tokens}"
        )


class _Scrub:
    """Hides the given secrets (and URL credentials) in any text that reaches a record."""

    def __init__(self, secrets: Sequence[str] = ()) -> None:
        self.secrets = tuple(s for s in secrets if s)

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, _HIDDEN)
        return redact(text)

    def found_in(self, texts: Iterable[str]) -> bool:
        """Whether a real key (not a placeholder such as `EMPTY` or `ollama`) is in `texts`."""
        keys = [secret for secret in self.secrets if len(secret) >= _REAL_KEY]
        return any(key in text for key in keys for text in texts)


# -- command ---------------------------------------------------------------------------------


def command_argv(template: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """Substitute whole-argument templates only: `{prompt_file}` becomes the path, while
    `--file={prompt_file}` or any other braces stay as written (no format-string parsing)."""
    return [values.get(arg, arg) for arg in template]


def role_env(
    *,
    role: str,
    worktree: Path,
    prompt_file: Path,
    operation_id: str,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The clean base environment plus the `MEMSYNC_*` variables of CONTRACT §7."""
    source = os.environ if environ is None else environ
    env = {key: source[key] for key in BASE_ENV if key in source}
    env.update(
        {
            "MEMSYNC_ROLE": role,
            "MEMSYNC_WORKTREE": str(worktree),
            "MEMSYNC_PROMPT_FILE": str(prompt_file),
            "MEMSYNC_OPERATION_ID": operation_id,
        }
    )
    return env


def run_command(
    role: CommandRoleSettings,
    *,
    worktree: Path,
    prompt: Prompt | str,
    operation_id: str,
    deadline: Deadline,
    scratch: Path | None = None,
    environ: Mapping[str, str] | None = None,
    output_cap: int = OUTPUT_CAP,
) -> RunRecord:
    """Run the role's command once in `worktree` (blocking; call it from a worker thread).

    The prompt file lives in a private directory under `scratch` (the state dir; the system
    temp dir when None), never inside the worktree, and is removed afterwards. Returns the
    record of a run that exited 0; raises ExecutorFailed (with the record) otherwise.
    """
    text = prompt.text if isinstance(prompt, Prompt) else prompt
    worktree = worktree.absolute()
    if not worktree.is_dir():
        raise ExecutorFailed(FailureKind.CANNOT_START, f"the worktree {worktree} does not exist")
    if scratch is not None:
        scratch = scratch.absolute()
        if scratch.resolve().is_relative_to(worktree.resolve()):
            raise InternalError("internal: the prompt file would be inside the role's worktree")
        scratch.mkdir(parents=True, exist_ok=True, mode=0o700)
    started = time.monotonic()
    seconds = deadline.cap(role.timeout.total_seconds())
    if seconds <= 0:
        raise _command_failed(role, operation_id, started, FailureKind.TIMEOUT, "no time was left")
    private = Path(tempfile.mkdtemp(prefix="memsync-prompt-", dir=scratch))
    try:
        prompt_file = private / "prompt.md"
        fd = os.open(prompt_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        values = {"{prompt_file}": str(prompt_file), "{worktree}": str(worktree)}
        values["{role}"] = role.name
        argv = command_argv(role.command, values)
        env = role_env(
            role=role.name,
            worktree=worktree,
            prompt_file=prompt_file,
            operation_id=operation_id,
            environ=environ,
        )
        try:
            done = run_process(
                argv, cwd=worktree, env=env, seconds=seconds, input=text.encode("utf-8")
            )
        except OSError as exc:
            what = "was not found" if isinstance(exc, FileNotFoundError) else "could not start"
            reason = f"its command {printable(argv[0])!r} {what}"
            if not isinstance(exc, FileNotFoundError):
                reason += f" ({exc.strerror})"
            raise _command_failed(
                role, operation_id, started, FailureKind.CANNOT_START, reason
            ) from exc
    finally:
        shutil.rmtree(private, ignore_errors=True)
    record = _command_record(role, operation_id, started, seconds, done, output_cap)
    log.info("%s", record.summary())
    if record.outcome != "ok":
        raise ExecutorFailed(FailureKind(record.outcome), record.message, record=record)
    return record


def _command_record(
    role: CommandRoleSettings,
    operation_id: str,
    started: float,
    seconds: float,
    done: Completed,
    output_cap: int,
) -> RunRecord:
    """How a finished (or stopped) command ended, with its output cut to the cap."""
    scrub = _Scrub()
    stdout, cut_out = _tail(done.stdout, output_cap)
    stderr, cut_err = _tail(done.stderr, output_cap)
    outcome = "ok"
    message = f"the role {role.name} finished"
    if done.expired:
        outcome = FailureKind.TIMEOUT.value
        message = (
            f"the role {role.name} did not finish within {seconds:g}s; "
            "it was stopped with its whole process group"
        )
    elif done.returncode != 0:
        outcome = FailureKind.EXIT_STATUS.value
        how = (
            f"was killed by signal {-done.returncode}"
            if done.returncode < 0
            else f"exited with status {done.returncode}"
        )
        said = _last_line(stderr) or _last_line(stdout)
        message = f"the role {role.name} {how}" + (f": {scrub(said)}" if said else "")
    return RunRecord(
        role=role.name,
        executor="command",
        operation_id=operation_id,
        duration_ms=_ms_since(started),
        outcome=outcome,
        exit_status=None if done.expired else done.returncode,
        stdout=scrub(stdout),
        stderr=scrub(stderr),
        truncated=cut_out or cut_err,
        message=message,
    )


def _command_failed(
    role: CommandRoleSettings, operation_id: str, started: float, kind: FailureKind, why: str
) -> ExecutorFailed:
    message = f"the role {role.name} could not run: {why}"
    record = RunRecord(
        role.name, "command", operation_id, _ms_since(started), kind.value, message=message
    )
    log.info("%s", record.summary())
    return ExecutorFailed(kind, message, record=record)


def uncommitted_changes(worktree: Path) -> tuple[Problem, ...]:
    """`uncommitted-changes` for every path the role left changed or untracked (not ignored)
    in its worktree. A git failure raises (never "assume clean")."""
    entries = Git(worktree).work_state().entries
    return tuple(
        Problem(
            "uncommitted-changes",
            printable(entry.path),
            None,
            f"the role left '{printable(entry.path)}' uncommitted",
        )
        for entry in entries
    )


def _tail(data: bytes, cap: int) -> tuple[str, bool]:
    """The last `cap` bytes as text (the end of an output says most), and whether any was cut.

    The process box returns whole outputs; this bounds what a record (and a log) holds.
    """
    if len(data) <= cap:
        return data.decode("utf-8", "replace"), False
    kept = data[len(data) - cap :].decode("utf-8", "replace")
    return f"[{len(data) - cap} earlier bytes cut]\n{kept}", True


def _last_line(text: str, limit: int = 300) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return ""
    last = lines[-1]
    return last if len(last) <= limit else last[: limit - 1] + "…"


def _ms_since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


# -- openai ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    """A usable answer: the typed proposal the caller applies, and the record of the run."""

    proposal: Proposal
    record: RunRecord


@dataclass
class _Exchange:
    """Counters across the attempts of one `ask_openai`."""

    attempts: int = 0
    http_status: int | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None
    last_answer: str = ""

    def add_usage(self, usage: object) -> None:
        if not isinstance(usage, Mapping):
            return
        for name in ("prompt_tokens", "completion_tokens", "total_tokens"):
            value = usage.get(name)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                setattr(self, name, (getattr(self, name) or 0) + value)


async def ask_openai(
    role: OpenAIRoleSettings,
    kind: Kind,
    prompt: Prompt,
    *,
    operation_id: str,
    deadline: Deadline,
    known_ids: Collection[str] | None = None,
    environ: Mapping[str, str] | None = None,
    response_cap: int = RESPONSE_CAP,
) -> Answer:
    """Ask the role's endpoint for a `kind` answer; retry once, quoting the problem, when
    the answer is unusable. For prune, `known_ids` (the current graph's item ids) makes an
    answer naming an unknown id unusable too. Raises ExecutorFailed (with the record)."""
    started = time.monotonic()
    url = URL(role.base_url.rstrip("/") + "/chat/completions")
    shown = redact(str(url))
    try:
        key = resolve(role.api_key, environ=environ) if role.api_key is not None else None
    except SecretError as exc:
        raise _openai_failed(
            role, operation_id, started, _Exchange(), _Scrub(), FailureKind.NO_KEY, exc.message
        ) from None
    scrub = _Scrub([key] if key else [])
    state = _Exchange()
    if key and url.scheme == "http" and not _is_loopback(url.host or ""):
        raise _openai_failed(
            role,
            operation_id,
            started,
            state,
            scrub,
            FailureKind.REFUSED,
            f"{shown}: an API key is never sent over plain http to a non-loopback host; use https",
        )
    headers: dict[str, str] = {
        hdrs.CONTENT_TYPE: "application/json",
        hdrs.ACCEPT: "application/json",
        hdrs.ACCEPT_ENCODING: "identity",
    }
    if key:
        headers[hdrs.AUTHORIZATION] = f"Bearer {key}"
    seconds = deadline.cap(role.timeout.total_seconds())
    loop = asyncio.get_running_loop()
    try:
        async with (
            asyncio.timeout_at(loop.time() + max(seconds, 0.0)),
            aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT),
                cookie_jar=aiohttp.DummyCookieJar(),
                trust_env=False,  # no proxies or .netrc from the environment
                headers={hdrs.USER_AGENT: "memsync"},
            ) as session,
        ):
            chat = _Chat(session, url, headers, role.model, response_cap, state, scrub)
            proposal = await chat.converse(kind, prompt, known_ids)
    except _Failure as failure:
        raise _openai_failed(
            role, operation_id, started, state, scrub, failure.kind, failure.message
        ) from None
    except aiohttp.ClientError as exc:  # before TimeoutError: a connect timeout is one too
        reason = scrub(str(exc)) or type(exc).__name__
        raise _openai_failed(
            role,
            operation_id,
            started,
            state,
            scrub,
            FailureKind.CONNECTION,
            f"{shown} could not be reached: {reason}",
        ) from None
    except TimeoutError:
        raise _openai_failed(
            role,
            operation_id,
            started,
            state,
            scrub,
            FailureKind.TIMEOUT,
            f"{shown} did not answer within {seconds:g}s",
        ) from None
    record = _openai_record(role, operation_id, started, state, scrub, "ok", "answered")
    log.info("%s", record.summary())
    return Answer(proposal, record)


def ask_openai_blocking(
    role: OpenAIRoleSettings,
    kind: Kind,
    prompt: Prompt,
    *,
    operation_id: str,
    deadline: Deadline,
    known_ids: Collection[str] | None = None,
    environ: Mapping[str, str] | None = None,
    response_cap: int = RESPONSE_CAP,
) -> Answer:
    """`ask_openai` from a worker thread (where a turn runs): its own short-lived loop."""
    with contextlib.suppress(RuntimeError):
        asyncio.get_running_loop()
        raise InternalError("internal: ask_openai_blocking called on an event loop thread")
    return asyncio.run(
        ask_openai(
            role,
            kind,
            prompt,
            operation_id=operation_id,
            deadline=deadline,
            known_ids=known_ids,
            environ=environ,
            response_cap=response_cap,
        )
    )


class _Failure(Exception):
    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass(frozen=True)
class _Chat:
    """One conversation with the endpoint: the question, and once more if need be."""

    session: aiohttp.ClientSession
    url: URL
    headers: Mapping[str, str]
    model: str
    cap: int
    state: _Exchange
    scrub: _Scrub

    async def converse(
        self, kind: Kind, prompt: Prompt, known_ids: Collection[str] | None
    ) -> Proposal:
        """The first usable answer of two; the second request quotes what was wrong."""
        messages = [
            {"role": "system", "content": prompt.system},
            {"role": "user", "content": prompt.user},
        ]
        content = await self.complete(messages)
        try:
            return self.usable(kind, content, known_ids)
        except AnswerError as exc:
            problem = str(exc)
        messages.append({"role": "assistant", "content": self.scrub(content[:ANSWER_ECHO])})
        messages.append({"role": "user", "content": correction(problem)})
        content = await self.complete(messages)
        try:
            return self.usable(kind, content, known_ids)
        except AnswerError as exc:
            last = self.scrub(str(exc))
            raise _Failure(
                FailureKind.MALFORMED, f"the answer was unusable twice; last: {last}"
            ) from None

    def usable(self, kind: Kind, content: str, known_ids: Collection[str] | None) -> Proposal:
        proposal = parse_answer(kind, content, known_ids)
        fields = asdict(proposal).values()
        texts = [v for v in fields if isinstance(v, str)]
        texts += [item for v in fields if isinstance(v, tuple) for item in v]
        if self.scrub.found_in(texts):
            raise AnswerError("the answer contains the role's API key")
        return proposal

    async def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        """One request; the answer's text. HTTP and protocol problems raise _Failure."""
        state, cap = self.state, self.cap
        state.attempts += 1
        shown = redact(str(self.url))
        body = {
            "model": self.model,
            "messages": list(messages),
            "response_format": {"type": "json_object"},
            "stream": False,
        }
        async with self.session.post(
            self.url, json=body, headers=self.headers, allow_redirects=False
        ) as resp:
            state.http_status = resp.status
            declared = resp.content_length
            if declared is not None and declared > cap:
                raise _Failure(
                    FailureKind.TOO_LARGE, f"{shown} answered {declared} bytes (cap {cap})"
                )
            received = bytearray()
            async for chunk in resp.content.iter_any():  # stops reading once over the cap
                received += chunk
                if len(received) > cap:
                    raise _Failure(FailureKind.TOO_LARGE, f"{shown} answered over {cap} bytes")
            raw = bytes(received)
            if resp.status != 200:
                detail = self.scrub(_error_detail(raw))
                raise _Failure(
                    FailureKind.HTTP_STATUS,
                    f"{shown} answered HTTP {resp.status}" + (f": {detail}" if detail else ""),
                )
        try:
            document = json.loads(raw)
            content = document["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise _Failure(
                FailureKind.PROTOCOL, f"{shown} answered 200 with no chat completion in it"
            ) from None
        state.add_usage(document.get("usage"))
        text = content if isinstance(content, str) else ""
        state.last_answer = text
        return text


def _error_detail(raw: bytes, limit: int = 300) -> str:
    """The provider's own error message (`{"error": {"message"}}`), else the body's start."""
    text = raw.decode("utf-8", "replace")
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        error = json.loads(text).get("error")
        text = error.get("message", text) if isinstance(error, Mapping) else str(error or text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _openai_record(
    role: OpenAIRoleSettings,
    operation_id: str,
    started: float,
    state: _Exchange,
    scrub: _Scrub,
    outcome: str,
    message: str,
) -> RunRecord:
    return RunRecord(
        role=role.name,
        executor="openai",
        operation_id=operation_id,
        duration_ms=_ms_since(started),
        outcome=outcome,
        http_status=state.http_status,
        attempts=state.attempts,
        prompt_tokens=state.prompt_tokens,
        completion_tokens=state.completion_tokens,
        total_tokens=state.total_tokens,
        stdout=scrub(state.last_answer),
        message=scrub(message),
    )


def _openai_failed(
    role: OpenAIRoleSettings,
    operation_id: str,
    started: float,
    state: _Exchange,
    scrub: _Scrub,
    kind: FailureKind,
    why: str,
) -> ExecutorFailed:
    message = scrub(f"the role {role.name} failed: {why}")
    record = _openai_record(role, operation_id, started, state, scrub, kind.value, message)
    log.info("%s", record.summary())
    return ExecutorFailed(kind, message, record=record)


def _is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost."):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
