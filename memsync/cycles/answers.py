"""The answers an `openai` role may give, enforced in one place: `parse_answer` validates
an answer with pydantic and returns a typed proposal, or raises an AnswerError whose text
is quoted back to the model on the retry.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Collection
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from memsync.cycles import jsontext
from memsync.cycles.promptkit import Kind
from memsync.cycles.proposals import (
    CONTENT_MAX,
    LEDGER_MAX,
    TITLE_MAX,
    InsightNoop,
    InsightWrite,
    Proposal,
    PruneCheckpoint,
    PruneRemove,
)

__all__ = [
    "CONTENT_MAX",
    "LEDGER_MAX",
    "TITLE_MAX",
    "AnswerError",
    "InsightNoop",
    "InsightWrite",
    "Proposal",
    "PruneCheckpoint",
    "PruneRemove",
    "parse_answer",
]


class AnswerError(ValueError):
    """An answer that cannot be used; the text says why, in words fit to quote back."""


def parse_answer(kind: Kind, text: str, known_ids: Collection[str] | None = None) -> Proposal:
    """The proposal in a model's answer text (a JSON object, possibly after a `<think>`
    block or inside a ```json fence). For prune, `known_ids` makes unknown ids an error."""
    data = _json_object(text)
    adapter = _INSIGHT if kind == "insight" else _PRUNE
    try:
        answer = adapter.validate_python(data)
    except ValidationError as exc:
        actions = "'write' or 'noop'" if kind == "insight" else "'remove' or 'checkpoint'"
        raise AnswerError(_explain(exc, actions)) from None
    if isinstance(answer, _Write):
        return InsightWrite(answer.title, answer.content)
    if isinstance(answer, _Noop):
        return InsightNoop(answer.reason)
    if isinstance(answer, _Checkpoint):
        return PruneCheckpoint(answer.ledger)
    ids = tuple(dict.fromkeys(answer.remove))
    if known_ids is not None:
        unknown = [item for item in ids if item not in known_ids]
        if unknown:
            listed = ", ".join(repr(item) for item in unknown[:20])
            raise AnswerError(
                f"remove: no item of the memory has the id(s) {listed}; name only ids that "
                "appear in the memory now"
            )
    return PruneRemove(ids, answer.ledger)


_THINK = re.compile(r"\A\s*<think>.*?</think>", re.DOTALL)
_FENCED = re.compile(r"\A```[A-Za-z]*[ \t]*\n(.*)\n[ \t]*```\Z", re.DOTALL)
_ID = re.compile(r"[A-Za-z0-9_.-]+")


def _json_object(text: str) -> dict[str, Any]:
    body = _THINK.sub("", text, count=1).strip()
    fenced = _FENCED.match(body)
    if fenced:
        body = fenced.group(1).strip()
    if not body:
        raise AnswerError("the answer was empty; it must be one JSON object")
    try:
        value = jsontext.loads(body, object_pairs_hook=_no_duplicates)
    except jsontext.JSONRefused as exc:
        raise AnswerError(f"the answer is not usable JSON: {exc.message}") from None
    if not isinstance(value, dict):
        raise AnswerError(f"the answer must be a JSON object, not {type(value).__name__}")
    return value


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    twice = sorted({key for key in keys if keys.count(key) > 1})
    if twice:
        # JSONDecodeError's own text would claim a position; a ValueError reads plainer.
        raise AnswerError(f"the key(s) {', '.join(map(repr, twice))} appear twice")
    return dict(pairs)


def _explain(exc: ValidationError, actions: str) -> str:
    parts = []
    for error in exc.errors(include_url=False):
        loc = [str(part) for part in error["loc"][1:]] or [str(p) for p in error["loc"]]
        where = ".".join(loc) or "answer"
        message = str(error["msg"]).removeprefix("Value error, ")
        if error["type"] in ("union_tag_invalid", "union_tag_not_found"):
            where, message = "action", f"must be {actions}"
        parts.append(f"{where}: {message}")
    return "; ".join(parts)


def _title(value: str) -> str:
    """One printable line; a redundant `insight:` the model put in front is dropped."""
    value = value.strip()
    if value.lower().startswith("insight:"):
        value = value[len("insight:") :].strip()
    if not value:
        raise ValueError("must not be empty")
    if any(unicodedata.category(char)[0] in "CZ" and char != " " for char in value):
        raise ValueError("must be one line of printable text")
    if len(value) > TITLE_MAX:
        raise ValueError(f"has {len(value)} characters; at most {TITLE_MAX}")
    return value


def _text(limit: int, *, required: bool) -> AfterValidator:
    def check(value: str) -> str:
        value = value.strip()
        if required and not value:
            raise ValueError("must not be empty")
        if "\x00" in value:
            raise ValueError("must not contain NUL characters")
        if len(value) > limit:
            raise ValueError(f"has {len(value)} characters; at most {limit}")
        return value

    return AfterValidator(check)


def _ids(values: list[str]) -> list[str]:
    bad = [value for value in values if not _ID.fullmatch(value)]
    if bad:
        raise ValueError(
            f"{bad[0]!r} is not an item id (letters, digits, '_', '.', '-'; no kind prefix)"
        )
    return values


class _Answer(BaseModel):
    # Strict types (no "3" for 3); extra keys a chatty model adds are ignored, not refused.
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class _Write(_Answer):
    action: Literal["write"]
    title: Annotated[str, AfterValidator(_title)]
    content: Annotated[str, _text(CONTENT_MAX, required=True)]


class _Noop(_Answer):
    action: Literal["noop"]
    reason: Annotated[str, _text(2_000, required=False)]


class _Remove(_Answer):
    action: Literal["remove"]
    remove: Annotated[list[str], Field(min_length=1, max_length=1_000), AfterValidator(_ids)]
    ledger: Annotated[str, _text(LEDGER_MAX, required=True)]


class _Checkpoint(_Answer):
    action: Literal["checkpoint"]
    ledger: Annotated[str, _text(LEDGER_MAX, required=False)]


_INSIGHT: TypeAdapter[_Write | _Noop] = TypeAdapter(
    Annotated[_Write | _Noop, Field(discriminator="action")]
)
_PRUNE: TypeAdapter[_Remove | _Checkpoint] = TypeAdapter(
    Annotated[_Remove | _Checkpoint, Field(discriminator="action")]
)
