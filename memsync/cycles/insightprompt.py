"""What the insight role is told (reference §4): recent commits, the memory that changed,
the graph's headings and the earlier logs; the commit contract for a `command` role, the
exact JSON answer for an `openai` role.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memsync.cycles.promptkit import (
    CONTEXT_BUDGET,
    DATA_NOTE,
    Budget,
    Executor,
    Prompt,
    listing,
)
from memsync.cycles.proposals import CONTENT_MAX, TITLE_MAX


@dataclass(frozen=True)
class InsightInputs:
    """What an insight turn is told. `changed_memory` is the memory text that changed since
    the last insight (a diff or the changed files); `headings` are the current graph's
    headings, one line each (`## Deploys {#deploys}`)."""

    root: str
    recent_commits: Sequence[str] = ()  # subjects, newest first
    changed_memory: str = ""
    headings: Sequence[str] = ()
    earlier_logs: Sequence[str] = ()  # names under insight_logs/, newest first


_INSIGHT_ROLE = """\
You are the insight role of the memory root `{root}`. The root is the long-term memory of \
a person and the coding agents working with them: Markdown files in the RightMemory format \
(MEMORY.md and its MEMORY_*.md detail files, a graph of headings and `id` nodes joined by \
typed edges such as `dep:other-id`), kept in git and synchronised by memsync.

Your work is reflection, not maintenance. Look at how this memory has been changing and \
write one short essay about its shape: patterns that keep coming back, entries that pull \
against each other, risks and blind spots, and the moves that would make it more useful \
next. Be concrete: name the items you draw on by their ids. Do not restate the memory; \
say what it adds up to. A few paragraphs are enough.

You never edit the memory itself and never change an earlier insight log. When nothing \
worth saying stands out, writing nothing is the right answer, not a failure.

{data_note}"""

_INSIGHT_COMMAND = """\
## How to deliver

You run as a command. Your current directory is a private git worktree of the root, \
checked out at its latest commit; read any file there and its history (`git log`, \
`git show`).

- To write: create exactly one new file `insight_logs/<name>.md`, where `<name>` is the \
UTC time as `YYYY-MM-DD-HHMMSS` (only letters, digits, `_`, `.` and `-` are allowed), in \
Markdown prose without front matter. Stage it with `git add -f insight_logs/<name>.md` \
(the root's .gitignore ignores files that are not forced in) and make one commit whose \
subject is `insight: ` followed by a few words naming the reflection.
- To pass: change nothing and make no commit.
- Change no other file, leave nothing uncommitted, make no empty commit.

memsync checks your commit before anything lands: a commit that touches any path other \
than one new `insight_logs/<name>.md` is refused (grant-violation) and nothing lands."""

_INSIGHT_OPENAI = f"""\
## How to answer

Reply with one JSON object and nothing else, in exactly one of these two forms:

{{"action": "write", "title": "...", "content": "..."}}
{{"action": "noop", "reason": "..."}}

- `title`: one line of at most {TITLE_MAX} characters naming the reflection; memsync \
commits the note as `insight: <title>`.
- `content`: the essay, Markdown prose without front matter, at most {CONTENT_MAX} \
characters; memsync saves it as a new file `insight_logs/YYYY-MM-DD-HHMMSS.md`.
- `reason`: one sentence saying why nothing is worth writing now."""


def insight_prompt(inputs: InsightInputs, executor: Executor) -> Prompt:
    system = "\n\n".join(
        (
            _INSIGHT_ROLE.format(root=inputs.root, data_note=DATA_NOTE),
            _INSIGHT_COMMAND if executor == "command" else _INSIGHT_OPENAI,
        )
    )
    budget = Budget(CONTEXT_BUDGET)
    parts = ["# Context"]
    parts.append("## Recent commits (newest first)\n\n" + listing(inputs.recent_commits, budget))
    changed = inputs.changed_memory.strip()
    parts.append(
        "## Memory text that changed recently\n\n"
        + (budget.fenced(changed, executor) if changed else "(none given)")
    )
    parts.append("## Current headings of the memory graph\n\n" + listing(inputs.headings, budget))
    parts.append(
        "## Earlier insight logs (newest first)\n\n" + listing(inputs.earlier_logs, budget)
    )
    return Prompt(system, "\n\n".join(parts))
