"""Where a root's private state lives under the state dir, and the refs memsync owns."""

from __future__ import annotations

from pathlib import Path

from memsync.values import value

CANDIDATE_REFS = "refs/memsync/candidates/"
RESCUE_REFS = "refs/memsync/rescue/"


@value
class RootLayout:
    """`<state_dir>/roots/<name>/`: state.json, journal/, worktrees/, lock."""

    base: Path

    @classmethod
    def for_root(cls, state_dir: Path, name: str) -> RootLayout:
        return cls(state_dir / "roots" / name)

    @property
    def state_file(self) -> Path:
        return self.base / "state.json"

    @property
    def journal_dir(self) -> Path:
        return self.base / "journal"

    @property
    def worktrees_dir(self) -> Path:
        return self.base / "worktrees"

    @property
    def config_record(self) -> Path:
        """The config guard's reading of the root's repository, for the next one-shot
        process (`transports.gitconfigrecord`)."""
        return self.base / "repo-config.json"

    @property
    def lock_file(self) -> Path:
        return self.base / "lock"

    def worktree(self, operation_id: str) -> Path:
        return self.worktrees_dir / operation_id


def candidate_ref(operation_id: str) -> str:
    return f"{CANDIDATE_REFS}{operation_id}"


def rescue_ref(reason: str, commit: str) -> str:
    """A stable name per refused head, so a repeated refusal does not pile up refs."""
    return f"{RESCUE_REFS}{reason}/{commit}"
