"""What an `openai` role may propose, as typed values code applies (`roles.apply`), and the
bounds of their texts: plain values, free of the answer parser (`answers`, pydantic), so
that a turn with an agent CLI never loads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

TITLE_MAX = 100
CONTENT_MAX = 64_000
LEDGER_MAX = 64_000


@dataclass(frozen=True)
class InsightWrite:
    """Write `content` as a new insight log and commit it as `insight: <title>`."""

    title: str
    content: str

    @property
    def subject(self) -> str:
        return f"insight: {self.title}"

    @property
    def text(self) -> str:
        """The log file's text (ending in one newline)."""
        return self.content.rstrip("\n") + "\n"

    @staticmethod
    def log_path(when: datetime) -> str:
        """`insight_logs/YYYY-MM-DD-HHMMSS.md` for `when` (UTC)."""
        return f"insight_logs/{when.astimezone(UTC):%Y-%m-%d-%H%M%S}.md"


@dataclass(frozen=True)
class InsightNoop:
    reason: str


@dataclass(frozen=True)
class PruneRemove:
    """Remove these items (and the edges and Focus lines naming them); the ledger is the
    commit body."""

    remove: tuple[str, ...]
    ledger: str

    @property
    def message(self) -> str:
        return f"prune: expired active memory\n\n{self.ledger}\n"


@dataclass(frozen=True)
class PruneCheckpoint:
    """Nothing goes this generation: an empty `prune: checkpoint` commit."""

    ledger: str

    @property
    def message(self) -> str:
        return f"prune: checkpoint\n\n{self.ledger}\n" if self.ledger else "prune: checkpoint\n"


Proposal = InsightWrite | InsightNoop | PruneRemove | PruneCheckpoint
