"""The index's stat data: memsync refreshes it only when that is safe and due.

git trusts a tracked file unchanged when the file's stat data (times, size, inode) matches
what the index holds; otherwise `git status` reads and hashes the file again, on every
call. Entries written in the same second as the index are "racily clean" and are hashed
every time too. memsync's cycles run `git status` without optional locks (a person's
`git commit` must never fail on an `index.lock` a background cycle took), so nothing ever
stores fresh stat data: a freshly cloned or joined 10,000-file root, a checkout or a
publication left thousands of files hashed on every poll, and the watcher saw every open.

So, after a cycle that ended well (`current`, `synced`, `pushed`: a refused or dirty root
keeps every byte, its index too) and under the root lock, `refresh_when_due` stores fresh
stat data with `git update-index -q --refresh` (`Git.refresh_stat`) when it is due:

- the index changed since memsync last left it fresh (its inode, size and mtime differ
  from the ones recorded in the root's state directory): a clone, a join, a publication,
  a person's commit. An index memsync already refreshed is never touched again, so a cycle
  with nothing to do writes nothing and runs no extra process;
- and it has been quiet for `QUIET` seconds: files written with it are then older than the
  second the refreshed index is written in, so they are not racily clean afterwards.

git takes `index.lock` itself, exclusively (`O_EXCL`), before it reads the index: when a
person's git holds it, the refresh does nothing and fails at once (no wait, no error, the
lock is not touched) and is tried again after a later cycle. A refresh only rewrites stat
data of entries whose content matches: staged content is never changed.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

from memsync import lazylog
from memsync.atomicfile import write_bytes
from memsync.errors import GitError
from memsync.roots.layout import RootLayout

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:  # a one-shot cycle loads the whole box after its first git processes start
    from memsync.transports.git import Git

log = lazylog.logger(__name__)

QUIET = 2.0  # seconds the index must be unchanged; git's racy check works in whole seconds

Stamp = tuple[int, int, int]


def stamp(index: Path) -> Stamp | None:
    """The index file's identity: inode, size, mtime in ns (None when there is none)."""
    try:
        st = index.stat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def record_file(layout: RootLayout) -> Path:
    """Where the stamp of the index memsync last left fresh is kept."""
    return layout.base / "index-stat"


def recorded(layout: RootLayout) -> Stamp | None:
    try:
        fields = record_file(layout).read_text(encoding="ascii").split()
        ino, size, mtime = (int(field) for field in fields)
    except (OSError, ValueError):
        return None  # absent or unreadable: due, like an index never refreshed
    return (ino, size, mtime)


def due(current: Stamp | None, last: Stamp | None, now_ns: int) -> bool:
    """Whether an index with stamp `current` should be refreshed now (pure)."""
    if current is None or current == last:
        return False
    return now_ns - current[2] >= QUIET * 1e9


def refresh(git: Git) -> bool:
    """One refresh now; False when it did not run to the end (a held lock, a failure)."""
    try:
        return git.refresh_stat()
    except GitError as exc:  # a timeout, git missing: the next cycle tries again
        log.debug("index refresh skipped in %s: %s", git.cwd, exc.message)
        return False


def refresh_when_due(git: Git, layout: RootLayout) -> bool:
    """Refresh the root's index when due (the caller holds the root lock); True when it
    refreshed. Never raises for git's sake: a skipped refresh is tried again later."""
    git_dir = git.git_dir()
    if git_dir is None:
        return False
    index = git_dir / "index"
    current = stamp(index)
    if not due(current, recorded(layout), time.time_ns()):
        return False
    if not refresh(git):
        return False
    after = stamp(index)
    if after is not None:
        with contextlib.suppress(OSError):  # only an optimisation: due again next time
            text = " ".join(str(part) for part in after) + "\n"
            write_bytes(record_file(layout), text.encode("ascii"), durable=False)
    return True
