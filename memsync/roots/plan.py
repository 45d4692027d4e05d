"""The sync planner: plain facts about three commits in, one frozen plan out.

Decide, then do. The cycle asks git a few yes/no questions (ancestry, a merge base),
hands the answers here, and executes whatever plan comes back. Safety refusals live here:
a rewound or unrelated upstream is refused unless the person said `--accept-rewrite`,
and then it is adopted as it is (never merged with the history it dropped): only this
root's own commits that never reached the old trusted upstream are replayed onto it.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Action(Enum):
    CURRENT = "current"  # local == upstream: nothing to fetch in, nothing to push
    BEHIND = "behind"  # fast-forward to the upstream commit
    AHEAD = "ahead"  # push local commits
    DIVERGED = "diverged"  # merge the upstream commit, then push
    CREATE = "create"  # the upstream branch does not exist yet: push to create it
    REWOUND = "rewound"  # refuse: rewritten, rewound or unrelated upstream
    ADOPT = "adopt"  # --accept-rewrite: take the rewritten upstream, replay own commits


@dataclass(frozen=True)
class Facts:
    """What git said. Ancestry answers are None when the question did not arise."""

    local: str
    upstream: str | None
    trusted: str | None
    local_in_upstream: bool = False  # local is an ancestor of upstream
    upstream_in_local: bool = False  # upstream is an ancestor of local
    trusted_in_upstream: bool | None = None  # trusted is an ancestor of upstream
    related: bool = True  # local and upstream share history


@dataclass(frozen=True)
class Plan:
    action: Action
    local: str
    upstream: str | None
    reason: str

    @property
    def incoming(self) -> bool:
        """Upstream commits must be checked and admitted into the root."""
        return self.action in (Action.BEHIND, Action.DIVERGED, Action.ADOPT)

    @property
    def outgoing(self) -> bool:
        """Local commits must be checked and pushed."""
        return self.action in (Action.AHEAD, Action.DIVERGED, Action.CREATE, Action.ADOPT)

    def describe(self) -> str:
        short_up = self.upstream[:12] if self.upstream else "none"
        return f"{self.action.value}: local {self.local[:12]}, upstream {short_up} ({self.reason})"


def questions(local: str, upstream: str | None, trusted: str | None) -> set[str]:
    """Which ancestry questions `decide` needs answered for these three commits."""
    if upstream is None or upstream == local:
        return set()
    needed = {"local_in_upstream", "upstream_in_local", "related"}
    if trusted is not None and trusted != upstream:
        needed.add("trusted_in_upstream")
    return needed


def decide(facts: Facts, *, accept_rewrite: bool = False) -> Plan:
    local, upstream, trusted = facts.local, facts.upstream, facts.trusted
    if upstream is None:
        if trusted is not None and not accept_rewrite:
            return Plan(
                Action.REWOUND,
                local,
                None,
                f"the upstream branch does not exist, but this root trusted upstream commit "
                f"{trusted[:12]} before (the branch was deleted or renamed, or the root now "
                "names another remote or branch)",
            )
        return Plan(Action.CREATE, local, None, "the upstream branch does not exist yet")
    if upstream == local:
        return Plan(Action.CURRENT, local, upstream, "local and upstream are the same commit")

    rewritten = trusted is not None and trusted != upstream and not facts.trusted_in_upstream
    if not facts.related:
        if not accept_rewrite:
            return Plan(
                Action.REWOUND, local, upstream, "the upstream shares no history with this root"
            )
        return Plan(
            Action.ADOPT, local, upstream, "unrelated upstream history adopted (--accept-rewrite)"
        )
    if rewritten and not accept_rewrite:
        return Plan(
            Action.REWOUND,
            local,
            upstream,
            f"the upstream no longer contains the last trusted commit {trusted[:12]}"
            if trusted
            else "the upstream was rewritten",
        )
    if rewritten:
        return Plan(Action.ADOPT, local, upstream, "rewritten upstream adopted (--accept-rewrite)")

    if facts.local_in_upstream:
        return Plan(Action.BEHIND, local, upstream, "upstream has new commits")
    if facts.upstream_in_local:
        return Plan(Action.AHEAD, local, upstream, "local has commits the upstream lacks")
    return Plan(Action.DIVERGED, local, upstream, "local and upstream both have new commits")
