"""The config guard: per repository, its config entries and the overrides that defuse them.

Read with one `git config --list` and kept until one of the files it came from changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memsync.transports.gitconfig import (
    ConfigEntry,
    config_env,
    neutralizing_config,
    parse_config_list,
)
from memsync.transports.gitread import KEPT, Recent

if TYPE_CHECKING:
    from memsync.transports.gitcore import GitCore


@dataclass(frozen=True)
class _Reading:
    files: tuple[Path, ...]
    stamps: tuple[tuple[int, int, int] | None, ...]
    entries: tuple[ConfigEntry, ...]
    env: dict[str, str]


class ConfigGuard:
    """Per repository: its config entries and the overrides that defuse them.

    Read with one `git config --list` and kept until one of the files it came from (or
    might come from: the repository's config files, every include target) changes, so a
    cycle with nothing to do still costs no extra process.
    """

    def __init__(self) -> None:
        self._cache: Recent[Path, _Reading] = Recent(KEPT)

    def env(self, git: GitCore) -> dict[str, str]:
        return self._load(git).env

    def entries(self, git: GitCore) -> tuple[ConfigEntry, ...]:
        return self._load(git).entries

    def _load(self, git: GitCore) -> _Reading:
        cached = self._cache.get(git.cwd)
        if cached is not None and _stamps(cached.files) == cached.stamps:
            return cached
        result = git.run(
            "config", "--list", "-z", "--show-scope", "--show-origin", check=False, guard=False
        )
        entries = tuple(parse_config_list(result.stdout)) if result.returncode == 0 else ()
        files = _config_files(git, entries)
        reading = _Reading(files, _stamps(files), entries, config_env(neutralizing_config(entries)))
        self._cache.put(git.cwd, reading)
        return reading


def _config_files(git: GitCore, entries: Sequence[ConfigEntry]) -> tuple[Path, ...]:
    """Every file whose change could change what `git config --list` says here."""
    files = {git.cwd / "config", git.cwd / ".git" / "config"}
    git_dir, common = git.git_dir(), git.common_dir()
    for directory in (git_dir, common):
        if directory is not None:
            files |= {directory / "config", directory / "config.worktree"}
    for entry in entries:
        if entry.origin.startswith("file:"):
            origin = git.cwd / entry.origin.removeprefix("file:")
            files.add(origin)
            if entry.key.lower().startswith("include") and entry.key.lower().endswith(".path"):
                target = Path(entry.value or "").expanduser()
                files.add(target if target.is_absolute() else origin.parent / target)
    return tuple(sorted(files))


def _stamps(paths: Sequence[Path]) -> tuple[tuple[int, int, int] | None, ...]:
    stamps: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            stamps.append(None)
        else:
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(stamps)


GUARD = ConfigGuard()
