"""Roles in a turn: an agent CLI (`command`) or an OpenAI-compatible endpoint (`openai`),
on the executors of `command.py` and `chat.py` and the prompts of `insightprompt.py` and
`pruneprompt.py` (CONTRACT §7).

With `openai` the model only proposes and code applies: an insight log written and
committed as `insight: <title>`, or prune removals made with the graph editor (the items
and every edge that points at them) committed as `prune: expired active memory` with the
ledger as the body, or an empty `prune: checkpoint`. Items in revival grace are dropped
from a removal whatever the model said (the turn rewrites the ledger to record them). The
turn then checks grants and the gate as for any role. Every executor call, whatever its
outcome, writes one line to the root's run log (`runlog.py`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

from memsync import timefmt
from memsync.config.sections import CommandRoleSettings, OpenAIRoleSettings
from memsync.cycles.command import run_command
from memsync.cycles.insightprompt import InsightInputs, insight_prompt
from memsync.cycles.promptkit import Executor, Prompt
from memsync.cycles.proposals import InsightNoop, InsightWrite, PruneCheckpoint, PruneRemove
from memsync.cycles.pruneprompt import PruneInputs, prune_prompt
from memsync.cycles.rolegroups import RoleGroups
from memsync.cycles.runlog import RunLog
from memsync.cycles.runrecord import ExecutorFailed
from memsync.cycles.sandbox import escaped_problems
from memsync.cycles.turn import RoleFailed, TurnInput
from memsync.transports.git import Git
from memsync.transports.process import Deadline
from memsync.validators.assembly import build_graph
from memsync.validators.blocks import FocusRef, Heading, Node
from memsync.validators.document import decode, scan
from memsync.validators.editor import remove_items
from memsync.validators.tree import TreeView

log = logging.getLogger(__name__)

Proposal = InsightWrite | InsightNoop | PruneRemove | PruneCheckpoint


class CommandRole:
    """An agent CLI in the candidate worktree; it commits its own work."""

    def __init__(
        self,
        role: CommandRoleSettings,
        scratch: Path | None = None,
        runlog: RunLog | None = None,
        groups: RoleGroups | None = None,
    ) -> None:
        self.role = role
        self.scratch = scratch
        self.runlog = runlog
        self.groups = groups

    def __call__(self, turn: TurnInput, deadline: Deadline) -> None:
        try:
            record = run_command(
                self.role,
                worktree=turn.worktree,
                prompt=prompt_for(turn, "command"),
                operation_id=turn.operation_id,
                deadline=deadline,
                scratch=self.scratch,
                groups=self.groups,
            )
        except ExecutorFailed as exc:
            if self.runlog is not None:
                self.runlog.write(exc.record)
            raise RoleFailed(exc.message, escaped_problems(exc)) from exc
        if self.runlog is not None:
            self.runlog.write(record)
        log.info("%s", record.summary())


class OpenAIRole:
    """A chat-completions endpoint: the model proposes, `apply` commits it."""

    def __init__(self, role: OpenAIRoleSettings, runlog: RunLog | None = None) -> None:
        self.role = role
        self.runlog = runlog

    def __call__(self, turn: TurnInput, deadline: Deadline) -> None:
        # The HTTP client (aiohttp, asyncio) loads for an `openai` role only.
        from memsync.cycles.chat import ask_openai_blocking  # noqa: PLC0415

        known = _item_ids(turn.worktree) if turn.cycle == "prune" else None
        try:
            got = ask_openai_blocking(
                self.role,
                "insight" if turn.cycle == "insight" else "prune",
                prompt_for(turn, "openai"),
                operation_id=turn.operation_id,
                deadline=deadline,
                known_ids=known,
            )
        except ExecutorFailed as exc:
            if self.runlog is not None:
                self.runlog.write(exc.record)
            raise RoleFailed(exc.message) from exc
        if self.runlog is not None:
            self.runlog.write(got.record)
        log.info("%s", got.record.summary())
        apply(turn, got.proposal)


def prompt_for(turn: TurnInput, executor: Executor) -> Prompt:
    """The turn's prompt, from what the worktree (at the root's HEAD) holds."""
    git = Git(turn.worktree, trusted_alternates=True)  # the role's own repository
    root = turn.worktree
    if turn.cycle == "insight":
        logs = sorted((p.name for p in (root / "insight_logs").glob("*.md")), reverse=True)
        subjects = git.recent_subjects(20)
        memory = _memory(root)
        headings = [
            line for text in memory.values() for line in text.splitlines() if line.startswith("#")
        ]
        return insight_prompt(
            InsightInputs(turn.root, subjects, "", headings[:200], logs[:20]),
            executor,
        )
    context: Mapping[str, str] = turn.context
    boundary = context.get("boundary") or None
    facts = turn.prune
    snapshot: dict[str, str] = {}
    if facts is not None and facts.snapshot_at and executor == "openai":
        snapshot = _memory_at(git, facts.snapshot_at)
    return prune_prompt(
        PruneInputs(
            root=turn.root,
            generation=facts.generation if facts else int(context.get("generation_number") or 0),
            generation_commits=int(context.get("generation_commits", "0") or 0),
            commits_since_boundary=int(context.get("count", "0") or 0),
            head=git.commit_id("HEAD"),
            boundary=boundary,
            latest_prune=boundary,
            previous_ledger=facts.previous_body if facts else "",
            boundary_snapshot=snapshot,
            current_memory=_memory(root) if executor == "openai" else {},
            revival_grace=facts.revival_grace if facts else 0,
            protected=facts.protected() if facts else (),
            snapshot_at=facts.snapshot_at if facts else None,
            ledger_summary=facts.previous.summary() if facts and facts.boundary else "",
            unchanged=facts.unchanged if facts else (),
            changed_items=facts.changed if facts else 0,
        ),
        executor,
    )


def apply(turn: TurnInput, proposal: Proposal) -> None:
    """Turn a proposal into a commit in the worktree (nothing for a no-op)."""
    git = Git(turn.worktree, trusted_alternates=True)  # the role's own repository
    if isinstance(proposal, InsightNoop):
        return
    if isinstance(proposal, InsightWrite):
        name = InsightWrite.log_path(timefmt.now())
        _write_inside(turn.worktree, name, proposal.text.encode("utf-8"))
        git.add([name], force=True)
        _commit(git, proposal.subject)
        return
    graced = set(turn.prune.graced) if turn.prune is not None else set()
    head = git.tree_view("HEAD")  # nothing is written before the removal reads it
    if isinstance(proposal, PruneRemove):
        # Revival grace keeps its items; so does Pursuit: a pruner may not edit Pursuit
        # files, so an item a Pursuit edge names stays (its edges could not go).
        kept = (graced | _named_by_pursuit(head)) & set(proposal.remove)
        if kept:
            log.info("prune keeps %s whatever the model proposed", ", ".join(sorted(kept)))
            remove = tuple(item for item in proposal.remove if item not in kept)
            proposal = (
                PruneRemove(remove, proposal.ledger) if remove else PruneCheckpoint(proposal.ledger)
            )
    if isinstance(proposal, PruneCheckpoint):
        _commit(git, proposal.message, allow_empty=True)
        return
    try:
        changed = remove_items(head, set(proposal.remove))
    except KeyError as exc:
        raise RoleFailed(f"the model named ids that are not items: {exc}") from exc
    for path, data in changed.items():
        target = turn.worktree / path
        if data is None:
            git.remove_cached(path)
            target.unlink(missing_ok=True)
        else:
            _write_inside(turn.worktree, path, data)
            git.add([path], force=True)
    _commit(git, proposal.message)


def _named_by_pursuit(tree: TreeView) -> set[str]:
    """The ids Pursuit files point at (their edges' targets and Focus references)."""
    named: set[str] = set()
    for path in tree.entries:
        if path != "PURSUITS.md" and not (path.startswith("PURSUIT_") and path.endswith(".md")):
            continue
        text = decode(tree.content(path))
        if text is None:
            continue
        for block in scan(text, path, pursuit=True).blocks:
            if isinstance(block, FocusRef):
                named.add(block.target)
            elif isinstance(block, Node | Heading):
                named.update(target for _kind, target in block.edges)
    return named


def _write_inside(worktree: Path, name: str, data: bytes) -> None:
    """Write `data` at `name` in the worktree, never through a symlink the checked-out
    commit holds (a local commit is not validated until it is pushed): such a write could
    land outside the worktree."""
    parent = worktree
    for part in name.split("/")[:-1]:
        parent = parent / part
        if parent.is_symlink():
            raise RoleFailed(f"'{name}' lies under a symlink in the root; not written")
        parent.mkdir(exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(worktree / name, flags, 0o644)
    except OSError as exc:
        raise RoleFailed(f"'{name}' could not be written ({exc.strerror})") from exc
    with os.fdopen(fd, "wb") as out:
        out.write(data)


def _memory(root: Path) -> dict[str, str]:
    files = [root / "MEMORY.md", *sorted(root.glob("MEMORY_*.md"))]
    return {p.name: p.read_text(encoding="utf-8", errors="replace") for p in files if p.is_file()}


def _memory_at(git: Git, rev: str) -> dict[str, str]:
    """The active memory files as they were at `rev` (the boundary snapshot)."""
    names = git.tree_names(rev, "MEMORY.md")
    names += [n for n in git.tree_names(rev) if n.startswith("MEMORY_")]
    found: dict[str, str] = {}
    for name in sorted({n for n in names if n.endswith(".md")}):
        found[name] = (git.file_at(rev, name) or b"").decode("utf-8", "replace")
    return found


def _item_ids(root: Path) -> set[str]:
    graph, _ = build_graph(Git(root, trusted_alternates=True).tree_view("HEAD"))
    return set(graph.items)


def _commit(git: Git, message: str, *, allow_empty: bool = False) -> None:
    git.commit_index(message, git.identity_config(), allow_empty=allow_empty, verify=False)
