"""Where the configuration file is (CONTRACT §1), reading it, and a memo of where a file that
loaded cleanly puts the state dir and the control socket.

Standard library only: `memsync status` uses the memo to find the running daemon without
loading the config schema (pydantic, YAML), which costs more than the rest of the command.

The memo (`$XDG_CACHE_HOME/memsync/config-memo.json`, default `~/.cache/...`; JSON, 0600
in a 0700 directory) maps a config file's absolute path to a key over everything that
decides whether it loads and where its paths point: the SHA-256 of its bytes, the memsync
version, the home directory, `$XDG_STATE_HOME` and `$XDG_RUNTIME_DIR`. It is written after
a full load succeeded and is only ever a shortcut: an entry whose key does not match the
bytes read now, or a memo that does not parse, is ignored and the full load runs, with its
errors. Safe to delete at any time; holds no secret (only two paths).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from memsync import __version__
from memsync.errors import ConfigError
from memsync.memodigest import memo_digest
from memsync.regularfile import NotRegularFile, read_regular
from memsync.values import value

CONFIG_ENV = "MEMSYNC_CONFIG"
MAX_CONFIG_BYTES = 1024 * 1024  # a real config is a few KiB; parsing 1 MiB takes seconds
SYSTEM_CONFIG = Path("/etc/memsync/config.yaml")
MEMO_NAME = "config-memo.json"
MEMO_ENTRIES = 16  # config files remembered; the oldest is dropped first
_MEMO_BYTES = 64 * 1024


def default_state_dir() -> Path:
    """`$XDG_STATE_HOME/memsync` (when set and absolute), else `~/.local/state/memsync`:
    the default state dir (CONTRACT §4), here so `validate PATH` needs no schema."""
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "memsync"
    return Path.home() / ".local" / "state" / "memsync"


@value
class StatePaths:
    """Where a configuration that loaded cleanly puts the state dir and the control socket."""

    state_dir: Path
    control_socket: Path


def find_config_path(explicit: str | None, *, system_path: Path = SYSTEM_CONFIG) -> Path | None:
    """`--config`, then `$MEMSYNC_CONFIG` (both used even when missing, so the error names
    them), then the first existing of `$XDG_CONFIG_HOME/memsync/config.yaml` (default
    `~/.config`) and `/etc/memsync/config.yaml`; None when there is none."""
    if explicit:
        return Path(explicit).expanduser()
    from_env = os.environ.get(CONFIG_ENV, "")
    if from_env:
        return Path(from_env).expanduser()
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    config_home = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".config"
    for candidate in (config_home / "memsync" / "config.yaml", system_path):
        if candidate.exists():
            return candidate
    return None


def read_config(path: Path) -> bytes:
    """The bytes of a config file (ConfigError when missing, not a regular file,
    unreadable or too large); a FIFO or a device at `path` never blocks the read."""
    try:
        raw = read_regular(path, MAX_CONFIG_BYTES)
    except NotRegularFile as exc:
        raise ConfigError(
            f"config file {path} is {exc.kind}, not a regular file",
            source=str(path),
            hint="point --config (or $MEMSYNC_CONFIG) at the YAML file itself",
        ) from exc
    except FileNotFoundError as exc:
        import shlex  # noqa: PLC0415 - a missing file's hint only

        raise ConfigError(
            f"config file {path} does not exist",
            source=str(path),
            hint=f"write it with `memsync config init --out {shlex.quote(str(path))}`, "
            "or pass --config PATH",
        ) from exc
    except OSError as exc:
        raise ConfigError(
            f"cannot read config file {path}: {exc.strerror}", source=str(path)
        ) from exc
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file {path} is larger than {MAX_CONFIG_BYTES // 1024} KiB",
            source=str(path),
            hint="a memsync config is a few KiB; check that --config names the right file",
        )
    return raw


def remember(path: Path, raw: bytes, located: StatePaths) -> None:
    """Note that these bytes of `path` loaded cleanly and where they put things
    (best effort: a memo that cannot be written only costs the next command time)."""
    memo = memo_path()
    if memo is None:
        return
    entries = _entries(memo)
    name = str(path.absolute())
    entry = {
        "key": memo_key(name, raw),
        "state_dir": str(located.state_dir),
        "control_socket": str(located.control_socket),
    }
    if entries.get(name) == entry and list(entries)[-1] == name:
        return
    entries.pop(name, None)
    entries[name] = entry
    kept = dict(list(entries.items())[-MEMO_ENTRIES:])
    text = json.dumps({"version": 1, "entries": kept}, indent=1) + "\n"
    tmp = memo.with_name(f".{MEMO_NAME}.{os.getpid()}")
    try:
        memo.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        tmp.replace(memo)
    except OSError:
        tmp.unlink(missing_ok=True)


def recall(path: Path) -> StatePaths | None:
    """Where `path`'s current bytes put the state dir and the socket, when those exact
    bytes loaded cleanly before under the same conditions; None otherwise."""
    memo = memo_path()
    if memo is None:
        return None
    try:
        raw = read_config(path)
    except ConfigError:
        return None
    name = str(path.absolute())
    entry = _entries(memo).get(name)
    if entry is None or entry.get("key") != memo_key(name, raw):
        return None
    return StatePaths(Path(entry["state_dir"]), Path(entry["control_socket"]))


def memo_path() -> Path | None:
    """Where the memo is (None: no cache directory can be named)."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "memsync" / MEMO_NAME
    home = _home()
    return Path(home) / ".cache" / "memsync" / MEMO_NAME if home else None


def _home() -> str | None:
    try:
        return str(Path.home())
    except RuntimeError:  # no $HOME and no password entry
        return None


def memo_key(name: str, raw: bytes) -> str:
    """What an entry for config file `name` with bytes `raw` must match to be used."""
    parts = [
        __version__,
        name,
        memo_digest(raw),
        _home(),
        os.environ.get("XDG_STATE_HOME"),
        os.environ.get("XDG_RUNTIME_DIR"),
    ]
    return memo_digest(json.dumps(parts).encode())


def _entries(memo: Path) -> dict[str, dict[str, str]]:
    """The memo's well-formed entries ({} for a missing, foreign or corrupt memo)."""
    try:
        data = json.loads(read_regular(memo, _MEMO_BYTES))
    except (OSError, ValueError):
        return {}
    entries = data.get("entries") if isinstance(data, dict) and data.get("version") == 1 else None
    if not isinstance(entries, dict):
        return {}
    fields = ("key", "state_dir", "control_socket")
    return {
        name: {f: entry[f] for f in fields}
        for name, entry in entries.items()
        if isinstance(entry, dict)
        and all(isinstance(entry.get(f), str) and entry[f] for f in fields)
        and Path(entry["state_dir"]).is_absolute()
        and Path(entry["control_socket"]).is_absolute()
    }
