"""Whether the configured state directory can be used, checked before a command relies on it.

The state dir (`state_dir`, CONTRACT §4) holds journals, trusted marks, locks and view trust
records; the modules that write there create what they need and assume they can. A state
dir that cannot be created or written is a configuration problem, so it is checked here,
at the command's edge, and reported as a `StateDirError` (exit 2) naming the path and the
operating system's cause, instead of surfacing later as an OSError deep in a cycle:

- `ensure_state_dir` creates it (0700, like every state directory) and proves it writable
  with a probe file: for commands that are about to write state (`sync-now`, `views pull`).
- `check_state_dir` changes nothing: for `status`, `doctor` and `config validate`, which may
  run as another user (an admin looking at a service's config) and must not create
  directories on that user's behalf.
- `as_state_dir_error` tells what an OSError about a path inside the state dir, raised
  while a command runs (a disk that filled up, permissions changed underneath), means.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from memsync.atomicfile import DIR_MODE, private_dir, private_temp
from memsync.errors import StateDirError

# First-level directories other modules create under the state dir (roots/<name>/...,
# views/<name>/...): one that exists must be writable too.
SUBDIRS = ("roots", "views")
_ENVIRONMENT = frozenset(
    {
        errno.EACCES,
        errno.EPERM,
        errno.EROFS,
        errno.ENOSPC,
        errno.EDQUOT,
        errno.ENOTDIR,
        errno.EISDIR,
        errno.ELOOP,
        errno.ENAMETOOLONG,
        errno.EIO,
    }
)
HINT = "point `state_dir` in the config at a directory this user can create and write"


def ensure_state_dir(path: Path) -> Path:
    """Create `path` (0700) when missing and check that this user can write in it."""
    with _stat_errors(path):
        missing = not path.is_dir()
    if missing:
        try:
            path.mkdir(parents=True, mode=DIR_MODE)
        except FileExistsError:
            pass  # made meanwhile, or not a directory: _check_existing tells which
        except OSError as exc:
            raise StateDirError(str(path), _creation_cause(path, exc), hint=HINT) from exc
    with _stat_errors(path):
        _check_existing(path)
    try:
        private_dir(path)  # tightens a directory other users could read
        fd, probe = private_temp(path, ".memsync-probe-")
        os.close(fd)
        probe.unlink()
    except OSError as exc:
        raise StateDirError(str(path), _strerror(exc), hint=HINT) from exc
    return path


def check_state_dir(path: Path) -> None:
    """Raise StateDirError when `path` is not a writable directory and cannot be created
    as one by this user. Creates and writes nothing."""
    with _stat_errors(path):
        _check(path)


def _check(path: Path) -> None:
    if path.exists() or path.is_symlink():
        _check_existing(path)
        return
    ancestor = _nearest_existing(path)
    if not ancestor.is_dir():
        raise StateDirError(
            str(path), f"it cannot be created: {ancestor} is not a directory", hint=HINT
        )
    if not os.access(ancestor, os.W_OK | os.X_OK):
        cause = f"it cannot be created: this user may not create entries in {ancestor}"
        raise StateDirError(str(path), cause, hint=HINT)


def as_state_dir_error(exc: BaseException, state_dir: Path) -> StateDirError | None:
    """The StateDirError an OSError about a path inside `state_dir` means, when its cause is
    the environment (permissions, a full or read-only disk, a file where a directory should
    be); None for anything else, which stays what it is (a missing file may be a bug)."""
    if not isinstance(exc, OSError) or exc.errno not in _ENVIRONMENT:
        return None
    where = next((n for n in (exc.filename, exc.filename2) if _inside(n, state_dir)), None)
    if where is None:
        return None
    cause = f"{_strerror(exc)} ({os.fsdecode(where)})"
    return StateDirError(str(state_dir), cause, hint=HINT)


@contextmanager
def _stat_errors(path: Path) -> Iterator[None]:
    """Looking at the path failed (a parent this user may not search, a symlink loop)."""
    try:
        yield
    except OSError as exc:
        raise StateDirError(str(path), _strerror(exc), hint=HINT) from exc


def _check_existing(path: Path) -> None:
    if path.is_symlink() and not path.exists():
        raise StateDirError(str(path), "it is a symbolic link to nothing", hint=HINT)
    for directory in (path, *(path / sub for sub in SUBDIRS if (path / sub).exists())):
        what = "it" if directory == path else str(directory)
        if not directory.is_dir():
            raise StateDirError(str(path), f"{what} is not a directory", hint=HINT)
        if not os.access(directory, os.W_OK | os.X_OK):
            # A read-only file system answers EROFS here, which os.access reports as False.
            cause = f"this user cannot write in {what}"
            raise StateDirError(str(path), cause, hint=HINT)


def _nearest_existing(path: Path) -> Path:
    """`path` or its closest ancestor that exists (`/` at worst)."""
    for candidate in (path, *path.parents):
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return Path(path.anchor or "/")


def _creation_cause(path: Path, exc: OSError) -> str:
    blocker = _nearest_existing(path)
    if exc.errno == errno.ENOTDIR and not blocker.is_dir():
        return f"it cannot be created: {blocker} is not a directory"
    return f"it cannot be created: {_strerror(exc)}"


def _strerror(exc: OSError) -> str:
    return exc.strerror or str(exc)


def _inside(name: object, directory: Path) -> bool:
    if not isinstance(name, str | bytes | os.PathLike):
        return False
    candidate = Path(os.fsdecode(name))
    return candidate == directory or directory in candidate.parents
