"""`memsync init`: make a directory a valid RightMemory-format memory root.

A new root gets `MEMORY.md`, `PURSUITS.md`, the allowlist `.gitignore`, a Git repository
and a baseline commit. With an upstream that already holds the branch, the root is made
from the upstream instead (fetched, validated, then checked out), so a second machine joins
the same history rather than starting an unrelated one; an empty upstream receives the
baseline by push.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memsync.errors import RootError, require
from memsync.transports.git import FetchOutcome, Git, GitBlobs, GitCredentials, PushOutcome
from memsync.validators.gate import validate_changes, validate_tree
from memsync.validators.policy import SyncPolicy, gitignore_text
from memsync.validators.rightmemory import default_graph_validator

MEMORY_TEMPLATE = """\
# User Context

Facts about the people this agent works with: preferences, conventions, context.

# Cross-Session Agent Behavior

Lessons that should change how the agent works in every later session.
"""

PURSUITS_TEMPLATE = """\
# Pursuits

Long-running goals the agent is working toward, one heading each.

## Focus
"""


@dataclass(frozen=True)
class InitResult:
    path: Path
    created: bool
    head: str
    branch: str
    upstream: str | None
    pushed: bool
    joined: bool
    message: str


def init_root(
    path: Path,
    *,
    upstream: str | None = None,
    branch: str = "main",
    policy: SyncPolicy | None = None,
    credentials: GitCredentials | None = None,
) -> InitResult:
    """`credentials`: how to reach a private upstream (the configured root's `sync.https`
    or `sync.ssh`, when the path is a configured root)."""
    policy = policy or SyncPolicy()
    path = path.expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise RootError(f"{path} exists and is not a directory")
    path.mkdir(parents=True, exist_ok=True)
    git = Git(path, credentials=credentials)
    if any(path.iterdir()):
        return _existing(git, path, upstream, policy)

    git.run("init", "--quiet", f"--initial-branch={branch}", ".")
    if upstream is not None:
        git.run("remote", "add", "--", "origin", upstream)
        git.run("config", f"branch.{branch}.remote", "origin")
        git.run("config", f"branch.{branch}.merge", f"refs/heads/{branch}")
        outcome, detail = git.fetch("origin", branch, f"refs/remotes/origin/{branch}")
        if outcome is FetchOutcome.UNREACHABLE:
            raise RootError(
                f"the upstream could not be reached: {detail.splitlines()[-1:]}",
                hint="check the URL and your credentials, then run init again "
                "in an empty directory",
            )
        if outcome is FetchOutcome.OK:
            return _join(git, path, branch, upstream, policy)

    (path / ".gitignore").write_text(gitignore_text(), encoding="utf-8")
    (path / "MEMORY.md").write_text(MEMORY_TEMPLATE, encoding="utf-8")
    (path / "PURSUITS.md").write_text(PURSUITS_TEMPLATE, encoding="utf-8")
    git.run("add", "--", ".gitignore", "MEMORY.md", "PURSUITS.md")
    git.run("commit", "--quiet", "-m", "memory: initial baseline", config=git.identity_config())
    head = git.rev_parse("HEAD") or ""
    pushed = False
    if upstream is not None:
        outcome_push, detail = git.push("origin", head, branch)
        if outcome_push is not PushOutcome.OK:
            raise RootError(
                f"the root was created but the baseline push failed: {detail}",
                hint="run `memsync sync-now` once the upstream is reachable",
            )
        git.update_ref(f"refs/remotes/origin/{branch}", head, reason="memsync: init push")
        pushed = True
    message = "created a new memory root" + (
        " and pushed it to the empty upstream" if pushed else ""
    )
    return InitResult(path, True, head, branch, upstream, pushed, False, message)


def _join(git: Git, path: Path, branch: str, upstream: str, policy: SyncPolicy) -> InitResult:
    commit = require(git.rev_parse(f"refs/remotes/origin/{branch}"), "the fetched upstream")
    _count, history = git.changes(commit, None)
    changes = validate_changes(history, GitBlobs(git), policy)
    report = validate_tree(git.tree_view(commit), policy, default_graph_validator())
    problems = changes.problems + report.problems
    if problems:
        raise RootError(
            f"the upstream branch {branch} is not a valid memory root: "
            + "; ".join(f"{p.code} {p.path}" for p in problems[:5]),
            hint="fix the upstream (or choose another), then run init again",
        )
    git.run("checkout", "--quiet", "-b", branch, commit)
    return InitResult(
        path,
        True,
        commit,
        branch,
        upstream,
        False,
        True,
        "joined the existing upstream memory root",
    )


def _existing(git: Git, path: Path, upstream: str | None, policy: SyncPolicy) -> InitResult:
    top = git.toplevel()
    head = git.rev_parse("HEAD") if top is not None else None
    if top is None or top.resolve() != path.resolve() or head is None:
        raise RootError(
            f"{path} is not empty and is not a memory root",
            hint="choose an empty directory or an existing memory root",
        )
    report = validate_tree(git.tree_view(head), policy, default_graph_validator())
    if not report.ok:
        codes = ", ".join(sorted(report.codes()))
        raise RootError(
            f"{path} is a Git repository but not a valid memory root ({codes})",
            hint="run `memsync validate PATH` to see every problem",
        )
    branch = git.current_branch() or "main"
    if upstream is not None:
        current = git.remote_url("origin")
        if current is None:
            git.run("remote", "add", "--", "origin", upstream)
        elif current != upstream:
            raise RootError(
                f"{path} already has a different origin remote",
                hint="change it with `git remote set-url origin URL`",
            )
        git.run("config", f"branch.{branch}.remote", "origin")
        git.run("config", f"branch.{branch}.merge", f"refs/heads/{branch}")
    return InitResult(
        path,
        False,
        head,
        branch,
        upstream,
        False,
        False,
        "already a valid memory root; nothing to create",
    )
