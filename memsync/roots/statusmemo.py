"""The status memo: a daemon cycle may reuse its root's last `git status` when nothing
that status read can have changed since.

On a quiet root the cycle's `git status` (a stat of every tracked file: about 15 ms for
10,000 files) is most of what a 1 s poll costs. The daemon's watcher already hears every
write to the work tree and to the branch refs; the files git reads besides (the index,
`HEAD`, the branch ref, `packed-refs`, `config`, `info/exclude`) are compared by their
stat data (inode, size, mtime in ns: git replaces each by a rename, so a new inode). So
inotify, not `git status`, says whether the work tree changed.

`may_reuse` is the whole rule (pure). Reuse only when all of these hold; anything
uncertain runs the status:

- the last status was taken by an automatic daemon cycle with a watcher that could vouch
  for the root (`Marks.watch` is its token: None without a watcher, after an inotify
  overflow, with a watch missing or a top-level directory it does not watch) and found
  the root settled (on a branch with a head, nothing unmerged, no edit that blocks a
  sync, no tracked file in the unwatched views runtime directory: a dirty root runs its
  status every cycle);
- the watcher's token is the same now (no relevant event since that status began: the
  token is read before the status runs, so an event during it counts as after it);
- every stat mark is the same;
- the status is younger than `MAX_AGE` (a backstop for what neither the watcher nor the
  marks cover, e.g. a global excludes file).

A person's `sync-now`, the CLI and the first cycle always run the status (they pass no
memo or ask for a full one). The publication fence never uses the memo: it asks git
itself (`publish.check_fence`).
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path

from memsync.transports.workstate import WorkState
from memsync.values import value

# Seconds a status may be reused at most: several default polls (60 s, jittered by a tenth),
# so a quiet root's default poll is the fetch alone and its status runs every fifth poll
# (at 60 s, every poll ran both: 400 git processes a minute for 200 roots, not 240).
MAX_AGE = 300.0

Stamp = tuple[int, int, int]  # inode, size, mtime in ns
MARKED = ("index", "HEAD", "packed-refs", "config", "info/exclude")


@value
class Marks:
    """What must be unchanged for a status to be reused: the watcher's token and the
    stat data of the files `git status` reads besides the work tree."""

    watch: Hashable | None  # None: no watcher, or one that cannot vouch for the root
    ref: str | None  # the branch HEAD names; None when detached
    files: tuple[Stamp | None, ...]  # `MARKED`, then the branch's loose ref


@value
class Seen:
    """A settled status and the marks taken just before it ran."""

    marks: Marks
    state: WorkState
    at: float  # time.monotonic() when it ran


def may_reuse(last: Seen | None, now: Marks, clock: float) -> bool:
    """Whether the status `last` remembers still describes the root (pure)."""
    if last is None or now.watch is None or now.ref is None:
        return False
    if now != last.marks:
        return False
    return 0.0 <= clock - last.at <= MAX_AGE


def _stamp(path: Path) -> Stamp | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def branch_ref(git_dir: Path) -> str | None:
    """The ref `HEAD` names (`refs/heads/...`), read from its file; None when detached or
    unreadable."""
    try:
        text = (git_dir / "HEAD").read_text(encoding="utf-8", errors="strict").strip()
    except (OSError, UnicodeError):
        return None
    ref = text.removeprefix("ref: ")
    if ref == text or not ref.startswith("refs/heads/") or ".." in ref.split("/"):
        return None
    return ref


def marks(git_dir: Path, watch: Hashable | None) -> Marks:
    """The marks now: `watch` and the stat data of the files git reads (the branch's loose
    ref included; a detached HEAD marks nothing: its cycle stops at the preflight)."""
    ref = branch_ref(git_dir)
    stamps = [_stamp(git_dir / name) for name in MARKED]
    stamps.append(_stamp(git_dir / ref) if ref is not None else None)
    return Marks(watch, ref, tuple(stamps))


class StatusMemo:
    """One root's last settled status, kept by its daemon worker between cycles (one cycle
    runs at a time per root, under the root lock)."""

    def __init__(self) -> None:
        self.last: Seen | None = None
        self.reused = 0  # cycles that reused a status (read by tests and the bench)
