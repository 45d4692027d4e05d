"""What the pruner role is told (reference §3.5, §3.7): the generation, the boundary and
its snapshot, the previous ledger and the ids in revival grace; the commit contract for a
`command` role, the exact JSON answer for an `openai` role.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from memsync.cycles.promptkit import (
    CONTEXT_BUDGET,
    DATA_NOTE,
    Budget,
    Executor,
    Prompt,
    files_block,
    listing,
)
from memsync.cycles.proposals import LEDGER_MAX
from memsync.validators.corrections import COLLECTION_PATHS


@dataclass(frozen=True)
class PruneInputs:
    """What a prune turn is told. `boundary_snapshot` is the active memory (path -> text)
    at the boundary commit; `current_memory` the same now (an `openai` role cannot read the
    worktree, so it needs it; a `command` role may be given it or not). `protected` are the
    ids under revival grace, which the caller keeps whatever the model answers."""

    root: str
    generation: int
    generation_commits: int
    commits_since_boundary: int
    head: str
    boundary: str | None  # None: no commit to compare with (a root never pruned, no memory)
    latest_prune: str | None
    previous_ledger: str = ""
    boundary_snapshot: Mapping[str, str] = field(default_factory=dict)
    current_memory: Mapping[str, str] = field(default_factory=dict)
    revival_grace: int = 2
    protected: Sequence[str] = ()  # "`id` grace K/N" lines
    snapshot_at: str | None = None  # the commit the snapshot is from (boundary or generation start)
    ledger_summary: str = ""  # the previous ledger, parsed
    unchanged: Sequence[str] = ()  # "`id` (file) title" of items unchanged since snapshot_at
    changed_items: int = 0  # memory items new or changed since snapshot_at


_PRUNE_ROLE = """\
You are the pruner role of the memory root `{root}`: the long-term memory of a person and \
their coding agents, Markdown files in the RightMemory format kept in git by memsync. \
Active memory (MEMORY.md and the MEMORY_*.md files) is meant to forget what stopped \
mattering, so that what matters stays easy to find. Nothing is lost for good: git history \
keeps every item you remove.

Forgetting is paced by activity, not by time. A generation is {per_generation} commits \
that touch active memory, and generation {generation} is due. Compare the memory now with \
the boundary snapshot: the memory as it was when this generation began.

Remove an item (a heading with an id, together with everything under it, or one node \
line) only when all of these hold:
- its meaning did not change during this generation: it says the same as in the boundary \
snapshot;
- nothing you keep needs it as structure;
- it does not carry a rule or fact still in force, answer an open question, or belong to a \
pattern that is still active.
Keep everything else. When unsure, keep it.

Revival grace: an item the previous ledger removed that has come back since was wanted \
again. It is kept for {grace} prunes as `grace K/{grace}` (1 the first time, one more at \
each later prune); after that, judge it like any other item. memsync decides this, not \
you: the ids under `## Protected` are in grace now and are kept whatever you decide (a \
commit that removes one is refused), and memsync writes the ledger's grace counts itself.

Never touch {collections}, PURSUITS.md or any file other than MEMORY.md and MEMORY_*.md, \
and write nothing about pruning into the memory files: the ledger is the record.

The ledger has two sections, each entry on its own line (`- none` for an empty section):

Removed:
- `item-id` why it went
Revival grace:
- `item-id` grace K/{grace} why it stays

{data_note}"""

_PRUNE_COMMAND = """\
## How to deliver

You run as a command. Your current directory is a private git worktree of the root, \
checked out at its latest commit{boundary_hint}.

- Edit MEMORY.md and MEMORY_*.md to remove the items. A heading goes with its body and \
everything under it; the file behind a removed `{{F#id}}`, `{{M#id}}` or `{{S#id}}` heading \
goes too (`git rm` it). Then delete every edge `type:id` and every Focus line that names a \
removed id, so the graph stays valid.
- Commit once, with the subject `prune: expired active memory`, a blank line, then the \
ledger.
- If nothing should go, make an empty commit instead (`git commit --allow-empty`) with the \
subject `prune: checkpoint`, a blank line, then the ledger.
- Leave nothing uncommitted.

memsync checks your commit before anything lands: a commit that touches other paths is \
refused (grant-violation), one that leaves the memory invalid is refused by the validator, \
and nothing lands."""

_PRUNE_OPENAI = f"""\
## How to answer

Reply with one JSON object and nothing else, in exactly one of these two forms:

{{"action": "remove", "remove": ["item-id", "..."], "ledger": "Removed:\\n- `item-id` ..."}}
{{"action": "checkpoint", "ledger": "Removed:\\n- none\\nRevival grace:\\n- none"}}

- `remove`: the ids of the items to remove, as written in the memory without the kind \
(`deploy-rules`, not `F#deploy-rules`). memsync removes each item with everything under \
it, the file behind it, and every edge and Focus line that names it, and commits \
`prune: expired active memory`.
- `checkpoint`: nothing goes this generation; memsync commits an empty `prune: checkpoint`.
- `ledger`: the two sections above, at most {LEDGER_MAX} characters; memsync makes it the \
body of the prune commit."""


def prune_prompt(inputs: PruneInputs, executor: Executor) -> Prompt:
    boundary_hint = ""
    if executor == "command" and inputs.boundary:
        boundary_hint = (
            f"; `git show {inputs.boundary}:MEMORY.md` shows a file as it was at the boundary"
        )
    system = "\n\n".join(
        (
            _PRUNE_ROLE.format(
                root=inputs.root,
                per_generation=inputs.generation_commits,
                generation=inputs.generation,
                grace=inputs.revival_grace,
                collections=" and ".join(COLLECTION_PATHS) + " (the Agent Correction collections)",
                data_note=DATA_NOTE,
            ),
            _PRUNE_COMMAND.format(boundary_hint=boundary_hint)
            if executor == "command"
            else _PRUNE_OPENAI,
        )
    )
    budget = Budget(CONTEXT_BUDGET)
    snapshot = inputs.snapshot_at or inputs.boundary
    since = snapshot[:12] if snapshot else "the first commit"
    parts = [
        "# Context",
        "\n".join(
            (
                f"- generation: {inputs.generation} "
                f"(threshold: {inputs.generation_commits} memory commits each)",
                f"- memory commits since the boundary: {inputs.commits_since_boundary}",
                f"- boundary commit: {inputs.boundary or 'none'} (the snapshot is from {since})",
                f"- latest prune commit: {inputs.latest_prune or 'none (never pruned)'}",
                f"- head: {inputs.head}",
                f"- revival grace: {inputs.revival_grace} prunes",
                f"- memory items new or changed since the snapshot: {inputs.changed_items}",
            )
        ),
        "## Protected (in revival grace: kept whatever you answer)\n\n"
        + listing(inputs.protected, budget),
        "## Previous ledger, parsed\n\n"
        + (
            listing(inputs.ledger_summary.splitlines(), budget)
            if inputs.ledger_summary
            else "(none)"
        ),
        "## Items unchanged since the snapshot (candidates, not a verdict)\n\n"
        + listing(inputs.unchanged, budget),
        "## Previous ledger (the raw body of the latest prune commit)\n\n"
        + (
            budget.fenced(inputs.previous_ledger.strip(), executor)
            if inputs.previous_ledger.strip()
            else "(none: no earlier prune)"
        ),
        "## Boundary snapshot\n\n" + files_block(inputs.boundary_snapshot, budget, executor),
    ]
    if executor == "openai" or inputs.current_memory:
        parts.append(
            "## Active memory now\n\n" + files_block(inputs.current_memory, budget, executor)
        )
    return Prompt(system, "\n\n".join(parts))
