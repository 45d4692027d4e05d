"""The config guard's reading on disk: what `git config --list` said of a root, for the
next one-shot process (`sync-now` without a daemon), which would otherwise run it again.

A record is a cache, never an authority, and it is used only where every input git read
its config from can be seen by memsync without git:

* the root's `.git` is a plain repository directory (`plain_git_dir`): no `gitdir:` file,
  no linked worktree, no symlink; git then reads the config of `.git/config` (and
  `.git/config.worktree`) and of the command line, nothing else (no system or global
  config: the box turns both off);
* every entry git listed comes from `.git/config`, `.git/config.worktree` or memsync's own
  command line (exactly the forced config), and none is an include (`include.*`,
  `includeIf.*`: a file or condition memsync would have to evaluate as git does), and
  none holds what `redact_secrets` hides (a URL's user-info, a token): no credential is
  copied out of `.git/config`;
* each of those files (and `.git` itself) is a regular file (a directory) or absent, and
  is named in the record by its identity (device, inode, mode, owner, size, mtime and
  ctime in nanoseconds) and the BLAKE2b digest of its bytes, both taken before and after
  git read it and equal; a file changed so recently that a later change could keep its
  timestamps (within `RACY_NS`, or a whole second on a file system that keeps no finer
  time) is not recorded;
* the record names the rules that read it (the source of the guard's modules), the git
  executable (its path and identity) and the box's environment (a digest).

Any difference, any doubt, anything unreadable, not a private regular file of ours,
oversized or malformed: git is asked again. What the record holds is git's output only
(the parsed entries): the guard judges them with its current rules on every use, and the
object stores (alternates, grafts) are looked at on every use too.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from memsync import atomicfile
from memsync.memodigest import blake2b
from memsync.redaction import redact_secrets
from memsync.transports.gitconfig import ConfigEntry, split_key
from memsync.transports.gitenv import FORCED_CONFIG, find_git
from memsync.transports.gitread import plain_git_dir
from memsync.transports.process import search_path
from memsync.validators import recordfile
from memsync.values import value

TYPE_CHECKING = False  # `typing` loads after a cycle's first git processes start (issue 18)
if TYPE_CHECKING:
    from typing import Any

FORMAT = "memsync-repo-config/1"
MAX_RECORD_BYTES = 1 << 20
MAX_CONFIG_BYTES = 1 << 20  # a bigger config is asked of git every time
# A file whose mtime or ctime is this close to (or after) the moment git started reading
# it may change again with the same timestamps (the kernel's coarse clock ticks every few
# milliseconds): its reading is not recorded.
RACY_NS = 100_000_000
COARSE_RACY_NS = 3_000_000_000  # a file system that keeps whole seconds (or two)
# The config files git reads in a plain repository, relative to `.git`.
FILES = ("config", "config.worktree")
_ORIGINS = {f"file:.git/{name}" for name in FILES}
_FILE_SCOPES = frozenset({"local", "worktree"})
_COMMAND = ("command", "command line:")

Identity = tuple[int, int, int, int, int, int, int]
Stamp = tuple[str, Identity | None, str | None]  # path, identity (None: absent), digest


def _rules_digest() -> str:
    """Names the code that reads and judges the config: a change makes every record foreign."""
    digest = blake2b(FORMAT.encode(), digest_size=16)
    digest.update(repr(sys.version_info[:2]).encode())
    for name in (
        "memsync.transports.gitguard",
        "memsync.transports.gitconfig",
        "memsync.transports.gitkeys",
        "memsync.transports.gitenv",
        __name__,
    ):
        module = sys.modules.get(name)
        source = getattr(module, "__file__", None)
        try:
            digest.update(Path(source).read_bytes() if source else name.encode())
        except OSError:
            digest.update(b"unreadable " + name.encode())
    return digest.hexdigest()


def _identity(info: os.stat_result) -> Identity:
    return (
        info.st_dev,
        info.st_ino,
        info.st_mode,
        info.st_uid,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


def _environment(env: Mapping[str, str]) -> str | None:
    """A digest of the box's environment and of the git it runs (None: no git found)."""
    found = find_git(search_path(env.get("PATH")))
    if found is None:
        return None
    try:
        program = _identity(Path(found).stat())
    except OSError:
        return None
    digest = blake2b(digest_size=16)
    digest.update(json.dumps([sorted(env.items()), found, program]).encode())
    return digest.hexdigest()


@value
class Inputs:
    """What git reads its config from in a plain repository, as it stands now."""

    cwd: str
    dot: tuple[int, int, int, int]  # `.git` itself: device, inode, mode, owner
    files: tuple[Stamp, ...]

    @classmethod
    def take(cls, cwd: Path) -> Inputs | None:
        """The inputs of a plain repository at `cwd`; None for any other shape, or when a
        config file is not a regular file (or absent), or too big to digest."""
        dot = plain_git_dir(cwd)
        if dot is None:
            return None
        try:
            dot_info = dot.lstat()
        except OSError:
            return None
        if not stat.S_ISDIR(dot_info.st_mode):
            return None
        stamps: list[Stamp] = []
        for name in FILES:
            stamp = _stamp(dot / name)
            if stamp is None:
                return None
            stamps.append(stamp)
        # `.git` as a directory: which one, and whose (its times change with every lock file)
        dot_identity = (dot_info.st_dev, dot_info.st_ino, dot_info.st_mode, dot_info.st_uid)
        return cls(str(cwd), dot_identity, tuple(stamps))

    def racy(self, started_ns: int) -> bool:
        """Whether a file may still change without its identity changing (see `RACY_NS`)."""
        for _path, identity, _digest in self.files:
            if identity is None:
                continue
            mtime, ctime = identity[5], identity[6]
            coarse = mtime % 1_000_000_000 == 0 and ctime % 1_000_000_000 == 0
            window = COARSE_RACY_NS if coarse else RACY_NS
            if max(mtime, ctime) >= started_ns - window:
                return True
        return False

    def to_json(self) -> list[Any]:
        files = [[path, None if i is None else list(i), digest] for path, i, digest in self.files]
        return [self.cwd, list(self.dot), files]


def _stamp(path: Path) -> Stamp | None:
    """(path, identity, digest of the bytes); identity and digest None when absent; None
    when the path is anything but a regular file, or too big, or changes while read."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except FileNotFoundError:
        try:
            path.lstat()
        except FileNotFoundError:
            return (str(path), None, None)
        except OSError:
            return None
        return None  # a dangling link
    except OSError:
        return None
    try:
        before = os.fstat(fd)
        if not stat.S_ISREG(before.st_mode) or before.st_size > MAX_CONFIG_BYTES:
            return None
        with os.fdopen(os.dup(fd), "rb") as handle:
            data = handle.read(MAX_CONFIG_BYTES + 1)
        after = os.fstat(fd)
    except OSError:
        return None
    finally:
        os.close(fd)
    if _identity(before) != _identity(after) or len(data) != before.st_size:
        return None
    return (str(path), _identity(before), blake2b(data, digest_size=32).hexdigest())


def recordable(entries: Sequence[ConfigEntry]) -> bool:
    """Whether a reading holds only what the record can vouch for: entries of the plain
    repository's own config files (at least one: git did read `.git/config`) and exactly
    memsync's forced command-line config, no include, and nothing `redact_secrets` would
    hide (a credential in a remote's URL stays in `.git/config` alone)."""
    command: list[tuple[tuple[str, str | None, str], str | None]] = []
    local = 0
    for entry in entries:
        key = entry.key.lower()
        if key.startswith(("include.", "includeif.")):
            return False
        if any(redact_secrets(text) != text for text in (entry.key, entry.value or "")):
            return False  # a URL with user-info (a password?), a token: never copied to disk
        if (entry.scope, entry.origin) == _COMMAND:
            command.append((split_key(entry.key), entry.value))
        elif entry.scope in _FILE_SCOPES and entry.origin in _ORIGINS:
            local += entry.origin == "file:.git/config"
        else:
            return False
    forced = [(split_key(key), value) for key, value in FORCED_CONFIG]
    return local > 0 and command == forced


class ConfigRecord:
    """One root's reading, in the file `path` (in a private directory of memsync's)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def load(self, cwd: Path, env: Mapping[str, str]) -> tuple[ConfigEntry, ...] | None:
        """The entries git listed for `cwd` when every input is as it was then, else None."""
        data = recordfile.read_private(self.path, MAX_RECORD_BYTES)
        if data is None:
            return None
        inputs = Inputs.take(cwd)
        environment = _environment(env)
        if inputs is None or environment is None:
            return None
        try:
            body = json.loads(data)
            if not isinstance(body, dict) or body.get("format") != FORMAT:
                return None
            expected = [_rules_digest(), environment, inputs.to_json()]
            if body.get("key") != json.loads(json.dumps(expected)):
                return None
            entries = tuple(_entry(row) for row in body["entries"])
        except (ValueError, TypeError, KeyError):
            return None
        return entries if recordable(entries) else None

    def save(
        self,
        cwd: Path,
        env: Mapping[str, str],
        before: Inputs | None,
        started_ns: int,
        entries: Sequence[ConfigEntry],
    ) -> None:
        """Record what git listed, when `before` (the inputs taken before git ran) still
        holds, nothing in it is racy and the entries are `recordable`; else forget any
        record (best effort: an unwritable record only misses)."""
        after = Inputs.take(cwd)
        environment = _environment(env)
        keep = (
            before is not None
            and after == before
            and environment is not None
            and not after.racy(started_ns)
            and recordable(entries)
        )
        with contextlib.suppress(OSError):
            if not keep or after is None or environment is None:
                self.path.unlink(missing_ok=True)
                return
            if not recordfile.private_directory(self.path.parent):
                return
            body = {
                "format": FORMAT,
                "key": [_rules_digest(), environment, after.to_json()],
                "entries": [[e.scope, e.origin, e.key, e.value] for e in entries],
            }
            atomicfile.write_bytes(self.path, json.dumps(body).encode(), durable=False)


def started() -> int:
    """The wall clock before git reads the config (see `Inputs.racy`)."""
    return time.time_ns()


def _entry(row: Any) -> ConfigEntry:
    scope, origin, key, value = row
    if not (
        isinstance(scope, str)
        and isinstance(origin, str)
        and isinstance(key, str)
        and (value is None or isinstance(value, str))
    ):
        raise TypeError("not a config entry")
    return ConfigEntry(scope, origin, key, value)
