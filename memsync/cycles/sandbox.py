"""A role's own repository, and the guard that proves the role left the root alone.

    create(root, path, start)     a new repository at `path` (never a linked worktree of the
                                  root): its config written by memsync, the root's object
                                  store borrowed read-only as an alternate, `start` checked
                                  out; the role works and commits there
    fetch_result(root, path, ...) the role's one result commit fetched back into the root
                                  through the git box (object checks on), under a ref memsync
                                  names; nothing else of the role's repository is read back
    RootGuard                     the root's refs, HEAD, config, hooks and object-store
                                  settings, byte for byte, before the role runs; after it,
                                  any difference is `role-escaped` and the root is put back

A linked worktree shares the root's refs and config: a role running `git update-ref
refs/heads/main HEAD` there moved the root's branch. In its own repository the same command
moves only that repository's branch; a role that goes looking for the root (through the
alternates file, the state directory, a path it was told) and writes it anyway is caught by
the guard, which restores the root exactly and keeps what the moved refs named under
`refs/memsync/rescue/role-escaped/<commit>` (a person who committed in the root during the
turn loses nothing).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from memsync.atomicfile import fsync_dir, write_bytes
from memsync.cycles.runrecord import ExecutorFailed, FailureKind
from memsync.errors import MemsyncError, ProblemError
from memsync.roots.layout import RESCUE_REFS
from memsync.transports.git import Git
from memsync.transports.process import kill_strays
from memsync.validators.problems import Problem

ROLE_ESCAPED = "role-escaped"  # CONTRACT §8: the root is restored and the turn failed
RESULT_REF = "refs/memsync/result"  # in the role's repository: what is fetched back
ESCAPED_RESCUE = f"{RESCUE_REFS}role-escaped/"

# What in the root's git directory a role must leave byte-identical: single files, and
# directories guarded with everything under them.
GUARDED_FILES = (
    "HEAD",
    "config",
    "config.worktree",
    "packed-refs",
    "commondir",
    "shallow",
    "objects/info/alternates",
    "objects/info/http-alternates",
)
GUARDED_DIRS = ("refs", "hooks", "info")
MAX_ENTRIES = 50_000  # files guarded at most (a root with more refs cannot be guarded)
MAX_BYTES = 64 << 20  # bytes guarded at most

_OID = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")


class RoleEscaped(ProblemError):
    """The role changed the root's refs, config or hooks (now restored)."""

    exit_code = 3
    needs_problems = False
    error_code = "failed"


def escaped_problems(exc: ExecutorFailed) -> tuple[Problem, ...]:
    """`role-escaped` when the executor found a process the role left outside its group."""
    if exc.kind is not FailureKind.ESCAPED:
        return ()
    return (Problem(ROLE_ESCAPED, None, None, exc.message),)


def create(root: Git, path: Path, start: str, identity: list[tuple[str, str]] | None = None) -> Git:
    """A new repository at `path` holding `start` checked out (detached), borrowing the
    root's objects read-only; its config is memsync's (the root's identity only, so a
    role's `git commit` works as it did in the root; `identity`: that identity, when the
    caller read it already). Returns its git box."""
    objects = _objects_dir(root)
    object_format = root.object_format()
    path.mkdir(parents=True, exist_ok=False, mode=0o700)
    box = role_box(root, path)
    box.init(empty_template=True, object_format=object_format)
    info = path / ".git" / "objects" / "info"
    info.mkdir(parents=True, exist_ok=True)
    write_bytes(info / "alternates", f"{objects}\n".encode())
    for key, value in identity if identity is not None else root.identity_config():
        box.set_config(key, value, local=True)
    box.checkout_detached(start)
    return box


def role_box(root: Git, path: Path) -> Git:
    """The git box for the role's repository at `path`: the root's box, whose alternate
    object store (the root's own objects, written by `create`) is memsync's choice."""
    return root.at(path, trusted_alternates=True)


def fetch_result(root: Git, path: Path, commit: str, ref: str) -> None:
    """Fetch exactly `commit` from the role's repository at `path` into the root's `ref`
    (object checks on, no tags, no FETCH_HEAD, memsync's own upload-pack)."""
    role = role_box(root, path)
    role.update_ref(RESULT_REF, commit, reason="memsync: the role's result")
    root.fetch_ref(path, RESULT_REF, ref)
    fetched = root.rev_parse(ref)
    if fetched != commit:
        raise MemsyncError(f"the role's result {commit[:12]} did not arrive in the root")


def kill_stray_processes(path: Path) -> int:
    """Kill what a role left running in its repository at `path` after its run (a process
    whose working directory or an open file is there): it could still write. How many."""
    inside = str(path.resolve())
    under = inside + os.sep

    def working_there(pid: int) -> bool:
        # Plain strings, not Path objects: every process of ours is asked, twice a turn.
        fds = f"/proc/{pid}/fd"
        try:
            with os.scandir(fds) as entries:
                links = [entry.path for entry in entries]
        except OSError:
            links = []
        for link in (f"/proc/{pid}/cwd", *links):
            try:
                target = os.readlink(link)  # noqa: PTH115 - a str, for a string compare
            except OSError:
                continue
            if target == inside or target.startswith(under):
                return True
        return False

    return kill_strays(working_there)


def _objects_dir(root: Git) -> Path:
    common = root.common_dir()
    if common is None:
        raise MemsyncError(f"{root.cwd} is not a Git repository")
    return (common / "objects").resolve()


# -- the guard -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    mode: int  # st_mode: a file's permission bits count (a hook made executable)
    data: bytes  # a file's bytes, a symlink's target


class RootGuard:
    """The root's refs, HEAD, config, hooks and object-store settings, byte for byte."""

    def __init__(self, git_dirs: tuple[Path, ...], entries: dict[Path, _Entry]) -> None:
        self.git_dirs = git_dirs
        self.entries = entries

    @classmethod
    def take(cls, root: Git) -> RootGuard:
        dirs = {d.resolve() for d in (root.git_dir(), root.common_dir()) if d is not None}
        if not dirs:
            raise MemsyncError(f"{root.cwd} is not a Git repository")
        git_dirs = tuple(sorted(dirs))
        return cls(git_dirs, _read(git_dirs))

    def changed(self) -> list[str]:
        """The guarded paths (relative to the git directory) that differ now."""
        now = _read(self.git_dirs)
        paths = {p for p in {*self.entries, *now} if self.entries.get(p) != now.get(p)}
        return sorted(self._shown(p) for p in paths)

    def check(self, root: Git, who: str, workspace: Path | None = None) -> None:
        """Raise RoleEscaped when anything guarded differs from when the guard was taken
        (after restoring the root exactly), or when the role left processes running in
        its `workspace` (after killing them)."""
        strays = kill_stray_processes(workspace) if workspace is not None else 0
        changed = self.changed()
        if not changed and not strays:
            return
        problems: list[Problem] = []
        messages: list[str] = []
        if strays:
            said = (
                f"{who} left {strays} process(es) running in its repository after its run; "
                "they were killed and nothing of this turn lands"
            )
            messages.append(said)
            problems.append(Problem(ROLE_ESCAPED, None, None, said))
        if changed:
            moved = self._moved_commits()
            self.restore()
            kept = [c for c in moved if _keep(root, c)]
            listed = ", ".join(changed[:10]) + (
                f" and {len(changed) - 10} more" if len(changed) > 10 else ""
            )
            said = (
                f"{who} changed the root's own repository ({listed}); the root's refs, "
                "config and hooks were put back exactly as they were and nothing of this "
                "turn lands"
            )
            if kept:
                said += (
                    f"; the commit(s) the changed refs named are kept under {ESCAPED_RESCUE}"
                    f"<commit> ({', '.join(c[:12] for c in kept[:5])}); a commit made in "
                    "the root by hand while the role ran is among them (memsync cannot tell "
                    "who moved the ref): `git merge --ff-only <commit>` takes it back"
                )
            messages.append(said)
            problems += [Problem(ROLE_ESCAPED, path, None, said) for path in changed[:20]]
        raise RoleEscaped("; ".join(messages), tuple(problems))

    def restore(self) -> None:
        """Put every guarded path back as it was: changed files rewritten, added ones
        removed, removed ones recreated."""
        now = _read(self.git_dirs)
        for path in sorted(set(now) - set(self.entries), reverse=True):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        for path, entry in self.entries.items():
            if now.get(path) == entry:
                continue
            _put(path, entry)

    def _moved_commits(self) -> list[str]:
        """The commits the changed refs (loose, packed, HEAD) name now and did not before."""
        before = _named(self.entries, self.git_dirs)
        after = _named(_read(self.git_dirs), self.git_dirs)
        return sorted(after - before)

    def _shown(self, path: Path) -> str:
        for base in self.git_dirs:
            if path.is_relative_to(base):
                return path.relative_to(base).as_posix()
        return path.as_posix()


def _read(git_dirs: tuple[Path, ...]) -> dict[Path, _Entry]:
    found: dict[Path, _Entry] = {}
    total = 0
    for base in git_dirs:
        paths = [base / name for name in GUARDED_FILES]
        for name in GUARDED_DIRS:
            top = base / name
            if top.is_dir() and not top.is_symlink():
                for folder, dirs, files in os.walk(top):
                    paths += [Path(folder, f) for f in files]
                    paths += [Path(folder, d) for d in dirs if Path(folder, d).is_symlink()]
            elif top.is_symlink():
                paths.append(top)
        for path in paths:
            entry = _entry(path)
            if entry is None:
                continue
            found[path] = entry
            total += len(entry.data)
            if len(found) > MAX_ENTRIES or total > MAX_BYTES:
                raise MemsyncError(
                    f"the root's refs, hooks and config are too many to guard ({len(found)} "
                    f"files, {total} bytes; at most {MAX_ENTRIES} and {MAX_BYTES}); "
                    "pack the refs (git pack-refs --all)"
                )
    return found


def _entry(path: Path) -> _Entry | None:
    try:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            return _Entry(info.st_mode, str(path.readlink()).encode("utf-8", "surrogateescape"))
        if not stat.S_ISREG(info.st_mode):
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except (FileNotFoundError, NotADirectoryError):
        return None
    with os.fdopen(fd, "rb") as handle:
        return _Entry(info.st_mode, handle.read(MAX_BYTES + 1))


def _put(path: Path, entry: _Entry) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileNotFoundError, IsADirectoryError):
        if path.is_symlink() or not path.is_dir():
            path.unlink()
    if stat.S_ISLNK(entry.mode):
        path.symlink_to(entry.data.decode("utf-8", "surrogateescape"))
        return
    temp = path.with_name(f".{path.name}.memsync-restore")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(entry.data)
            out.flush()
            os.fchmod(out.fileno(), stat.S_IMODE(entry.mode))
            os.fsync(out.fileno())
        temp.replace(path)  # the root's own directories keep their modes
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()
    fsync_dir(path.parent)


def _named(entries: dict[Path, _Entry], git_dirs: tuple[Path, ...]) -> set[str]:
    """Every object id a ref file, packed-refs or HEAD names."""
    named: set[str] = set()
    for path, entry in entries.items():
        base = next((d for d in git_dirs if path.is_relative_to(d)), None)
        if base is None or stat.S_ISLNK(entry.mode):
            continue
        relative = path.relative_to(base).parts
        if relative[0] in ("HEAD", "packed-refs", "refs"):
            named.update(_OID.findall(entry.data.decode("ascii", "replace")))
    return named


def _keep(root: Git, commit: str) -> bool:
    """Pin `commit` under the role-escaped rescue namespace when the root has it."""
    if not root.has_commit(commit):
        return False
    return root.set_ref(f"{ESCAPED_RESCUE}{commit}", commit, "memsync: role-escaped")
