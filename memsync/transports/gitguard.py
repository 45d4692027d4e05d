"""The config guard: per repository, its config entries, the overrides that defuse them,
and what refuses the repository (a key outside the allowlist, an alternate object store).

Read with one `git config --list` and kept until one of the files it came from changes.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from memsync.errors import UnsafeRepoConfig
from memsync.transports.gitconfig import (
    ConfigEntry,
    config_env,
    neutralizing_config,
    parse_config_list,
)
from memsync.transports.gitenv import FORCED_KEYS, cause
from memsync.transports.gitkeys import Unsafe, unsafe_config
from memsync.transports.gitread import KEPT, Recent
from memsync.values import value

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from memsync.transports.gitcore import GitCore


@value
class _Reading:
    """One reading of a repository's config files and what it decided."""

    files: tuple[Path, ...]
    stamps: tuple[tuple[int, int, int] | None, ...]
    entries: tuple[ConfigEntry, ...]
    env: dict[str, str]
    unsafe: tuple[Unsafe, ...]  # what refuses the repository; empty when git may run


class ConfigGuard:
    """Per repository: its config entries and the overrides that defuse them.

    Read with one `git config --list` and kept until one of the files it came from (or
    might come from: the repository's config files, every include target) changes, so a
    cycle with nothing to do still costs no extra process. One reading at a time per
    repository: a cycle's prefetch and its status start together, and the second waits
    for the first's reading instead of running `git config --list` again. A box with a
    `config_record` (a one-shot cycle's root) takes git's last reading from it while every
    input is as git read it (`gitconfigrecord`), and records a new one; either way the
    entries are judged here, with these rules, on every reading.
    """

    def __init__(self) -> None:
        self._cache: Recent[Path, _Reading] = Recent(KEPT)
        self._locks: Recent[Path, threading.Lock] = Recent(KEPT)
        self._locks_lock = threading.Lock()

    def env(self, git: GitCore) -> dict[str, str]:
        """The overrides for one guarded call; UnsafeRepoConfig when git may not run here."""
        reading = self._load(git)
        unsafe = self._unsafe(git, reading)
        if unsafe:
            first = unsafe[0]
            more = f" (and {len(unsafe) - 1} more)" if len(unsafe) > 1 else ""
            raise UnsafeRepoConfig(
                f"refusing to run git on {git.cwd}: {first.message}{more}",
                [(u.where, u.message) for u in unsafe],
                hint=f"see `memsync validate {git.cwd}` for every key that refuses the root",
            )
        return reading.env

    def entries(self, git: GitCore) -> tuple[ConfigEntry, ...]:
        return self._load(git).entries

    def unsafe(self, git: GitCore) -> tuple[Unsafe, ...]:
        """What refuses the repository (for `validate` and `doctor`), without raising."""
        return self._unsafe(git, self._load(git))

    @staticmethod
    def _unsafe(git: GitCore, reading: _Reading) -> tuple[Unsafe, ...]:
        if git.trusted_alternates:  # a repository memsync made, borrowing objects it chose
            return tuple(u for u in reading.unsafe if not u.what.endswith(_ALTERNATES))
        return reading.unsafe

    def _load(self, git: GitCore) -> _Reading:
        cached = self._fresh(git.cwd)
        if cached is not None:
            return cached
        with self._lock(git.cwd):
            cached = self._fresh(git.cwd)  # read by another thread while this one waited
            return cached if cached is not None else self._read(git)

    def _fresh(self, cwd: Path) -> _Reading | None:
        cached = self._cache.get(cwd)
        if cached is not None and _stamps(cached.files) == cached.stamps:
            return cached
        return None

    def _lock(self, cwd: Path) -> threading.Lock:
        with self._locks_lock:
            lock = self._locks.get(cwd)
            if lock is None:
                lock = threading.Lock()
                self._locks.put(cwd, lock)
            return lock

    def _read(self, git: GitCore) -> _Reading:
        if git.config_record is None:
            return self._judged(git, self._listed(git))
        from memsync.transports import gitconfigrecord  # noqa: PLC0415 - one-shot processes

        record = gitconfigrecord.ConfigRecord(git.config_record)
        kept = record.load(git.cwd, git.box_env)
        if kept is not None:  # what git said, with every input as it was: judged afresh
            return self._judged(git, (0, kept, ""))
        before = gitconfigrecord.Inputs.take(git.cwd)
        started = gitconfigrecord.started()
        listed = self._listed(git)
        if listed[0] == 0:
            record.save(git.cwd, git.box_env, before, started, listed[1])
        return self._judged(git, listed)

    @staticmethod
    def _listed(git: GitCore) -> tuple[int, tuple[ConfigEntry, ...], str]:
        """git's own listing: (exit code, the entries, stderr)."""
        result = git.run(
            "config", "--list", "-z", "--show-scope", "--show-origin", check=False, guard=False
        )
        entries = tuple(parse_config_list(result.stdout)) if result.returncode == 0 else ()
        return result.returncode, entries, result.stderr

    def _judged(self, git: GitCore, listed: tuple[int, tuple[ConfigEntry, ...], str]) -> _Reading:
        returncode, entries, stderr = listed
        files = _config_files(git, entries)
        if returncode != 0:  # fail closed: what git cannot read, memsync cannot judge
            import shlex  # noqa: PLC0415 - a refusal's fix only

            unreadable = Unsafe(
                "the repository's config",
                None,
                f"git cannot read it ({cause(stderr)})",
                f"git -C {shlex.quote(str(git.cwd))} config --list",
                until="fixed",
            )
            unsafe: tuple[Unsafe, ...] = (unreadable,)
        else:
            unsafe = (
                *unsafe_config(entries, FORCED_KEYS, str(git.cwd)),
                *_object_stores(git),
            )
        env = config_env(neutralizing_config(entries))
        reading = _Reading(files, _stamps(files), entries, env, unsafe)
        self._cache.put(git.cwd, reading)
        return reading


# Files that make git read objects (or history) from elsewhere, relative to the common
# directory. `http-alternates` is served to dumb-HTTP clients of this repository.
_ALTERNATES = ("objects/info/alternates", "objects/info/http-alternates")
_STORES = (*_ALTERNATES, "info/grafts")


def _object_stores(git: GitCore) -> list[Unsafe]:
    common = git.common_dir()
    if common is None:
        return []
    found = []
    for name in _STORES:
        path = common / name
        if not (path.exists() or path.is_symlink()):
            continue
        shown = _shown(path, git.cwd)
        import shlex  # noqa: PLC0415 - a refusal's fix only

        remove = shlex.join(["rm", "--", str(path)])
        if name == "info/grafts":
            reason = "rewrites commits' parents, so history is not what the objects say"
            fix = remove
        else:
            reason = "an alternate object store: git would use objects memsync never checked"
            fix = f"{shlex.join(['git', '-C', str(git.cwd), 'repack', '-a', '-d'])} && {remove}"
        found.append(Unsafe(shown, shown, reason, fix))
    return found


def _shown(path: Path, root: Path) -> str:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return str(path)


def _config_files(git: GitCore, entries: Sequence[ConfigEntry]) -> tuple[Path, ...]:
    """Every file whose change could change what `git config --list` says here."""
    files = {git.cwd / "config", git.cwd / ".git" / "config"}
    git_dir, common = git.git_dir(), git.common_dir()
    for directory in (git_dir, common):
        if directory is not None:
            files |= {directory / "config", directory / "config.worktree"}
    if common is not None:  # created or removed, they change the verdict
        files |= {common / name for name in _STORES}
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
