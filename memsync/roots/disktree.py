"""A tree view of a root's work tree as it is on disk (for `memsync validate PATH`).

Entries come from `lstat`, so symlinks, executables and special files are seen as they are;
bytes are read only when a validator asks. Inside a Git work tree the listing is what git
would consider (tracked, plus untracked files the allowlist `.gitignore` does not ignore).
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Mapping, Sequence
from pathlib import Path

from memsync.transports.git import Git
from memsync.validators.paths import RUNTIME_DIR
from memsync.validators.tree import (
    MODE_EXECUTABLE,
    MODE_FILE,
    MODE_GITLINK,
    MODE_SPECIAL,
    MODE_SYMLINK,
    Entry,
    TreeView,
)

_SKIP_DIRS = {".git", RUNTIME_DIR}
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
LEGACY = ("PURSUIT_RULES.md", "AGENT_CORRECTION_MEMORY_RULES.md")


class FileBlobs:
    """A BlobSource whose object ids are work-tree paths."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def read_many(self, oids: Sequence[str]) -> Mapping[str, bytes]:
        """The bytes of regular files listed as such: a name that became a symlink or a
        FIFO since the listing is not followed or waited on (OSError)."""
        # Plain strings: a Path object per file costs more than reading it (bench B1).
        base = f"{self.root}/"
        found: dict[str, bytes] = {}
        for oid in oids:
            fd = os.open(base + oid, _READ)
            with os.fdopen(fd, "rb") as file:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise OSError(errno.EINVAL, "no longer a regular file", base + oid)
                found[oid] = file.read()
        return found


def entry_for(path: str, oid: str) -> Entry | None:
    """The entry of the file at `path` (not followed if a symlink); `oid` names a regular
    file's bytes."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    mode = info.st_mode
    if stat.S_ISREG(mode):
        return Entry(MODE_EXECUTABLE if mode & 0o111 else MODE_FILE, info.st_size, oid)
    if stat.S_ISLNK(mode):
        return Entry(MODE_SYMLINK, size=info.st_size)
    if stat.S_ISDIR(mode):
        return Entry(MODE_GITLINK if Path(path, ".git").exists() else MODE_SPECIAL)
    return Entry(MODE_SPECIAL)


def disk_tree_view(root: Path) -> TreeView:
    root = root.absolute()
    git = Git(root)
    if git.git_dir() is not None:  # root is the top level of a work tree (read from files)
        # The allowlist .gitignore hides legacy reference files; they must still be seen.
        names = sorted(
            {
                *git.list_files(),
                *(n for n in LEGACY if (root / n).is_symlink() or (root / n).exists()),
            }
        )
    else:
        names = sorted(_walk(root))
    entries: dict[str, Entry] = {}
    base = f"{root}/"
    for listed in names:
        name = listed.rstrip("/")
        entry = entry_for(base + name, name)
        if entry is not None:
            entries[name] = entry
    return TreeView(entries, FileBlobs(root))


def _walk(root: Path) -> list[str]:
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in _SKIP_DIRS or Path(dirpath) != root]
        rel = Path(dirpath).relative_to(root)
        for name in filenames:
            found.append((rel / name).as_posix() if rel != Path() else name)
        for name in list(dirnames):
            if (Path(dirpath) / name).is_symlink():
                found.append((rel / name).as_posix() if rel != Path() else name)
    return found
