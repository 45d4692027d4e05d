"""A repository's files (refs, HEAD, config, where it is), read without a process.

The usual shapes are read here directly (`plain_git_dir`, `file_ref`): a `.git` directory
that git and GitPython both take as the repository, a loose ref file holding one object
id or the ref's line in `packed-refs`. Anything else is read by GitPython, or asked of git.

The rule for GitPython (see `git.py`): it **never starts a process**. It is imported lazily
with its executable pointed at a path that cannot exist; whatever it cannot answer for
certain is answered `ASK_GIT`, and the box asks git. One cheap `Repo` handle is kept per
work tree and dropped when `.git` changes identity; nothing else of GitPython's outlives a
call. Its import costs more than a few git processes, so a one-shot process (a `sync-now`
without a daemon: `resident=False` on the box) never loads it for what git can answer.
"""

from __future__ import annotations

import functools
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from enum import Enum
from pathlib import Path

from memsync.lazypattern import lazy
from memsync.transports.gitenv import OID

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Generic, TypeVar

    from git.repo import Repo

    _K = TypeVar("_K")
    _V = TypeVar("_V")

    class _Typed(Generic[_K, _V]):
        """`Recent`'s key and value types, for the type checker."""

else:
    _K = _V = object

    class _Typed:
        """At run time `Recent` takes no type parameters (`Recent[K, V]` is `Recent`)."""

        def __class_getitem__(cls, _parameters: object) -> type:
            return cls


# Work trees whose config reading and GitPython handle are kept: every root, and the
# candidate worktrees of recent cycles (each has its own path, so the oldest are forgotten).
# Above a team server's root count (issue 18: at 128, 200 roots polled in turn each lost
# theirs before its next poll and paid a `git config --list` and a new handle every poll).
KEPT = 1024


class Recent(_Typed[_K, _V]):
    """A small thread-safe map that forgets its least recently used keys past `size`."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._items: OrderedDict[_K, _V] = OrderedDict()

    def get(self, key: _K) -> _V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: _K, value: _V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def drop(self, key: _K) -> None:
        with self._lock:
            self._items.pop(key, None)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


# Where GitPython looks for git: nothing can be there, so a GitPython call that would start
# git (`repo.git.*`, `is_dirty()`, an object read) fails instead of running git outside the box.
_NO_GIT = "/nonexistent/memsync-runs-git-only-through-its-box/git"
# Variables GitPython obeys when it opens a repository and git in the box never sees.
_OBEYED_ENV = ("GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")
# Refs each worktree has its own of (GitPython reads every ref but HEAD from the common dir).
PER_WORKTREE = ("refs/worktree/", "refs/bisect/", "refs/rewritten/")


class Read(Enum):
    NO_REPOSITORY = "no-repository"  # no `.git` of its own, or not a repository
    ASK_GIT = "ask-git"  # GitPython cannot answer for certain: git in the box decides


_IMPORT_LOCK = threading.Lock()


@functools.cache
def load_gitpython() -> None:
    """Import GitPython once, unable to start git.

    Its import runs `git version` unless told where git is; pointing it at `_NO_GIT` (with
    `GIT_PYTHON_REFRESH=quiet`, so a missing git neither fails nor warns) starts nothing.
    The two variables are set only while it imports.
    """
    with _IMPORT_LOCK:
        wanted = {"GIT_PYTHON_REFRESH": "quiet", "GIT_PYTHON_GIT_EXECUTABLE": _NO_GIT}
        saved = {key: os.environ.get(key) for key in wanted}
        os.environ.update(wanted)
        try:
            import git.cmd  # noqa: PLC0415 - 60 ms: only when a repository is first read
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        git.cmd.Git.GIT_PYTHON_GIT_EXECUTABLE = _NO_GIT  # quiet mode had reset it to `git`


class _Handle:
    """A GitPython repository kept for one work tree, while its `.git` stays. A plain
    class: a one-shot process never opens one, and a dataclass costs its module's import
    a few generated functions (issue 18)."""

    __slots__ = ("git_dir", "identity", "repo")

    def __init__(self, identity: tuple[int, ...], git_dir: Path, repo: Repo) -> None:
        self.identity = identity  # of `.git`: its inode, and a `gitdir:` file's stat
        self.git_dir = git_dir
        self.repo = repo


class Handles:
    """One GitPython `Repo` per work tree, kept while its `.git` stays the same file.

    Opening a `Repo` reads `.git` and the config (~0.2 ms); it holds no process and no
    open file afterwards, and every read through it goes back to the files. A `.git` that
    is not (yet) a repository is not remembered: a clone in progress is seen once done.
    """

    def __init__(self, size: int) -> None:
        self._cache: Recent[Path, _Handle] = Recent(size)

    def open(self, worktree: Path) -> _Handle | Read:
        dot = worktree / ".git"
        try:
            st = dot.lstat()
            if stat.S_ISLNK(st.st_mode):
                st = dot.stat()
                if stat.S_ISDIR(st.st_mode):  # a symlinked `.git` directory is not the root's own
                    return Read.NO_REPOSITORY
        except OSError:
            return Read.NO_REPOSITORY
        if stat.S_ISDIR(st.st_mode):
            identity: tuple[int, ...] = (st.st_dev, st.st_ino)
        else:  # a `gitdir:` file (a linked worktree): what it says changes its stat
            identity = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        if any(key in os.environ for key in _OBEYED_ENV):
            return Read.ASK_GIT
        cached = self._cache.get(worktree)
        if cached is not None and cached.identity == identity:
            return cached
        load_gitpython()
        from git.exc import InvalidGitRepositoryError, NoSuchPathError  # noqa: PLC0415
        from git.repo import Repo  # noqa: PLC0415

        try:
            repo = Repo(worktree, search_parent_directories=False, expand_vars=False)
        except (InvalidGitRepositoryError, NoSuchPathError):
            return Read.NO_REPOSITORY
        except Exception:  # anything else GitPython trips on: git decides
            return Read.ASK_GIT
        if not stat.S_ISDIR(st.st_mode):
            git_dir = Path(repo.git_dir)
        elif dot.samefile(repo.git_dir):
            git_dir = dot
        else:  # `.git` is no repository, but the work tree itself looks like a bare one
            return Read.NO_REPOSITORY
        handle = _Handle(identity, git_dir, repo)
        self._cache.put(worktree, handle)
        return handle


HANDLES = Handles(KEPT)


def _kind(path: Path) -> int | None:
    """The file type bits of `path` itself (a symlink is a symlink), None when absent."""
    try:
        return stat.S_IFMT(path.lstat().st_mode)
    except OSError:
        return None


def plain_git_dir(worktree: Path) -> Path | None:
    """`worktree/.git` when it is a plain repository directory, read from its files alone.

    Plain: a real directory (not a symlink) holding a regular `HEAD` file and real
    `objects` and `refs` directories, and no `commondir` (a worktree's administrative
    directory); the work tree itself holds no `HEAD` (it would look like a bare repository
    to GitPython). git and GitPython both take such a `.git` as the repository. None for
    any other shape: GitPython or git decides (`Handles.open`).
    """
    dot = worktree / ".git"
    if (
        _kind(dot) == stat.S_IFDIR
        and _kind(dot / "HEAD") == stat.S_IFREG
        and _kind(dot / "objects") == stat.S_IFDIR
        and _kind(dot / "refs") == stat.S_IFDIR
        and _kind(dot / "commondir") is None
        and _kind(worktree / "HEAD") is None
    ):
        return dot
    return None


# A ref name read as a file path: plain components only (no `..`, no empty or dotted ones).
_REF_NAME = lazy(r"refs(/[A-Za-z0-9_+@-][A-Za-z0-9._+@-]*)+")
_SHA1_LINE = lazy(rb"[0-9a-f]{40}\n")
# The longest loose ref file read (an object id and a newline; a symbolic ref is asked).
_LOOSE_MAX = 128
# The largest `packed-refs` file read here; a bigger one is asked of git.
PACKED_MAX = 1 << 20
_PACKED_HEADER = b"# pack-refs with:"


def file_ref(git_dir: Path, ref: str) -> str | None:
    """The object id a ref of a plain repository (`plain_git_dir`) holds, from its files.

    Only the exact shapes git's files backend writes are answered: a regular loose file
    `git_dir/ref` holding a SHA-1 id and a newline (written by rename, never half-written;
    a loose ref wins over `packed-refs`), or, when there is no loose file, the ref's line
    in a `packed-refs` of at most `PACKED_MAX` bytes. None for anything else (absent,
    symbolic, SHA-256, another ref backend, an unusual name, an unexpected line): GitPython
    or git decides.
    """
    if _REF_NAME.fullmatch(ref) is None or ref.endswith(".lock"):
        return None
    if _kind(git_dir / "reftable") is not None:
        return None
    loose = _small_file(git_dir / ref, _LOOSE_MAX)
    if isinstance(loose, bytes):
        return loose[:40].decode("ascii") if _SHA1_LINE.fullmatch(loose) else None
    if loose is not _ABSENT:
        return None
    packed = _small_file(git_dir / "packed-refs", PACKED_MAX)
    if not isinstance(packed, bytes):
        return None
    return _packed_line(packed, ref.encode("ascii"))


class _Unread(Enum):
    ABSENT = "absent"
    OTHER = "other"  # not a regular file, too big, or unreadable


_ABSENT = _Unread.ABSENT


def _small_file(path: Path, limit: int) -> bytes | _Unread:
    """The bytes of a regular file of at most `limit` bytes (a symlink is not followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return _Unread.ABSENT
    except OSError:
        return _Unread.OTHER
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > limit:
            return _Unread.OTHER
        data = os.read(fd, limit + 1)
    except OSError:
        return _Unread.OTHER
    finally:
        os.close(fd)
    return data if len(data) <= limit else _Unread.OTHER


def _packed_line(packed: bytes, ref: bytes) -> str | None:
    """The id `packed-refs` lists for `ref`: every line must be one git writes (the header,
    `<id> <name>`, or a peeled `^<id>`), else None (git decides)."""
    found: str | None = None
    lines = packed.split(b"\n")
    if lines[-1] != b"":
        return None  # not ended by a newline: not a file git wrote whole
    for line in lines[:-1]:
        if line.startswith(_PACKED_HEADER):
            continue
        if line.startswith(b"^"):
            if _SHA1_LINE.fullmatch(line[1:] + b"\n") is None:
                return None
            continue
        oid, space, name = line[:40], line[40:41], line[41:]
        if space != b" " or _SHA1_LINE.fullmatch(oid + b"\n") is None or not name:
            return None
        if name == ref:
            if found is not None:
                return None  # listed twice: git decides
            found = oid.decode("ascii")
    return found


def read_ref(repo: Repo, ref: str) -> str | None:
    """The object id `ref` holds, loose or packed, through symbolic refs; None: ask git."""
    from git.refs.symbolic import SymbolicReference  # noqa: PLC0415

    try:
        oid = SymbolicReference.dereference_recursive(repo, ref)
    except Exception:  # missing, unreadable, too deep, an unknown packed-refs format
        return None
    return oid if OID.fullmatch(oid) else None


def head_branch(repo: Repo) -> str | Read | None:
    """The branch HEAD names when it holds a commit; None when HEAD is detached."""
    try:
        head = repo.head.reference
    except TypeError:  # HEAD holds an object id
        return None
    except Exception:  # unreadable HEAD
        return Read.ASK_GIT
    name = str(head.path)
    try:
        # `is_detached`: the branch holds an object id (git names the last ref of a chain)
        plain = name.startswith("refs/heads/") and head.is_detached
    except Exception:  # an unborn branch, an invalid name (another ref backend): git decides
        return Read.ASK_GIT
    return name.removeprefix("refs/heads/") if plain else Read.ASK_GIT


def config_value(repo: Repo, read: Callable[[], object]) -> str | None:
    """What `read` finds in the repository's own config, when GitPython reads it as git
    does; None (ask git) when it is not there or might be read differently."""
    for directory in {repo.git_dir, repo.common_dir}:
        if Path(directory, "config.worktree").exists():
            return None  # GitPython does not read per-worktree config
    try:
        value = read()
    except Exception:  # not set, or a file its parser cannot decode
        return None
    if not isinstance(value, str) or '"' in value or "\\" in value:
        return None  # GitPython keeps some quotes and escapes that git decodes
    return value
