"""Outgoing: local commits are validated like incoming ones, then pushed as the exact commit.

Every path of every outgoing commit passes the path rules, and the tree being pushed must
be a valid root as a whole (a dangling edge pushed upstream would leave every other
machine `rejected`). The push is never forced; a rejection (the upstream moved) is a plain
`rejected_by_upstream` answer for the cycle to sync once more, not a status.
"""

from __future__ import annotations

from memsync.roots import journal
from memsync.roots.admission import SignedAdmission
from memsync.roots.checks import Checks
from memsync.roots.faults import fault
from memsync.roots.reach import unreachable
from memsync.roots.result import SyncStatus
from memsync.transports.git import Git, PushOutcome
from memsync.transports.gitparse import last_line
from memsync.validators.graph import GraphValidator
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem
from memsync.values import value


@value
class Pushed:
    """The outcome of one push attempt, in plain values."""

    # "pushed" | "refused" | "rejected-by-upstream" | "unreachable" | "auth-failed" |
    # "host-key-changed" | "dry-run"
    outcome: str
    message: str
    files: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()


@value
class Outgoing:
    """Where and how one root pushes."""

    git: Git
    records: journal.Journal
    policy: SyncPolicy
    graph: GraphValidator
    remote: str
    branch: str  # the local branch (journal records)
    upstream_branch: str
    admission: SignedAdmission | None = None  # roots.*.admission: signed (every commit)

    def push(self, head: str, upstream: str | None, *, dry_run: bool) -> Pushed:
        """Validate `upstream..head`, then push `head` to the upstream branch, never forced."""
        git = self.git
        count, changes = git.changes(head, upstream)
        files = tuple(sorted({c.path for c in changes}))
        # Every outgoing commit, and the tree pushed as a whole (its changed files' bytes).
        checks = Checks(self.graph, signed=self.admission)
        report = checks.check(git, self.policy, upstream, head, changes=changes)
        if not report.ok:
            problems = report.problems
            codes = ", ".join(sorted({p.code for p in problems}))
            return Pushed(
                "refused",
                f"refused to push: {count} local commit(s) break the memory rules ({codes}); "
                "nothing was pushed",
                tuple(sorted({p.path for p in problems if p.path})),
                problems,
            )
        if dry_run:
            return Pushed(
                "dry-run", f"dry run: {count} local commit(s) validated; nothing pushed", files
            )
        op = self.records.begin("push", self.branch, head, upstream)
        fault("before-push")
        outcome, detail = git.push(self.remote, head, self.upstream_branch)
        fault("after-push")
        if outcome is PushOutcome.OK:
            self.records.advance(op, journal.COMMITTED, message="pushed", files=files)
            return Pushed("pushed", f"pushed {count} validated commit(s)", files)
        self.records.advance(op, journal.FAILED, message=last_line(detail))
        if outcome is PushOutcome.REJECTED:
            return Pushed("rejected-by-upstream", "the upstream rejected the push")
        status, message = unreachable(detail, "the push did not reach the upstream")
        return Pushed(status.value if status is not SyncStatus.OFFLINE else "unreachable", message)
