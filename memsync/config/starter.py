"""`memsync config init`: a minimal configuration for the memory roots given or found, one
that `memsync doctor` passes, written without ever replacing a file memsync was not told to.

Decided here, from facts read first:

- the roots: each `--root NAME=PATH`, else `~/.rightmemory` when it is a memory root. A
  memory root is the top level of a Git work tree on a branch, with a regular `MEMORY.md`,
  whose own Git config memsync does not refuse (the same test `doctor` makes); a given
  path that is not one is an error, never a config that fails later;
- each root's remote: its branch's tracking remote, else `origin`, else its only remote;
  with none, sync is written off (`doctor` would fail a root without its remote) and the
  file says how to turn it on;
- the state dir and the control socket: written out (`$XDG_STATE_HOME/memsync`, the socket
  in `$XDG_RUNTIME_DIR`), so the daemon under a supervisor with another environment and
  the commands in a shell agree on them.

The text is YAML dumped from plain values (any path quotes correctly) and loaded back
through the schema before it is written. The file is 0600; a directory it creates is 0700,
and memsync's own config directory is tightened to 0700. An existing file is replaced only
with `force`, and only when it is a regular file: never a symbolic link (nor through one),
and never in a directory others may write.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import stat
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from memsync.atomicfile import DIR_MODE, FILE_MODE, fsync_dir
from memsync.config.load import load_config_text
from memsync.errors import ConfigError, RootError, UsageError
from memsync.names import NAME_MAX, is_name
from memsync.regularfile import kind_of
from memsync.values import value

if TYPE_CHECKING:
    from memsync.transports.git import Git

FOUND_ROOTS = (("personal", Path("~/.rightmemory")),)  # looked for when no --root is given
ROOT_DOCUMENT = "MEMORY.md"
SOCKET_NAME = "memsync.sock"


@value
class StarterRoot:
    """One root as the starter writes it: `remote` None means sync is written off."""

    name: str
    path: Path
    branch: str
    remote: str | None
    note: str | None = None  # why sync is off, written as a comment


def parse_root_option(text: str) -> tuple[str, Path]:
    """`NAME=PATH` of `--root` (UsageError when it is not one)."""
    name, sep, path = text.partition("=")
    if not sep or not path:
        raise UsageError(f"--root {text!r} is not NAME=PATH", hint="e.g. --root work=~/work-memory")
    if not is_name(name):
        raise UsageError(
            f"--root name {name!r} is not a valid root name",
            hint=f"letters, digits, '_', '.', '-', starting with a letter or digit, "
            f"at most {NAME_MAX} characters",
        )
    try:
        path.encode("utf-8")
    except UnicodeEncodeError as exc:  # undecodable bytes in argv: a config is UTF-8 text
        raise UsageError(
            f"--root {name}: the path is not valid UTF-8", hint="rename the directory"
        ) from exc
    return name, Path(path).expanduser().absolute()


def found_roots(home: Path) -> list[tuple[str, Path]]:
    """The usual places that hold a memory root (a Git work tree with MEMORY.md)."""
    found = []
    for name, place in FOUND_ROOTS:
        path = home / place.relative_to("~")
        if (path / ".git").exists() and (path / ROOT_DOCUMENT).is_file():
            found.append((name, path))
    return found


def describe_root(name: str, path: Path) -> StarterRoot:
    """The root at `path` as the starter writes it; RootError when it is not a memory root."""
    from memsync.transports.git import Git  # noqa: PLC0415
    from memsync.transports.repoconfig import refusing_problems  # noqa: PLC0415 - git loads here

    fix = f"create one with `memsync init {path}`, or pass the path of an existing root"
    if not path.is_dir():
        raise RootError(f"root {name}: {path} does not exist or is not a directory", hint=fix)
    git = Git(path, timeout=30, resident=False)  # a one-shot: git answers, no GitPython
    if git.git_dir() is None:
        raise RootError(f"root {name}: {path} is not the top level of a Git work tree", hint=fix)
    document = path / ROOT_DOCUMENT
    if not stat.S_ISREG(_lstat_mode(document)):
        raise RootError(f"root {name}: {path} has no {ROOT_DOCUMENT}: not a memory root", hint=fix)
    refused = refusing_problems(git)
    if refused:
        raise RootError(
            f"root {name}: memsync refuses {path}: {refused[0].message}",
            hint=f"see `memsync validate {path}`; remove the setting it names",
        )
    branch = git.current_branch()
    if branch is None:
        raise RootError(
            f"root {name}: {path} has a detached HEAD", hint="check out the root's branch"
        )
    remotes = _remotes(git)
    remote = _chosen_remote(git.config_get(f"branch.{branch}.remote"), remotes)
    note = None
    if remote is None:
        named = ", ".join(shown(r) for r in remotes)
        note = (
            "it has no remote"
            if not remotes
            else f"none of its remotes ({named}) is origin or tracked by its branch"
        )
    return StarterRoot(name, path, branch, remote, note)


def _remotes(git: Git) -> list[str]:
    return git.remotes()


def _chosen_remote(tracked: str | None, remotes: list[str]) -> str | None:
    """The branch's tracking remote, else `origin`, else the only one; None otherwise."""
    if tracked in remotes:
        return tracked
    if "origin" in remotes:
        return "origin"
    return remotes[0] if len(remotes) == 1 else None


def shown(text: str, *, quoted: bool = False) -> str:
    """`text` for a comment line or a terminal: as it is (shell-quoted with `quoted`) when
    every character prints, else JSON-escaped, so no newline, control or line-separator
    character in a path or remote name can end the comment and write configuration."""
    if not text.isprintable():
        return json.dumps(text)
    return shlex.quote(text) if quoted else text


def _lstat_mode(path: Path) -> int:
    try:
        return path.lstat().st_mode
    except OSError:
        return 0


def runtime_socket(environ: Mapping[str, str], state_dir: Path) -> Path:
    """The control socket: in `$XDG_RUNTIME_DIR` when set and absolute, else the state dir."""
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if runtime and Path(runtime).is_absolute():
        return Path(runtime) / SOCKET_NAME
    return state_dir / SOCKET_NAME


def render(state_dir: Path, socket: Path, roots: list[StarterRoot]) -> str:
    """The configuration text (checked against the schema before it is returned)."""
    names = [r.name for r in roots]
    if len(set(names)) != len(names):
        raise UsageError("two --root options give the same name", hint="name each root once")
    body: dict[str, object] = {
        "version": 1,
        "state_dir": str(state_dir),
        "control": {"socket": str(socket)},
        "roots": {},
    }
    notes = []
    for root in roots:
        sync: dict[str, object] = (
            {"enabled": True, "remote": root.remote} if root.remote else {"enabled": False}
        )
        body["roots"][root.name] = {"path": str(root.path), "sync": sync}  # type: ignore[index]
        if root.note:
            notes.append(
                f"# roots.{root.name}: sync is off ({root.note}). Add the upstream with\n"
                f"#   git -C {shown(str(root.path), quoted=True)} remote add origin URL\n"
                f"# and set sync.enabled: true and sync.remote: origin.\n"
            )
    header = (
        "# memsync configuration written by `memsync config init`; check it with\n"
        "# `memsync doctor`. Every key, with its default: `memsync config sample`.\n"
    )
    # Non-ASCII is escaped: PyYAML writes a raw NEL (U+0085) that reads back as a space.
    text = header + "".join(notes) + yaml.safe_dump(body, sort_keys=False)
    load_config_text(text, state_dir, "<config init>")  # a bug here is not a file on disk
    return text


def write_config(path: Path, text: str, *, force: bool, own_dir: bool) -> bool:
    """Write `text` to `path` (0600); True when a file was replaced. Refuses an existing
    path unless `force`, and always one that is not a regular file (a symbolic link is
    neither followed nor replaced). `own_dir`: the directory is memsync's own (tightened
    to 0700); another existing directory is left as it is, but refused when others may
    write to it."""
    parent = path.parent
    _make_parent(parent, own_dir)
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise ConfigError(
            f"{path} is {kind_of(mode)}; memsync config init writes only a regular file",
            hint="pass --out with the real path of the file",
        )
    if mode is not None and not force:
        raise ConfigError(
            f"{path} already exists; memsync config init does not replace it",
            hint="check it with `memsync doctor`, or pass --force to replace it",
        )
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), FILE_MODE)
            handle.write(text.encode("utf-8"))
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:
            _link_new(Path(tmp), path, force=force)
        else:
            Path(tmp).replace(path)  # the name is replaced: a link put there is not followed
    finally:
        with contextlib.suppress(FileNotFoundError):
            Path(tmp).unlink()
    fsync_dir(parent)
    return mode is not None


def _link_new(tmp: Path, path: Path, *, force: bool) -> None:
    """Give `tmp` the name `path` only if nothing has it (a file or link made meanwhile
    stays untouched)."""
    try:
        os.link(tmp, path, follow_symlinks=False)
    except FileExistsError as exc:
        if force:
            raise ConfigError(
                f"{path} appeared while memsync config init wrote it", hint="run it again"
            ) from exc
        raise ConfigError(
            f"{path} already exists; memsync config init does not replace it",
            hint="check it with `memsync doctor`, or pass --force to replace it",
        ) from exc


def _make_parent(parent: Path, own_dir: bool) -> None:
    if not parent.exists():
        parent.parent.mkdir(parents=True, exist_ok=True)
        parent.mkdir(mode=DIR_MODE, exist_ok=True)
    info = parent.stat()
    if not stat.S_ISDIR(info.st_mode):
        raise ConfigError(f"{parent} is {kind_of(info.st_mode)}, not a directory")
    if own_dir and info.st_uid == os.geteuid() and info.st_mode & 0o077:
        parent.chmod(DIR_MODE)
    elif info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
        raise ConfigError(
            f"{parent} is writable by other users; a config there could be replaced",
            hint=f"pass --out in a directory only you can write (chmod go-w {parent})",
        )


@value
class Started:
    """What `start_config` wrote: where, whether it replaced a file, and the roots."""

    path: Path
    replaced: bool
    roots: list[StarterRoot]


def start_config(
    root_options: Sequence[str],
    *,
    out: Path | None,
    config_path: str | None,
    force: bool,
    environ: Mapping[str, str],
) -> Started:
    """`memsync config init`: the roots given (`NAME=PATH`) or found, described, rendered
    and written to `out`, else `config_path` (`--config`), else `$MEMSYNC_CONFIG`, else
    `$XDG_CONFIG_HOME/memsync/config.yaml` (default `~/.config/...`)."""
    from memsync.config.paths import CONFIG_ENV, default_state_dir  # noqa: PLC0415

    given = [parse_root_option(text) for text in root_options]
    home = Path.home()
    chosen = given or found_roots(home)
    if not chosen:
        raise UsageError(
            "no memory root given, and none found at ~/.rightmemory",
            hint="pass --root NAME=PATH, or create one with `memsync init ~/.rightmemory`",
        )
    roots = [describe_root(name, path) for name, path in chosen]
    state_dir = default_state_dir()
    text = render(state_dir, runtime_socket(environ, state_dir), roots)
    explicit = out or config_path or environ.get(CONFIG_ENV) or None
    xdg = environ.get("XDG_CONFIG_HOME", "")
    config_home = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
    target = Path(explicit).expanduser() if explicit else config_home / "memsync" / "config.yaml"
    target = target.absolute()
    replaced = write_config(
        target, text, force=force, own_dir=target.parent == config_home / "memsync"
    )
    return Started(target, replaced, roots)
