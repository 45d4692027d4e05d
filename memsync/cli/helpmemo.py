"""A memo of `--help` as click printed it, so that `memsync --help` (and `memsync CMD --help`)
is answered without importing click and the commands.

Standard library only, and only its cheapest modules (`os`, `sys`, `zlib`): the whole point
is what a process that prints help does not load. One file per key under
`$XDG_CACHE_HOME/memsync/help/` (default `~/.cache/...`; 0600 in a 0700 directory). Its
first line is the key itself, written out in full (no digest: an entry is used only when
every part is equal), its second the length of the output, then the output's bytes.

The key is everything that decides what click prints for these arguments: the exact
arguments, the memsync version, the interpreter, the identity (path, mtime, size) of every
source file of the memsync package and of click, the environment variables that change
click's rendering or the output's encoding (`COLUMNS`, the locale's), the terminal width of
standard output, and standard output's encoding, error handler and whether it is a
terminal. An entry is written only after click printed that help itself and exited 0 with
nothing on stderr (`cli.main` renders it a second time to record it); it never holds a
secret (help text only). A missing, damaged, truncated or foreign entry is a miss: click
runs, as always. Safe to delete at any time.
"""

# os.path, not pathlib: importing pathlib (and the `re` and `urllib` it pulls in) would cost
# this path more than the rest of it.
# ruff: noqa: PTH100, PTH103, PTH105, PTH108, PTH109, PTH111, PTH113, PTH117, PTH118, PTH119, PTH120

from __future__ import annotations

import os
import sys
import zlib

DIR_NAME = "help"
VERSION = 1
MAX_BYTES = 256 * 1024  # the longest help is a few KiB; the key about 20 KiB
MAX_ENTRIES = 64  # terminal widths, subcommands; the oldest are dropped first
MAX_ARGS = 4
HELP_FLAGS = ("--help", "-h")
# What changes click's rendering of help or the bytes it writes, besides the terminal width.
ENV = (
    "COLUMNS",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LC_MESSAGES",
    "NO_COLOR",
    "PYTHONIOENCODING",
    "PYTHONLEGACYWINDOWSSTDIO",
    "PYTHONUTF8",
    "TERM",
)
_SUFFIX = ".help"


def wanted(args: list[str]) -> bool:
    """Whether `args` ask for help only: command names, then `--help` or `-h`."""
    if not 1 <= len(args) <= MAX_ARGS or args[-1] not in HELP_FLAGS:
        return False
    return all(_is_name(a) for a in args[:-1])


def _is_name(arg: str) -> bool:
    return (
        0 < len(arg) <= 32
        and arg[0].isascii()
        and arg[0].islower()
        and all(c.isascii() and (c.islower() or c.isdigit() or c == "-") for c in arg)
    )


def recall(args: list[str]) -> bytes | None:
    """What click printed for `args` under the same key; None when that is not known."""
    path = _entry_file(args)
    key = key_text(args)
    if path is None or key is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        if not _regular(fd):
            return None
        data = os.read(fd, MAX_BYTES + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    head, sep, rest = data.partition(b"\n")
    size, sep2, out = rest.partition(b"\n")
    if not (sep and sep2) or head != key.encode() or not size.isdigit():
        return None
    return out if len(out) == int(size) else None


def write(out: bytes) -> int:
    """Print `out` on stdout; the exit code click's main gives help (0, or 1 quietly when
    the reader has gone: a closed pipe)."""
    try:
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
    except BrokenPipeError:
        # What click does: nothing more reaches stdout, and no error at exit either.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
        return 1
    return 0


def remember(args: list[str], out: bytes) -> None:
    """Keep what click printed for `args` (best effort: a memo that cannot be written only
    costs the next process click's import)."""
    path = _entry_file(args)
    key = key_text(args)
    if path is None or key is None:
        return
    data = b"%s\n%d\n%s" % (key.encode(), len(out), out)
    if len(data) > MAX_BYTES:
        return
    folder = os.path.dirname(path)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}")
    try:
        os.makedirs(os.path.dirname(folder), mode=0o700, exist_ok=True)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(tmp, path)
    except OSError:
        _discard(tmp)
        return
    _prune(folder)


def _discard(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        return


def _prune(folder: str) -> None:
    """Drop the oldest entries past `MAX_ENTRIES` (only this memo's own files)."""
    try:
        entries = [e for e in os.scandir(folder) if _is_entry_name(e.name) and e.is_file()]
        entries.sort(key=lambda e: e.stat().st_mtime_ns)
        for old in entries[: max(0, len(entries) - MAX_ENTRIES)]:
            os.unlink(old.path)
    except OSError:
        pass


def _is_entry_name(name: str) -> bool:
    stem = name.removesuffix(_SUFFIX)
    return name.endswith(_SUFFIX) and len(stem) == 8 and all(c in "0123456789abcdef" for c in stem)


def _regular(fd: int) -> bool:
    import stat  # noqa: PLC0415 - already loaded by the interpreter's start-up

    return stat.S_ISREG(os.fstat(fd).st_mode)


def _entry_file(args: list[str]) -> str | None:
    folder = cache_dir()
    if folder is None:
        return None
    name = f"{zlib.crc32(chr(0).join(args).encode('utf-8', 'surrogateescape')):08x}{_SUFFIX}"
    return os.path.join(folder, DIR_NAME, name)


def cache_dir() -> str | None:
    """memsync's cache directory (as `config.paths` names it), None when none can be named."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return os.path.join(xdg, "memsync")
    home = os.path.expanduser("~")
    return os.path.join(home, ".cache", "memsync") if os.path.isabs(home) else None


def key_text(args: list[str]) -> str | None:
    """The key of `args`' entry as one line of text; None when it cannot be known (then
    nothing is memoized or used)."""
    from memsync import __version__  # noqa: PLC0415 - the package, already loaded

    stdout = sys.stdout
    if stdout is None or getattr(stdout, "buffer", None) is None:
        return None
    click_dir = _package_dir("click")
    if click_dir is None:
        return None
    try:
        isatty = stdout.isatty()
        columns: int | None = os.get_terminal_size(sys.__stdout__.fileno()).columns  # type: ignore[union-attr]
    except (AttributeError, ValueError, OSError):
        columns = None
        isatty = False
    try:
        sources = (_sources(_memsync_dir()), _sources(click_dir))
    except OSError:
        return None
    parts = (
        VERSION,
        __version__,
        sys.version,
        tuple(args),
        tuple(os.environ.get(name) for name in ENV),
        (stdout.encoding, stdout.errors, isatty, columns),
        sources,
    )
    text = repr(parts)
    return text if "\n" not in text else None


def _memsync_dir() -> str:
    """The whole memsync package (this module is in `memsync/cli/`): every command, and
    everything a command's help is built from, is below it."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _package_dir(name: str) -> str | None:
    """Where `import name` finds that package: the first `sys.path` entry holding it."""
    for entry in sys.path:
        folder = os.path.join(entry or os.getcwd(), name)
        if os.path.isfile(os.path.join(folder, "__init__.py")):
            return folder
    return None


def _sources(top: str) -> tuple[tuple[str, int, int], ...]:
    """Every source file under `top`, by path, mtime and size (an edit retires the memo)."""
    found: list[tuple[str, int, int]] = []
    stack = [top]
    while stack:
        folder = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name != "__pycache__":
                        stack.append(entry.path)
                elif entry.name.endswith((".py", ".pth", ".so")):
                    st = entry.stat()
                    found.append((entry.path, st.st_mtime_ns, st.st_size))
    return tuple(sorted(found))
