"""Role executors (CONTRACT §7): how a prune or insight turn asks its model.

`command.py` runs an agent CLI in the candidate worktree; `chat.py` asks an
OpenAI-compatible endpoint for one JSON proposal. Both produce a `RunRecord`
(`runrecord.py`: what ran, how long, how it ended, token counts, output cut to a cap),
which never holds a secret. This module gathers their public names in one place.
"""

from __future__ import annotations

from memsync.cycles.chat import (
    ANSWER_ECHO,
    CONNECT_TIMEOUT,
    RESPONSE_CAP,
    Answer,
    ask_openai,
    ask_openai_blocking,
)
from memsync.cycles.command import (
    BASE_ENV,
    OUTPUT_CAP,
    command_argv,
    role_env,
    run_command,
    uncommitted_changes,
)
from memsync.cycles.runrecord import ExecutorFailed, FailureKind, RunRecord, Scrub

__all__ = [
    "ANSWER_ECHO",
    "BASE_ENV",
    "CONNECT_TIMEOUT",
    "OUTPUT_CAP",
    "RESPONSE_CAP",
    "Answer",
    "ExecutorFailed",
    "FailureKind",
    "RunRecord",
    "Scrub",
    "ask_openai",
    "ask_openai_blocking",
    "command_argv",
    "role_env",
    "run_command",
    "uncommitted_changes",
]
