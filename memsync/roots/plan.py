"""The sync planner: plain facts about three commits in, one frozen plan out.

Decide, then do. The cycle asks git a few yes/no questions (ancestry, a merge base),
hands the answers here, and executes whatever plan comes back. Safety refusals live here:
a rewound or unrelated upstream is refused unless the person said `--accept-rewrite`,
and then it is adopted as it is (never merged with the history it dropped): only this
root's own commits that never reached the old trusted upstream are replayed onto it.

Without a trusted upstream (a new or deleted state directory), the commits this root shares
with the remote-tracking head it had before this fetch (`Facts.seen`, their merge base)
stand in for it: they were on the upstream once, so they are not unpushed work, and an
upstream that dropped them is refused as rewound instead of having them pushed back.
"""

from __future__ import annotations

from enum import Enum

from memsync.values import value


class Action(Enum):
    CURRENT = "current"  # local == upstream: nothing to fetch in, nothing to push
    BEHIND = "behind"  # fast-forward to the upstream commit
    AHEAD = "ahead"  # push local commits
    DIVERGED = "diverged"  # merge the upstream commit, then push
    CREATE = "create"  # the upstream branch does not exist yet: push to create it
    REWOUND = "rewound"  # refuse: rewritten, rewound or unrelated upstream
    ADOPT = "adopt"  # --accept-rewrite: take the rewritten upstream, replay own commits


@value
class Facts:
    """What git said. Ancestry answers are None when the question did not arise."""

    local: str
    upstream: str | None
    trusted: str | None
    local_in_upstream: bool = False  # local is an ancestor of upstream
    upstream_in_local: bool = False  # upstream is an ancestor of local
    trusted_in_upstream: bool | None = None  # `anchor` is an ancestor of upstream
    related: bool = True  # local and upstream share history
    # Only without a trusted upstream: the merge base of local and the remote-tracking head
    # before this fetch (that head itself when they have several merge bases; None when
    # there was none, or they share no history).
    seen: str | None = None

    @property
    def anchor(self) -> str | None:
        """The commit the upstream must still contain: the trusted one, else `seen`."""
        return anchor(self.trusted, self.seen)


@value
class Plan:
    """What a cycle does with the facts it read (`decide`), and why."""

    action: Action
    local: str
    upstream: str | None
    reason: str
    # The commit judged as trusted (`Facts.anchor`): the cycle keeps it as the trusted
    # upstream when the root had none, so a refusal holds on the next cycle too.
    trusted: str | None = None

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


def anchor(trusted: str | None, seen: str | None) -> str | None:
    """The commit an upstream must still contain: the trusted upstream, or (without one) the
    newest commit this root shares with the remote-tracking head it had before the fetch."""
    return trusted if trusted is not None else seen


def asks_seen(trusted: str | None, previous: str | None) -> bool:
    """Whether the cycle must find `Facts.seen`: only without a trusted upstream, and only
    when a remote-tracking head existed before this fetch (`previous`)."""
    return trusted is None and previous is not None


def questions(local: str, upstream: str | None, trusted: str | None) -> set[str]:
    """Which ancestry questions `decide` needs answered for these three commits (`trusted`
    is the anchor: `anchor(trusted, seen)`)."""
    if upstream is None or upstream == local:
        return set()
    needed = {"local_in_upstream", "upstream_in_local", "related"}
    if trusted is not None and trusted != upstream:
        needed.add("trusted_in_upstream")
    return needed


def decide(facts: Facts, *, accept_rewrite: bool = False) -> Plan:
    local, upstream, trusted = facts.local, facts.upstream, facts.anchor

    def plan(action: Action, reason: str) -> Plan:
        return Plan(action, local, upstream, reason, trusted)

    if trusted is None:
        held = ""
    elif facts.trusted is not None:
        held = f"the last trusted commit {trusted[:12]}"
    else:
        held = (
            f"commit {trusted[:12]}, which this root holds and its remote-tracking ref held "
            "before this fetch (so it is not unpushed work; this root has no trusted state)"
        )
    if upstream is None:
        if trusted is not None and not accept_rewrite:
            return plan(
                Action.REWOUND,
                f"the upstream branch does not exist, but it held {held} "
                "(the branch was deleted or renamed, or the root now names another remote or "
                "branch)",
            )
        return plan(Action.CREATE, "the upstream branch does not exist yet")
    if upstream == local:
        return plan(Action.CURRENT, "local and upstream are the same commit")

    rewritten = trusted is not None and trusted != upstream and not facts.trusted_in_upstream
    if not facts.related:
        if not accept_rewrite:
            return plan(Action.REWOUND, "the upstream shares no history with this root")
        return plan(Action.ADOPT, "unrelated upstream history adopted (--accept-rewrite)")
    if rewritten and not accept_rewrite:
        return plan(Action.REWOUND, f"the upstream no longer contains {held}")
    if rewritten:
        return plan(Action.ADOPT, "rewritten upstream adopted (--accept-rewrite)")

    if facts.local_in_upstream:
        return plan(Action.BEHIND, "upstream has new commits")
    if facts.upstream_in_local:
        return plan(Action.AHEAD, "local has commits the upstream lacks")
    return plan(Action.DIVERGED, "local and upstream both have new commits")
