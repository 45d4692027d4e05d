"""What a prune turn knows from the root's history before the model runs (reference §3.2,
§3.5, §3.7), and what code decides around the model: which items revival grace keeps,
which items a candidate removed, and the ledger a landed prune commit carries.

    facts = prune_facts(git, head, generation_commits, revival_grace)
    facts.graced            # id -> K: kept at this prune as `grace K/N`, whatever the model says
    grace_problems(facts, removed_items(git, facts, candidate))   # a role that removed one
    ledger_message(message, facts, removed)                      # the commit message we land
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from memsync.cycles.ledger import Ledger, grace_due, parse_ledger, without_sections, written
from memsync.cycles.pressure import MEMORY_PATHS
from memsync.transports.git import Git
from memsync.validators.assembly import build_graph
from memsync.validators.graphmodel import MemoryGraph
from memsync.validators.problems import Problem

BODY_MAX = 256 * 1024  # characters of a previous prune body parsed at most
RAW_MAX = 16_000  # characters of it shown to the model
SNAPSHOT_MAX = 2_000  # unchanged items listed at most
TITLE_MAX = 160


@dataclass(frozen=True)
class PruneFacts:
    head: str
    generation: int  # this prune's number: the `prune:` commits before it, plus one
    boundary: str | None  # the latest `prune:` commit, or None (never pruned)
    snapshot_at: str | None  # the boundary, or the generation's first memory commit
    previous_body: str  # the latest prune commit's body ("" when none), cut to RAW_MAX
    previous: Ledger
    revival_grace: int
    graced: Mapping[str, int] = field(default_factory=dict)  # id -> K at this prune
    unchanged: tuple[str, ...] = ()  # "`id` (file) title" of items unchanged since snapshot_at
    changed: int = 0  # memory items new or changed since snapshot_at
    files: Mapping[str, str] = field(default_factory=dict)  # item id -> its file now

    def protected(self) -> list[str]:
        """Prompt lines for the ids in grace: "`id` grace K/N"."""
        return [f"`{i}` grace {k}/{self.revival_grace}" for i, k in sorted(self.graced.items())]


def prune_facts(git: Git, head: str, generation_commits: int, revival_grace: int) -> PruneFacts:
    prunes = [oid for oid, subject in git.subjects(head) if subject.startswith("prune:")]
    boundary = prunes[0] if prunes else None
    body = ""
    if boundary is not None:
        message = git.commit_message(boundary)[:BODY_MAX]
        body = message.partition("\n")[2].strip()
    previous = parse_ledger(body)
    snapshot_at = boundary or _generation_start(git, head, generation_commits)
    now = _memory_graph(git, head)
    items = {i: item for i, item in now.items.items() if item.tree == "memory"}
    before = _memory_graph(git, snapshot_at).items if snapshot_at else {}
    unchanged: list[str] = []
    changed = 0
    for item_id, item in sorted(items.items(), key=lambda kv: (kv[1].file, kv[1].line)):
        old = before.get(item_id)
        if old is None or old.content_hash != item.content_hash:
            changed += 1
        elif len(unchanged) < SNAPSHOT_MAX:
            unchanged.append(f"`{item_id}` ({item.file}) {_title(now, item.file, item.line)}")
    return PruneFacts(
        head=head,
        generation=len(prunes) + 1,
        boundary=boundary,
        snapshot_at=snapshot_at,
        previous_body=body[:RAW_MAX],
        previous=previous,
        revival_grace=revival_grace,
        graced=grace_due(previous, items, revival_grace),
        unchanged=tuple(unchanged),
        changed=changed,
        files={i: item.file for i, item in items.items()},
    )


def _generation_start(git: Git, head: str, generation_commits: int) -> str | None:
    """Never pruned: the commit before the last N memory commits (reference §3.2 step 3),
    the oldest memory commit when there are no more than N, the root commit when none."""
    touching = git.touching(head, MEMORY_PATHS)
    if len(touching) > generation_commits:
        return touching[len(touching) - generation_commits - 1]
    if touching:
        return touching[0]
    roots = git.root_commits(head)
    return roots[-1] if roots else None


def _memory_graph(git: Git, rev: str) -> MemoryGraph:
    graph, _problems = build_graph(git.tree_view(rev))
    return graph


def _title(graph: MemoryGraph, file: str, line: int) -> str:
    document = graph.documents.get(file)
    if document is None or not 0 < line <= len(document.lines):
        return ""
    text = " ".join(document.lines[line - 1].split())
    return text if len(text) <= TITLE_MAX else text[: TITLE_MAX - 1] + "…"


def memory_ids(git: Git, rev: str) -> set[str]:
    return {i for i, item in _memory_graph(git, rev).items.items() if item.tree == "memory"}


def removed_items(git: Git, facts: PruneFacts, candidate: str) -> set[str]:
    """The memory item ids the facts' head has and `candidate` no longer has."""
    return set(facts.files) - memory_ids(git, candidate)


def grace_problems(facts: PruneFacts, removed: Collection[str]) -> list[Problem]:
    """`grant-violation` for each item in revival grace the candidate removed: while in
    grace an item is outside what the pruner may change (CONTRACT §7)."""
    problems = []
    for item_id in sorted(set(removed) & set(facts.graced)):
        count = facts.graced[item_id]
        since = f" {facts.boundary[:12]}" if facts.boundary else ""
        problems.append(
            Problem(
                "grant-violation",
                facts.files.get(item_id),
                None,
                f"the pruner may not remove '{item_id}': the previous prune{since} removed "
                f"it, it came back, and it is in revival grace "
                f"({count}/{facts.revival_grace})",
            )
        )
    return problems


def ledger_message(message: str, facts: PruneFacts, removed: Collection[str]) -> str:
    """The landed commit's message: the role's subject and other text, with the ledger
    sections replaced by what actually happened (the items that went, and grace K/N for
    every item grace keeps, so the next prune counts on)."""
    subject, _, body = message.strip().partition("\n")
    said = parse_ledger(body)
    ledger = written(removed, facts.graced, facts.revival_grace, said.notes(), {})
    rest = without_sections(body)
    parts = [subject.strip() or "prune: checkpoint"]
    if rest:
        parts.append(rest)
    parts.append(ledger.render())
    return "\n\n".join(parts)
