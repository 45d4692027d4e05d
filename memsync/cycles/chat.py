"""The `openai` executor (CONTRACT §7): one OpenAI-compatible chat-completions exchange.

`ask_openai` asks the endpoint for one JSON object, validates it (one retry that quotes
the problem back), and returns a typed proposal the caller applies: this module never
writes a file. The API key comes from its secret reference, is never sent over plain http
off loopback, and never reaches a record or a log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import asdict, dataclass

from memsync.config.sections import OpenAIRoleSettings
from memsync.cycles import jsontext
from memsync.cycles.answers import AnswerError, Proposal, parse_answer
from memsync.cycles.promptkit import Kind, Prompt, correction
from memsync.cycles.runrecord import ExecutorFailed, FailureKind, RunRecord, Scrub, ms_since
from memsync.errors import InternalError, SecretError
from memsync.redaction import redact
from memsync.roots.faults import fault
from memsync.secrets import resolve_header
from memsync.transports.http import ErrorKind, HttpClient, HttpError
from memsync.transports.process import Deadline

log = logging.getLogger("memsync.cycles")

RESPONSE_CAP = 1 << 20  # bytes of a chat-completions response body read at most
ANSWER_ECHO = 8_000  # characters of an unusable answer quoted back on the retry
CONNECT_TIMEOUT = 10.0


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
    url = role.base_url.rstrip("/") + "/chat/completions"
    shown = redact(url)
    try:
        key = (
            resolve_header(role.api_key, where=f"roles.{role.name}.api_key", environ=environ)
            if role.api_key is not None
            else None
        )
    except SecretError as exc:
        raise _openai_failed(
            role, operation_id, started, _Exchange(), Scrub(), FailureKind.NO_KEY, exc.message
        ) from None
    scrub = Scrub([key] if key else [])
    state = _Exchange()

    def failed(kind: FailureKind, message: str) -> ExecutorFailed:
        return _openai_failed(role, operation_id, started, state, scrub, kind, message)

    seconds = deadline.cap(role.timeout.total_seconds())
    loop = asyncio.get_running_loop()
    at = loop.time() + max(seconds, 0.0)
    try:
        # The HTTP box's rule: the key only over https or to loopback; plain http without
        # a key anywhere (the configuration refused the rest at load); no redirect.
        async with HttpClient(allow_http=True, connect_timeout=CONNECT_TIMEOUT) as client:
            chat = _Chat(client, url, key, at, role.model, response_cap, state, scrub)
            proposal = await chat.converse(kind, prompt, known_ids)
    except _Failure as failure:
        raise failed(failure.kind, failure.message) from None
    except HttpError as exc:
        if exc.status is not None:
            state.http_status = exc.status
        if exc.kind is ErrorKind.REFUSED:
            advice = "; use https" if url.startswith("http:") else ""
            raise failed(FailureKind.REFUSED, f"{shown}: {exc.detail}{advice}") from None
        if exc.kind is ErrorKind.TOO_LARGE:
            raise failed(FailureKind.TOO_LARGE, f"{shown} {exc.detail}") from None
        if exc.kind is ErrorKind.TIMEOUT and loop.time() >= at:
            raise failed(
                FailureKind.TIMEOUT, f"{shown} did not answer within {seconds:g}s"
            ) from None
        # Anything else (a connect timeout too) is the endpoint not answering usably.
        reason = scrub(exc.detail)
        raise failed(FailureKind.CONNECTION, f"{shown} could not be reached: {reason}") from None
    except (ValueError, RecursionError) as exc:  # an answer no parser should have let by
        raise failed(
            FailureKind.PROTOCOL,
            f"{shown} answered something that could not be read ({type(exc).__name__})",
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

    client: HttpClient
    url: str
    key: str | None
    deadline: float  # on the event loop's clock: both requests together
    model: str
    cap: int
    state: _Exchange
    scrub: Scrub

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
        shown = redact(self.url)
        body = {
            "model": self.model,
            "messages": list(messages),
            "response_format": {"type": "json_object"},
            "stream": False,
        }
        status, raw = await self.client.post_json(
            self.url,
            document=body,
            token=self.key or None,
            deadline=self.deadline,
            max_response=cap,
            headers={"Accept": "application/json"},
            refuse_larger=True,
        )
        state.http_status = status
        fault("cycle-during-executor")  # the model answered; nothing applied or recorded
        if status != 200:
            detail = self.scrub(_error_detail(raw))
            raise _Failure(
                FailureKind.HTTP_STATUS,
                f"{shown} answered HTTP {status}" + (f": {detail}" if detail else ""),
            )
        try:
            document = jsontext.loads(raw)
        except jsontext.JSONRefused as exc:
            raise _Failure(
                FailureKind.PROTOCOL,
                f"{shown} answered 200 with a body that is not usable JSON: {exc.message}",
            ) from None
        try:
            content = document["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
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
        error = jsontext.loads(text).get("error")
        text = error.get("message", text) if isinstance(error, Mapping) else str(error or text)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _openai_record(
    role: OpenAIRoleSettings,
    operation_id: str,
    started: float,
    state: _Exchange,
    scrub: Scrub,
    outcome: str,
    message: str,
) -> RunRecord:
    return RunRecord(
        role=role.name,
        executor="openai",
        operation_id=operation_id,
        duration_ms=ms_since(started),
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
    scrub: Scrub,
    kind: FailureKind,
    why: str,
) -> ExecutorFailed:
    message = scrub(f"the role {role.name} failed: {why}")
    record = _openai_record(role, operation_id, started, state, scrub, kind.value, message)
    log.info("%s", record.summary())
    return ExecutorFailed(kind, message, record=record)
