"""A role asked through an OpenAI-compatible chat-completions endpoint (CONTRACT §7).

The model proposes; code applies. Insight answers `{"action": "write", "title", "content"}`
or `{"action": "noop", "reason"}`: memsync writes `insight_logs/<UTC time>.md` and commits
`insight: <title>`. Prune answers `{"action": "remove", "remove": [ids], "ledger"}` or
`{"action": "checkpoint", "ledger"}`: memsync removes those items and the edges that point
at them (`validators/editor.py`) and commits `prune: expired active memory` (ledger as the
body), or an empty `prune: checkpoint`. An answer that does not parse is sent back once with
the parse error; a second bad answer fails the turn. The API key is resolved late and never
logged; the body is capped; the deadline bounds the whole exchange.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Annotated, Any, Literal

import aiohttp
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from memsync.config.model import OpenAIRoleSettings
from memsync.config.secrets import resolve
from memsync.cycles.prompts_local import prompt_for
from memsync.cycles.turn import RoleFailed, TurnInput
from memsync.redaction import redact
from memsync.transports.git import Git
from memsync.transports.process import Deadline
from memsync.validators.editor import remove_items

log = logging.getLogger(__name__)

MAX_BODY = 1024 * 1024


class _Answer(BaseModel):
    model_config = ConfigDict(extra="ignore")


class Write(_Answer):
    action: Literal["write"]
    title: Annotated[str, Field(min_length=1, max_length=200)]
    content: Annotated[str, Field(min_length=1, max_length=200_000)]


class Noop(_Answer):
    action: Literal["noop"]
    reason: str = ""


class Remove(_Answer):
    action: Literal["remove"]
    remove: Annotated[list[str], Field(min_length=1)]
    ledger: str = ""


class Checkpoint(_Answer):
    action: Literal["checkpoint"]
    ledger: str = ""


INSIGHT_ANSWER: TypeAdapter[Write | Noop] = TypeAdapter(
    Annotated[Write | Noop, Field(discriminator="action")]
)
PRUNE_ANSWER: TypeAdapter[Remove | Checkpoint] = TypeAdapter(
    Annotated[Remove | Checkpoint, Field(discriminator="action")]
)

FORMATS = {
    "insight": 'Answer with one JSON object: {"action": "write", "title": "...", "content": '
    '"... markdown ..."} or {"action": "noop", "reason": "..."}.',
    "prune": 'Answer with one JSON object: {"action": "remove", "remove": ["item-id", ...], '
    '"ledger": "Removed: ...\\nRevival grace: ..."} or {"action": "checkpoint", "ledger": "..."}.',
}


class OpenAIRole:
    def __init__(self, role: OpenAIRoleSettings) -> None:
        self.role = role
        self.calls: list[dict[str, Any]] = []  # what ran: status, duration, tokens; no secrets

    def __call__(self, turn: TurnInput, deadline: Deadline) -> None:
        answer = asyncio.run(self._ask(turn, deadline))
        apply(turn, answer)

    async def _ask(self, turn: TurnInput, deadline: Deadline) -> Write | Noop | Remove | Checkpoint:
        key = resolve(self.role.api_key) if self.role.api_key is not None else None
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        adapter: TypeAdapter[Any] = INSIGHT_ANSWER if turn.cycle == "insight" else PRUNE_ANSWER
        messages = [
            {"role": "system", "content": FORMATS[turn.cycle]},
            {"role": "user", "content": prompt_for(turn)},
        ]
        url = f"{self.role.base_url.rstrip('/')}/chat/completions"
        async with aiohttp.ClientSession() as session:
            for attempt in (1, 2):
                content = await self._post(session, url, headers, messages, deadline)
                try:
                    return adapter.validate_python(json.loads(content))  # type: ignore[no-any-return]
                except (ValueError, ValidationError) as exc:
                    problem = str(exc).splitlines()[0][:300]
                    if attempt == 2:
                        raise RoleFailed(
                            f"the model's answer is not valid twice: {problem}"
                        ) from exc
                    messages += [
                        {"role": "assistant", "content": content[:4000]},
                        {
                            "role": "user",
                            "content": f"That answer could not be used ({problem}). "
                            + FORMATS[turn.cycle],
                        },
                    ]
        raise RoleFailed("unreachable")  # pragma: no cover

    async def _post(
        self,
        session: aiohttp.ClientSession,
        url: str,
        headers: dict[str, str],
        messages: list[dict[str, str]],
        deadline: Deadline,
    ) -> str:
        body = {
            "model": self.role.model,
            "messages": messages,
            "response_format": {"type": "json_object"},
        }
        started = time.monotonic()
        seconds = deadline.cap(self.role.timeout.total_seconds())
        if seconds <= 0:
            raise RoleFailed("the role's time ran out before the model was asked")
        try:
            async with asyncio.timeout(seconds):
                async with session.post(
                    url, json=body, headers=headers, allow_redirects=False
                ) as answer:
                    raw = await answer.content.read(MAX_BODY + 1)
                    status = answer.status
        except TimeoutError as exc:
            raise RoleFailed(f"the model did not answer within {seconds:g}s") from exc
        except aiohttp.ClientError as exc:
            raise RoleFailed(f"the model endpoint failed: {redact(str(exc))}") from exc
        record: dict[str, Any] = {"status": status, "seconds": round(time.monotonic() - started, 3)}
        self.calls.append(record)
        if len(raw) > MAX_BODY:
            raise RoleFailed(f"the model's answer is over {MAX_BODY} bytes")
        if status != 200:
            raise RoleFailed(f"the model endpoint answered HTTP {status}")
        try:
            document = json.loads(raw)
            record["tokens"] = (document.get("usage") or {}).get("total_tokens")
            return str(document["choices"][0]["message"]["content"])
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise RoleFailed("the model endpoint's answer is not a chat completion") from exc


def apply(turn: TurnInput, answer: Write | Noop | Remove | Checkpoint) -> None:
    """Turn the proposal into a commit in the worktree (or nothing, for a no-op)."""
    git = Git(turn.worktree)
    if isinstance(answer, Noop):
        return
    if isinstance(answer, Write):
        name = f"insight_logs/{time.strftime('%Y-%m-%d-%H%M%S', time.gmtime())}.md"
        target = turn.worktree / name
        target.parent.mkdir(exist_ok=True)
        target.write_text(answer.content.rstrip() + "\n", encoding="utf-8")
        git.run("add", "-f", "--", name)
        _commit(git, f"insight: {' '.join(answer.title.split())}")
        return
    if isinstance(answer, Checkpoint):
        _commit(git, f"prune: checkpoint\n\n{answer.ledger}".rstrip(), allow_empty=True)
        return
    try:
        changed = remove_items(git.tree_view("HEAD"), set(answer.remove))
    except KeyError as exc:
        raise RoleFailed(f"the model named ids that are not items: {exc}") from exc
    for path, data in changed.items():
        target = turn.worktree / path
        if data is None:
            git.run("rm", "-q", "--cached", "--", path)
            target.unlink(missing_ok=True)
        else:
            target.write_bytes(data)
            git.run("add", "-f", "--", path)
    _commit(git, f"prune: expired active memory\n\n{answer.ledger}".rstrip())


def _commit(git: Git, message: str, *, allow_empty: bool = False) -> None:
    args = ["commit", "-q", "--no-verify", "-m", message]
    if allow_empty:
        args.insert(1, "--allow-empty")
    git.run(*args, config=git.identity_config())
