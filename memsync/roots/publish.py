"""The publisher: the only code that moves a root's branch.

A fenced fast-forward. Publication proceeds only while the branch is checked out and
still at the start commit, no merge is in progress, no path the candidate changes has
local edits (or, for an in-place autocommit, the work tree holds exactly the candidate's
edits), no index entry holds a staged version that is neither HEAD's nor the work tree's,
and the candidate ref still names the validated candidate. It then moves index and
work tree from start to candidate (only the changed files), and finally moves the branch
with a compare-and-swap on its old value, dropping the candidate ref in the same
transaction. The fence is O(diff) too: git's status is asked about the changed paths only
(an edit elsewhere is not touched by the move and is still there after it; the next cycle
sees it), and the candidate ref is read from its file.
Sync, cycles and autocommit all publish through `publish`.

The allowlist `.gitignore` makes every local non-memory file "ignored", and git treats
ignored files as disposable when it checks out a tree; so the fence itself looks at every
path the candidate creates, and at each of its parent directories, and stops when a file or
directory memsync does not own stands there (`local-file-in-the-way`). A file holding
exactly the candidate's bytes is not in the way: moving to the candidate loses nothing.

The index and the work tree are the person's. Every move of the index is a two-tree merge
from start to candidate, which git itself refuses (under its index lock) when an entry
holds a version that is neither the start's nor the candidate's; the fence says so first
(`foreign_staged`), so a staged version memsync did not commit is never replaced.

Recovery finishes a publication interrupted after `prepared` through this same fence
(`Target.resumed`): the work tree may then already hold some of the candidate's files
(memsync's own half-written move, recognised by their bytes); anything else stops it.

The fence's reads (the tree diff and git's status of the changed paths) may start as soon
as the candidate is known, beside its validation (`FenceLook`): they publish nothing, and
the fence judges them only after the verdict, with the rest of its checks then (the
merge in progress, the candidate ref, the files in the way). Before it trusts the early
status it reads `HEAD` and the branch again from their files: when either moved (or reads
oddly) git is asked again, so an early look never widens the window in which a commit of
the person's goes unseen. An edit to a changed path made after the early status is still
refused by git itself: the two-tree merge does not overwrite a file that is not up to date
(nor an index entry that is neither side's); the fence, asked again then, names it (`dirty`).
"""

from __future__ import annotations

import contextlib
import os
import stat
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

from memsync.errors import GitError, GitTimeout
from memsync.roots.edits import blocking_changes, foreign_staged
from memsync.roots.faults import fault
from memsync.roots.layout import candidate_ref
from memsync.roots.prefetch import Beside
from memsync.roots.result import SyncStatus
from memsync.transports.git import Git
from memsync.transports.workstate import WorkState
from memsync.validators.paths import printable
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem
from memsync.values import value

IN_THE_WAY = "local-file-in-the-way"
# Past this many changed paths the fence asks git about the whole work tree (a command line
# stays short, and one full status costs less than many paths).
SCOPED_STATUS_PATHS = 1000


class FenceBroken(Exception):
    """The active root changed under us; nothing was published. `status` says how to report."""

    def __init__(
        self,
        status: SyncStatus,
        message: str,
        files: tuple[str, ...] = (),
        problems: tuple[Problem, ...] = (),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.files = files
        self.problems = problems


@value
class Target:
    """What a publication moves: the branch, from `start` to `candidate`."""

    branch: str
    start: str
    candidate: str
    operation_id: str
    in_place: bool = False  # the work tree already holds the candidate (an autocommit)
    resumed: bool = False  # recovery: the work tree may hold some of the candidate already


def staged_refusal(paths: Sequence[str]) -> FenceBroken:
    shown = ", ".join(printable(p) for p in paths[:3]) + (", …" if len(paths) > 3 else "")
    return FenceBroken(
        SyncStatus.DIRTY,
        f"the index holds staged versions that are neither committed nor what the work tree "
        f"holds ({shown}); memsync never replaces a staged version it did not commit: "
        "commit them, or stage or unstage them, then sync again",
        tuple(paths),
    )


Look = tuple[list[tuple[str, str]], WorkState]


def _look(
    git: Git,
    start: str,
    candidate: str,
    in_place: bool,
    on_start: Callable[[int], None] | None = None,
) -> Look:
    """The fence's reads: the tree diff, and git's status (of the changed paths only when
    they are few and the work tree is not to hold the candidate already)."""
    diff = git.tree_diff(start, candidate)
    scope = sorted({path for _status, path in diff})
    narrow = not in_place and 0 < len(scope) <= SCOPED_STATUS_PATHS
    return diff, git.work_state(paths=scope if narrow else None, on_start=on_start)


class FenceLook:
    """The fence's reads for moving the branch from `start` to `candidate`, started at once
    on a thread (a plain publication: not in place, not resumed); `check_fence` uses them
    when its target is that move and `HEAD` has not moved since (`_head_still`). Whoever
    starts one waits for it (`wait`) before its admission ends, used or not."""

    def __init__(self, git: Git, start: str, candidate: str) -> None:
        self.start = start
        self.candidate = candidate
        self._reads = Beside(
            lambda told: _look(git, start, candidate, False, told), "memsync-fence"
        )
        # Until its status runs: this thread's checks would otherwise hold the interpreter
        # while the reads' thread waits its turn to start git.
        self._reads.running()

    def fits(self, target: Target) -> bool:
        return (
            (target.start, target.candidate) == (self.start, self.candidate)
            and not target.in_place
            and not target.resumed
        )

    @property
    def thread(self) -> threading.Thread:
        return self._reads.thread

    def answer(self) -> Look:
        return self._reads.answer()

    def wait(self) -> None:
        self._reads.wait()


def _head_still(git: Git, target: Target) -> bool:
    """`HEAD` names the target's branch and the branch its start, read from their files now
    (False when anything reads otherwise: git is asked again)."""
    git_dir = git.git_dir()
    try:
        head = (git_dir / "HEAD").read_bytes() if git_dir is not None else b""
    except OSError:
        return False
    ref = f"refs/heads/{target.branch}"
    return head == f"ref: {ref}\n".encode() and git.ref_value(ref) == target.start


def check_fence(
    git: Git, target: Target, policy: SyncPolicy, look: FenceLook | None = None
) -> None:
    """Raise FenceBroken unless the active root is exactly as the candidate expects.
    `look`: the reads started beside the validation, used when they fit (`FenceLook`)."""
    if look is not None and look.fits(target) and _head_still(git, target):
        diff, state = look.answer()
    else:
        diff, state = _look(git, target.start, target.candidate, target.in_place)
    if state.branch != target.branch:
        raise FenceBroken(SyncStatus.ERROR, f"HEAD is no longer on branch {target.branch}")
    if state.head != target.start:
        raise FenceBroken(
            SyncStatus.ERROR,
            f"the branch moved during the cycle (now {str(state.head)[:12]}, "
            f"expected {target.start[:12]})",
        )
    unmerged = tuple(sorted(e.path for e in state.entries if e.unmerged))
    if unmerged or git.merge_in_progress():
        raise FenceBroken(SyncStatus.CONFLICT, "a merge is in progress in the root", unmerged)
    dirty = blocking_changes(state.entries, policy)
    ours = target.in_place or target.resumed  # the work tree may hold the candidate's files
    if dirty and not (ours and matches(git, dirty, target.candidate)):
        raise FenceBroken(
            SyncStatus.DIRTY, "uncommitted edits to synchronized files appeared", dirty
        )
    staged = foreign_staged(state.entries)
    if staged:
        raise staged_refusal(staged)
    if git.ref_value(candidate_ref(target.operation_id)) != target.candidate:
        raise FenceBroken(SyncStatus.ERROR, "the validated candidate is missing or moved")
    if target.in_place:
        return  # the candidate's files are the ones on disk: nothing is created
    blocked = in_the_way(git.cwd, diff)
    if blocked:  # the candidate's own bytes (a half-written move of ours) lose nothing
        same = holding_candidate(git, blocked, target.candidate)
        blocked = tuple(path for path in blocked if path not in same)
    if blocked:
        problems = tuple(
            Problem(
                IN_THE_WAY,
                printable(path),
                None,
                f"'{printable(path)}' is a local file or directory memsync does not own, "
                "standing where the incoming state creates a memory path; move it away, "
                "then sync again",
            )
            for path in blocked
        )
        shown = ", ".join(printable(p) for p in blocked[:3]) + (", …" if len(blocked) > 3 else "")
        raise FenceBroken(
            SyncStatus.DIRTY,
            f"local files memsync does not own stand where incoming memory files go "
            f"({shown}); move them away, then sync again",
            blocked,
            problems,
        )


def in_the_way(root: Path, diff: Sequence[tuple[str, str]]) -> tuple[str, ...]:
    """Untracked things standing where the candidate creates a path or a parent directory.

    `diff` is (status, path) from start to candidate. An added path must not exist at all
    (a directory is fine only when all it holds are tracked files the candidate removes);
    each parent directory must be a real directory or a tracked file being removed.
    Costs one `lstat` per added path and new parent, not a walk of the root.
    """
    removed = {path for status, path in diff if status == "D"}
    blocked: set[str] = set()
    seen_dirs: set[str] = set()
    for status, path in diff:
        if status != "A":
            continue
        parts = path.split("/")
        for depth in range(1, len(parts)):
            parent = "/".join(parts[:depth])
            if parent in seen_dirs:
                continue
            seen_dirs.add(parent)
            mode = _lstat_mode(root / parent)
            if mode is None:
                break  # nothing here, so nothing deeper either
            if not stat.S_ISDIR(mode) and parent not in removed:
                blocked.add(parent)
                break
        else:
            mode = _lstat_mode(root / path)
            if mode is not None and not (stat.S_ISDIR(mode) and _holds_only(root, path, removed)):
                blocked.add(path)
    return tuple(sorted(blocked))


def _lstat_mode(path: Path) -> int | None:
    try:
        return path.lstat().st_mode
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        return None


def _holds_only(root: Path, directory: str, removed: set[str]) -> bool:
    """True when every entry under `directory` is a tracked file the candidate removes."""
    for here, dirs, files in os.walk(root / directory):
        rel = Path(here).relative_to(root).as_posix()
        if not dirs and not files and rel != directory:
            return False  # an empty directory of the person's own
        for name in files:
            if f"{rel}/{name}" not in removed:
                return False
        for name in dirs:
            if (Path(here) / name).is_symlink():
                return False
    return True


def publish(git: Git, target: Target, policy: SyncPolicy, look: FenceLook | None = None) -> None:
    """Move the root from `target.start` to `target.candidate`, or raise FenceBroken.
    `look`: the fence's reads, when they were started beside the validation."""
    check_fence(git, target, policy, look)
    if target.in_place:  # the work tree already holds it: the index only
        _two_tree_merge(git, target, "-m", "-i")
        git.refresh_stat()
    elif target.resumed:  # the fence found only the candidate's bytes where they differ
        _two_tree_merge(git, target, "--reset", "-u")
    else:
        try:
            git.read_tree_update(target.start, target.candidate)
        except GitTimeout:
            raise
        except GitError:
            # git refused before writing anything: a file changed since the fence's status
            # (an early look's is as old as the validation). The fence, asked again, names it.
            with contextlib.suppress(GitError):  # (else git's own refusal is the answer)
                check_fence(git, target, policy)
            raise
    fault("after-worktree-update")
    move_branch(git, target)


def _two_tree_merge(git: Git, target: Target, *flags: str) -> None:
    """`read-tree <flags> start candidate`. Git refuses, under its index lock and before it
    writes anything, an index entry that is neither the start's nor the candidate's: a
    version staged since the fence looked. That is the fence's refusal too."""
    done = git.two_tree_merge(flags, target.start, target.candidate)
    if done.ok:
        return
    if "would be overwritten" in done.detail:
        staged = foreign_staged(git.status())
        raise staged_refusal(staged or git.changed_paths(target.start, target.candidate))
    git.two_tree_merge_or_raise(flags, target.start, target.candidate)  # says why


def holding_candidate(git: Git, paths: Sequence[str], candidate: str) -> set[str]:
    """The paths whose work-tree entry is a regular file with exactly the candidate's bytes."""
    wanted = git.ls_tree(candidate)
    present = [
        path
        for path in paths
        if path in wanted
        and (mode := _lstat_mode(git.cwd / path)) is not None
        and stat.S_ISREG(mode)
    ]
    hashes = git.hash_files(present)
    return {path for path in present if hashes.get(path) == wanted[path].oid}


def matches(git: Git, paths: Sequence[str], candidate: str) -> bool:
    """True when every path in the work tree is exactly the candidate's version of it
    (or absent from both): nothing there would be lost by moving to the candidate."""
    wanted = git.ls_tree(candidate)
    same = holding_candidate(git, paths, candidate)
    for path in paths:
        if path in wanted:
            if path not in same:
                return False
        elif (git.cwd / path).exists() or (git.cwd / path).is_symlink():
            return False
    return True


def publication_reason(operation_id: str) -> str:
    """The reflog message of a publication's branch move (and of its candidate ref)."""
    return f"memsync: publish {operation_id}"


def move_branch(git: Git, target: Target) -> None:
    """The last step: the branch moves only if it still points at the start commit."""
    git.move_refs(
        [(f"refs/heads/{target.branch}", target.candidate, target.start)],
        [candidate_ref(target.operation_id)],
        reason=publication_reason(target.operation_id),
    )
    fault("after-ref-update")
