"""`memsync init`: make a directory a valid RightMemory-format memory root.

A new root gets `MEMORY.md`, `PURSUITS.md`, the allowlist `.gitignore`, a Git repository
and a baseline commit. With an upstream that already holds the branch, the root is made
from the upstream instead (fetched, validated, then checked out), so a second machine joins
the same history rather than starting an unrelated one; an empty upstream receives the
baseline by push.

A failed init leaves the directory as it found it: the root is built in a staging
directory inside PATH (same file system, whatever the parent allows) and its entries are
renamed into place only once everything succeeded; on any failure the staging directory is
removed, and so are PATH and the parents init created itself (only while they are empty).
Nothing init did not create is ever removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.errors import RootError, require
from memsync.progress import NO_PROGRESS, Progress
from memsync.roots import indexstat
from memsync.roots.checks import Checks
from memsync.roots.reach import unreachable
from memsync.transports.commitsign import sign_head
from memsync.transports.git import FetchOutcome, Git, PushOutcome, cause
from memsync.validators.policy import SyncPolicy, gitignore_text
from memsync.values import replace, value

if TYPE_CHECKING:
    from memsync.transports.rootkeys import CommitKey, GitCredentials

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


@value
class InitResult:
    path: Path
    created: bool
    head: str
    branch: str
    upstream: str | None
    pushed: bool
    joined: bool
    message: str


STAGING_PREFIX = ".memsync-init-"
WHOLE_TREE = Checks(history=False, tree="whole")  # every file's bytes, the graph's default


def init_root(
    path: Path,
    *,
    upstream: str | None = None,
    branch: str = "main",
    policy: SyncPolicy | None = None,
    credentials: GitCredentials | None = None,
    progress: Progress = NO_PROGRESS,
    signing: CommitKey | None = None,
) -> InitResult:
    """`credentials`: how to reach a private upstream (the configured root's `sync.https`
    or `sync.ssh`, when the path is a configured root). `progress` is shown the fetch,
    the validation and the checkout of a joined upstream. `signing`: the configured
    root's `signing.key`, which signs the baseline commit.

    A one-shot job (its box is not `resident`): what the plain readers cannot answer is asked
    of git, and GitPython is never imported (issue 18: it cost `memsync init` more than
    the rest of its imports together)."""
    policy = policy or SyncPolicy()
    path = path.expanduser().absolute()
    if path.exists() and not path.is_dir():
        raise RootError(f"{path} exists and is not a directory")
    if path.is_dir() and any(path.iterdir()):
        leftovers = sorted(p.name for p in path.iterdir())
        if all(name.startswith(STAGING_PREFIX) for name in leftovers):
            raise RootError(
                f"{path} holds only {leftovers[0]}, left by an init that was killed",
                hint=f"remove {path / leftovers[0]}, then run init again",
            )
        return _existing(Git(path, credentials=credentials, resident=False), path, upstream, policy)
    upstream = local_upstream(upstream)  # the staging directory is one level deeper
    try:
        with _claimed(path) as target:
            staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=target))
            try:
                git = Git(staging, credentials=credentials, resident=False)
                done = _create(git, staging, branch, upstream, policy, progress, signing)
                _move_into(staging, target)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
    except OSError as exc:  # permissions, a full disk: nothing was left behind
        raise RootError(
            f"cannot create the root in {path}: {exc.strerror or exc}",
            hint="check the directory's permissions and free space, then run init again",
        ) from exc
    # The renames changed the moved entries' ctime: store fresh stat data once, so that
    # `git status` (memsync's cycles, the person's) does not hash every file again.
    indexstat.refresh(Git(path, credentials=credentials, resident=False))
    return replace(done, path=path)


def local_upstream(upstream: str | None) -> str | None:
    """A relative local path made absolute (from the caller's working directory, as
    `git clone` reads it); URLs and `host:path` are returned as they are (pure but for
    the working directory)."""
    if upstream is None or "://" in upstream or Path(upstream).is_absolute():
        return upstream
    colon, slash = upstream.find(":"), upstream.find("/")
    if colon > 0 and (slash < 0 or colon < slash):
        return upstream  # scp-like ssh: host:path
    return str(Path.cwd() / upstream)


@contextlib.contextmanager
def _claimed(path: Path) -> Iterator[Path]:
    """An empty directory at `path` for the body to fill; on failure, the directories
    this call created (path and missing parents) are removed again while still empty."""
    made: list[Path] = []
    for each in (path, *path.parents):
        if each.exists():
            break
        made.append(each)
    for each in reversed(made):
        try:
            each.mkdir()
        except FileExistsError:
            made.remove(each)  # someone else made it meanwhile: not ours
        except OSError as exc:
            _remove_empty(made)
            raise RootError(f"cannot create {each}: {exc.strerror}") from exc
    try:
        yield path
    except BaseException:
        _remove_empty(made)
        raise


def _remove_empty(made: list[Path]) -> None:
    for each in made:  # deepest first
        with contextlib.suppress(OSError):  # not empty, or gone: it is not ours any more
            each.rmdir()


def _move_into(staging: Path, target: Path) -> None:
    """Rename every entry of `staging` into `target`; on failure, move back what moved."""
    moved: list[str] = []
    try:
        for entry in sorted(path.name for path in staging.iterdir()):
            if os.path.lexists(target / entry):
                raise RootError(
                    f"{target / entry} appeared while init ran; nothing was created",
                    hint="run init again in an empty directory",
                )
            (staging / entry).rename(target / entry)
            moved.append(entry)
    except BaseException:
        for entry in moved:
            with contextlib.suppress(OSError):
                (target / entry).rename(staging / entry)
        raise


def _create(
    git: Git,
    path: Path,
    branch: str,
    upstream: str | None,
    policy: SyncPolicy,
    progress: Progress = NO_PROGRESS,
    signing: CommitKey | None = None,
) -> InitResult:
    """Build the root in the empty directory `path` (the staging directory)."""
    git.init(branch=branch)
    if upstream is not None:
        git.add_remote("origin", upstream)
        git.track(branch, "origin")
        outcome, detail = git.fetch(
            "origin", branch, f"refs/remotes/origin/{branch}", progress=progress
        )
        if outcome is FetchOutcome.UNREACHABLE:
            raise RootError(
                unreachable(detail, "the upstream could not be reached")[1],
                hint="check the URL, the host key and your credentials, then run init "
                "again (nothing was created)",
            )
        if outcome is FetchOutcome.BAD_OBJECTS:
            raise RootError(
                f"the upstream sent objects git's object check refuses: {cause(detail)}",
                hint="fix the upstream (or choose another), then run init again",
            )
        if outcome is FetchOutcome.OK:
            return _join(git, path, branch, upstream, policy, progress)

    (path / ".gitignore").write_text(gitignore_text(), encoding="utf-8")
    (path / "MEMORY.md").write_text(MEMORY_TEMPLATE, encoding="utf-8")
    (path / "PURSUITS.md").write_text(PURSUITS_TEMPLATE, encoding="utf-8")
    git.add([".gitignore", "MEMORY.md", "PURSUITS.md"])
    git.commit_index("memory: initial baseline", git.identity_config())
    head = sign_head(git, signing)
    pushed = False
    if upstream is not None:
        outcome_push, detail = git.push("origin", head, branch)
        if outcome_push is not PushOutcome.OK:
            raise RootError(
                f"the baseline push to the empty upstream failed: {cause(detail)}",
                hint="run init again once the upstream is reachable (nothing was created; "
                "if the upstream has a branch now, init joins it)",
            )
        git.update_ref(f"refs/remotes/origin/{branch}", head, reason="memsync: init push")
        pushed = True
    message = "created a new memory root" + (
        " and pushed it to the empty upstream" if pushed else ""
    )
    return InitResult(path, True, head, branch, upstream, pushed, False, message)


def _join(
    git: Git, path: Path, branch: str, upstream: str, policy: SyncPolicy, progress: Progress
) -> InitResult:
    commit = require(git.rev_parse(f"refs/remotes/origin/{branch}"), "the fetched upstream")
    count, history = git.changes(commit, None)
    checking = "Validating history"
    progress.show(checking, 0, len(history), unit="changes", detail=_commits(count))
    # Init joins a root's whole history: every commit, every file's bytes (one report
    # with both, in two steps only to show progress for each).
    changes = Checks(tree="none").check(git, policy, None, commit, changes=history)
    progress.show(checking, len(history), len(history), unit="changes", detail=_commits(count))
    tree = git.tree_view(commit)
    progress.show("Validating files", 0, len(tree.entries), unit="files")
    report = WHOLE_TREE.check(git, policy, None, commit, view=tree)
    progress.show(
        "Validating files",
        len(tree.entries),
        len(tree.entries),
        unit="files",
        detail=f"{report.files} memory files, {report.items} items",
    )
    problems = changes.problems + report.problems
    if problems:
        raise RootError(
            f"the upstream branch {branch} is not a valid memory root: "
            + "; ".join(f"{p.code} {p.path}" for p in problems[:5]),
            hint="fix the upstream (or choose another), then run init again",
        )
    git.checkout_new_branch(branch, commit, progress)
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


def _commits(count: int) -> str:
    return f"{count} commit" if count == 1 else f"{count} commits"


def _existing(git: Git, path: Path, upstream: str | None, policy: SyncPolicy) -> InitResult:
    top = git.toplevel()
    head = git.rev_parse("HEAD") if top is not None else None
    if top is None or top.resolve() != path.resolve() or head is None:
        raise RootError(
            f"{path} is not empty and is not a memory root",
            hint="choose an empty directory or an existing memory root",
        )
    # An existing repository's own history is this machine's: it is checked as it is
    # pushed; its tree is checked whole now.
    report = WHOLE_TREE.check(git, policy, None, head)
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
            git.add_remote("origin", upstream)
        elif current != upstream:
            raise RootError(
                f"{path} already has a different origin remote",
                hint="change it with `git remote set-url origin URL`",
            )
        git.track(branch, "origin")
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
