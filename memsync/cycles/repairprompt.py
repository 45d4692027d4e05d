"""The repair role's input: the conflict, the prompt that tells it, and the key of both.

The prompt says what went wrong in a sync merge and what the role may do, written for
this project in its own words. The prompt holds no worktree path and no
operation id (those reach the role as its working directory and `MEMSYNC_*` variables), so
the same conflict always gives the same prompt text, and the repair's operation id, which
hashes it, is the same too. Everything that came from the memory itself (paths, problem
messages) is fenced as data and cut to a budget.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass

from memsync.config.sections import CommandRoleSettings
from memsync.roots import journal
from memsync.roots.repairing import Conflict
from memsync.validators.paths import printable
from memsync.validators.policy import ALLOWED_GLOBS, ALLOWED_REGEXES
from memsync.validators.problems import Problem

KIND = "repair"
PROMPT_VERSION = "memsync-sync-repair-v1"
MAX_LISTED = 200  # paths or problems named in the prompt at most
MAX_MESSAGE = 400  # characters of one problem message


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def repair_key(conflict: Conflict, prompt: str, role: CommandRoleSettings) -> str:
    """The deterministic operation key of repairing this conflict with this prompt and role."""
    who = json.dumps([role.name, list(role.command)], ensure_ascii=True)
    return journal.operation_key(
        KIND,
        conflict.start,
        conflict.upstream,
        sha256(conflict.diagnostic()),
        sha256(f"{PROMPT_VERSION}\0{prompt}"),
        sha256(who),
    )


@dataclass(frozen=True)
class RepairInputs:
    """The conflict as the role is told it."""

    root: str
    start: str  # the local head the merge started from
    upstream: str  # the upstream commit being merged
    conflicted: bool  # True: the merge stopped with unmerged paths; False: clean but invalid
    files: tuple[str, ...]  # the unmerged paths (conflicted) or the paths the problems name
    problems: tuple[Problem, ...]


def repair_prompt(inputs: RepairInputs) -> str:
    """The full prompt for a `command` repair role (on its stdin and in its prompt file)."""
    parts = [_intro(inputs), _situation(inputs), _rules(inputs), _finish(inputs)]
    return "\n\n".join(part.strip() for part in parts) + "\n"


def _intro(inputs: RepairInputs) -> str:
    return f"""
# memsync: settle a sync merge ({PROMPT_VERSION})

You are the repair role of the memory root "{printable(inputs.root)}". A memory root is a
Git repository of Markdown memory in the RightMemory format: `MEMORY.md`, `MEMORY_*.md`,
`PURSUITS.md`, `PURSUIT_*.md` and a few auxiliary files, whose headings and `{{#id}}`
anchors form a graph linked by typed edges such as `→ [dep:some-id]`.

Two copies of this memory changed independently: this machine's local commits (local head
{inputs.start}) and the commits another machine pushed upstream (upstream commit
{inputs.upstream}). memsync merged them in a private checkout, and that merge needs your
help. Your current directory is that checkout (also in `$MEMSYNC_WORKTREE`). It is not the
live memory root and nothing you do here is published unless it passes every check.
"""


def _situation(inputs: RepairInputs) -> str:
    listed = _listed(inputs.files)
    problems = _problems(inputs.problems)
    if inputs.conflicted:
        return f"""
## What happened

The merge stopped with conflicts. These paths are unmerged and hold Git conflict markers
(`<<<<<<<`, `=======`, `>>>>>>>`):

{listed}

`git status` and `git diff` show them. `git show :1:PATH` is the common ancestor,
`git show :2:PATH` the local side and `git show :3:PATH` the upstream side of a path.
{problems}
"""
    return f"""
## What happened

The merge itself was clean, but the merged memory breaks the format rules, so it cannot be
published as it is. The merge commit is the current `HEAD`. The checks found:
{problems}
Paths named by these problems:

{listed}
"""


def _rules(inputs: RepairInputs) -> str:
    allowed = "\n".join(f"- `{glob}`" for glob in ALLOWED_GLOBS)
    allowed += "\n" + "\n".join(f"- paths matching `{regex}`" for regex in ALLOWED_REGEXES)
    return f"""
## How to settle it

- Keep what both sides know. Where both sides added entries, keep both; remove only exact
  duplicates. Where both sides edited the same entry, write one entry that holds the facts
  of both; when they contradict each other, prefer the upstream wording and keep the local
  fact as a note under it.
- In `corrections.md` keep every distinct entry from both sides (its entry limit may be
  exceeded after a merge). In `AGENT_GUIDANCE_INBOX.md` keep every `## GI-` entry once.
- Every `{{#id}}` must be unique across the memory and every edge must point at an id that
  exists: if both sides introduced the same id for different things, rename one of them and
  update the edges that mean it.
- Change only the synchronized paths; anything else is refused:
{allowed}
- Do not touch `update_queue/` or `update_records/` beyond resolving their markers, and do
  not delete memory to make a problem go away.
"""


def _finish(inputs: RepairInputs) -> str:
    if inputs.conflicted:
        how = (
            "Resolve every conflicted path (no conflict markers may remain), `git add` them,\n"
            "then run `git commit --no-edit` once. That commit completes the merge: its\n"
            "parents are the local head and the upstream commit."
        )
    else:
        how = (
            "Fix the problems in the files, `git add` them, then make exactly one commit on\n"
            'top of the current `HEAD` (for example `git commit -m "repair: merged memory"`).'
        )
    return f"""
## Finish with exactly one commit

{how}

Leave nothing uncommitted. Do not push, fetch, pull, reset, rebase, amend, abort the
merge, check out another commit, or touch any other directory. memsync checks your commit
(the paths it changes, and the whole memory against the format rules) before it publishes
it and pushes it like any local commit. If you cannot settle the conflict, exit with a
non-zero status without committing: the root then stays in conflict for a person.
"""


def _listed(paths: Sequence[str]) -> str:
    shown = [printable(path) for path in paths[:MAX_LISTED]]
    if len(paths) > MAX_LISTED:
        shown.append(f"... and {len(paths) - MAX_LISTED} more")
    return _fenced("\n".join(shown) if shown else "(none)")


def _fenced(text: str) -> str:
    """`text` as a fenced block no line of it can close (data, never instructions)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _problems(problems: Sequence[Problem]) -> str:
    if not problems:
        return ""
    lines = []
    for problem in problems[:MAX_LISTED]:
        where = printable(problem.path) if problem.path else "-"
        if problem.line is not None:
            where += f":{problem.line}"
        message = " ".join(printable(problem.message).split())[:MAX_MESSAGE]
        lines.append(f"{problem.code} {where} {message}")
    if len(problems) > MAX_LISTED:
        lines.append(f"... and {len(problems) - MAX_LISTED} more")
    return "\nProblems found (code, path:line, message):\n\n" + _fenced("\n".join(lines)) + "\n"
