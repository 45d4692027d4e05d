"""What the insight and pruner roles are told, and the answers an `openai` role may give.

A prompt, built from plain values the caller passes, has two parts: `system` says what
the role is for, its rules and how to deliver (the commit contract for `command` roles,
the exact JSON answer for `openai` roles); `user` carries the context (recent commits,
memory text, the previous ledger), fenced and marked as data so that text inside the
memory is never taken for instructions. A `command` role gets both parts as one text
(`Prompt.text`) on stdin and in its prompt file.

The answer format the prompt states is enforced here too, in one place: `parse_answer`
validates an `openai` answer with pydantic and returns a typed proposal, or raises an
AnswerError whose text is quoted back to the model on the retry.

The parts live in `promptkit.py` (shared rendering), `insightprompt.py`, `pruneprompt.py`
and `answers.py`; this module gathers their public names.
"""

from __future__ import annotations

from memsync.cycles.answers import (
    CONTENT_MAX,
    LEDGER_MAX,
    TITLE_MAX,
    AnswerError,
    InsightNoop,
    InsightWrite,
    Proposal,
    PruneCheckpoint,
    PruneRemove,
    parse_answer,
)
from memsync.cycles.insightprompt import InsightInputs, insight_prompt
from memsync.cycles.promptkit import (
    CONTEXT_BUDGET,
    DATA_NOTE,
    SECTION_BUDGET,
    Budget,
    Executor,
    Kind,
    Prompt,
    correction,
    fence_for,
    files_block,
    listing,
)
from memsync.cycles.pruneprompt import PruneInputs, prune_prompt

__all__ = [
    "CONTENT_MAX",
    "CONTEXT_BUDGET",
    "DATA_NOTE",
    "LEDGER_MAX",
    "SECTION_BUDGET",
    "TITLE_MAX",
    "AnswerError",
    "Budget",
    "Executor",
    "InsightInputs",
    "InsightNoop",
    "InsightWrite",
    "Kind",
    "Prompt",
    "Proposal",
    "PruneCheckpoint",
    "PruneInputs",
    "PruneRemove",
    "correction",
    "fence_for",
    "files_block",
    "insight_prompt",
    "listing",
    "parse_answer",
    "prune_prompt",
]
