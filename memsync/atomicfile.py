"""Atomic, private state files: temp file, fsync, rename, directory fsync; 0600 in 0700 dirs."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any

FILE_MODE = 0o600
DIR_MODE = 0o700
_TEMP_TRIES = 100  # names tried before giving up (a clash of 48 random bits: never, really)


def private_temp(directory: Path, prefix: str, suffix: str = "") -> tuple[int, Path]:
    """A new empty 0600 file `<prefix><random><suffix>` in `directory`, open for writing:
    what `tempfile.mkstemp` makes (created exclusively, never through a symlink), without
    importing tempfile (shutil, bz2, lzma, random: a one-shot command's start-up pays it)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_TEMP_TRIES):
        path = directory / f"{prefix}{os.urandom(6).hex()}{suffix}"
        try:
            return os.open(path, flags, FILE_MODE), path
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no unused temporary file name", str(directory))


def private_dir(path: Path) -> Path:
    """Create `path` (and parents) as 0700 directories; tighten an existing one."""
    path.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    if path.stat().st_mode & 0o077:
        path.chmod(DIR_MODE)
    return path


def write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` so a reader sees the old or the new bytes, never a mix.

    `durable=False` skips the fsyncs: still atomic for readers, but a power cut may bring
    back the previous version (fine for reporting fields, not for safety state).
    """
    private_dir(path.parent)
    fd, tmp = private_temp(path.parent, f".{path.name}.", ".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(data)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        tmp.replace(path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make the entries of directory `path` durable (after a rename, create or unlink in it)."""
    _fsync(path, os.O_RDONLY | os.O_DIRECTORY)


def fsync_file(path: Path) -> None:
    """Make the bytes of file `path` durable without following a symlink."""
    _fsync(path, os.O_RDONLY | os.O_NOFOLLOW)


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_json(path: Path, value: Any, *, durable: bool = True) -> None:
    text = json.dumps(value, indent=2, sort_keys=True) + "\n"
    write_bytes(path, text.encode("utf-8"), durable=durable)


def read_json(path: Path) -> Any | None:
    """The JSON in `path`, or None when it is missing or unreadable (never raises on junk)."""
    try:
        return json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
