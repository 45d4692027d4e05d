"""A root's object store stays small: the box has git check every object it fetches (so
each fetch keeps its own pack) and turns git's automatic gc off (it would run at unknown
times, under no deadline). After a sync cycle, when the packs or the loose objects pass a
limit, one geometric repack folds them: `git repack -d -l --geometric=2` merges only the
small recent packs (and the loose objects) so that the pack sizes keep doubling; its cost
follows what arrived since, not the size of the memory. Unreachable objects are never
pruned here: nothing is deleted that a rescue ref or a person might still want.

The fold is upkeep, not part of the sync: a one-shot command (`memsync sync-now` without a
daemon) does not wait for it. `fold_behind` forks a child that holds the root lock (handed
over, never released in between: no other cycle runs on the root before the fold ends),
runs the same repack under the same time limit, and exits; the command answers at once.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

from memsync import lazylog
from memsync.errors import GitError
from memsync.roots.lock import RootLock
from memsync.transports.git import Git

log = lazylog.logger(__name__)

PACK_LIMIT = 16  # git's own gc.autoPackLimit is 50; lookups probe every pack index
LOOSE_LIMIT = 27  # loose objects in objects/17: git's gc.auto (6700) / 256, its own sample


def objects_dir(git_dir: Path) -> Path:
    """The object store of a repository or of a linked worktree (its common dir)."""
    common = git_dir / "commondir"
    if common.is_file():
        try:
            return (git_dir / common.read_text().strip()) / "objects"
        except OSError:
            pass
    return git_dir / "objects"


def _count(directory: Path, prefix: str = "", suffix: str = "") -> int:
    try:
        with os.scandir(directory) as entries:
            return sum(1 for e in entries if e.name.startswith(prefix) and e.name.endswith(suffix))
    except OSError:
        return 0


def crowded(objects: Path) -> bool:
    """Two directory listings: too many packs, or (sampled as git samples) too many loose
    objects. Only git's finished packs count (`pack-<id>.pack`): the temporary files of a
    repack that was killed (`.tmp-*`, `tmp_pack_*`) are nothing a fold would merge, and
    counting them would start a fold on every run."""
    return (
        _count(objects / "pack", "pack-", ".pack") > PACK_LIMIT
        or _count(objects / "17") > LOOSE_LIMIT
    )


def keep_small(git: Git, timeout: float) -> bool:
    """Repack when the store is crowded; True when a repack ran. A failure is logged and
    changes nothing: the next cycle tries again."""
    git_dir = git.git_dir()
    if git_dir is None or not crowded(objects_dir(git_dir)):
        return False
    try:
        git.repack(timeout)
    except GitError as exc:
        log.warning("repacking %s failed: %s", git.cwd, exc.message)
        return False
    return True


def fold_behind(git: Git, timeout: float, lock: RootLock) -> bool:
    """`keep_small` in a detached child that the root lock is handed to (a one-shot command
    that exits after its cycle); True when one was started. This process returns at once
    without the lock; the child repacks (bounded by `timeout`), then releases the lock and
    exits. It writes nowhere the command's caller reads (its standard streams are the null
    device): a failed fold changes nothing and the next cycle tries again."""
    git_dir = git.git_dir()
    if git_dir is None or not crowded(objects_dir(git_dir)):
        return False
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()  # nothing buffered is written twice
    try:
        child = os.fork()
    except OSError:  # no process to spare: fold here, as the daemon does
        return keep_small(git, timeout)
    if child:
        lock.hand_over()
        return True
    code = 1
    try:
        os.setsid()  # out of the command's session: a terminal's signals stay with it
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)  # a caller reading the command's output is not held open
        lock.mark_holder()
        keep_small(git, timeout)
        lock.release()
        code = 0
    finally:
        os._exit(code)  # never back into the command's code
