"""A memo of the settings a configuration file's bytes loaded into, so that a fresh process
(`memsync sync-now` from a timer, a hook, a person) does not build the config schema.

Standard library only. One file per configuration under `$XDG_CACHE_HOME/memsync/settings/`
(0600 in a 0700 directory), named by the SHA-256 of the config file's absolute path, holds
the key of `config.paths` (the file's bytes, the memsync version, the home directory,
`$XDG_STATE_HOME`, `$XDG_RUNTIME_DIR`) plus the identity of the schema's own source files,
and the `Settings` as tagged JSON. It is written only after a full load succeeded, and only
when reading it back gives settings equal to the ones loaded: the memo never decides
differently from the schema. An entry whose key does not match, a file that does not parse,
or a value of a type outside the allowlist below is ignored and the full load runs, with
its errors. A configuration holding a secret inline (`{value: ...}`) is never memoized: the
memo holds references to secrets, never a secret. Safe to delete at any time.
"""

from __future__ import annotations

import importlib
import json
import os
from datetime import timedelta
from pathlib import Path

from memsync.config import paths
from memsync.config.model import AdmissionSettings, RootSettings, Settings
from memsync.memodigest import memo_digest
from memsync.regularfile import read_regular
from memsync.values import replace

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any

DIR_NAME = "settings"
MAX_BYTES = 4 * 1024 * 1024  # 1,000 roots of settings fit many times over
VERSION = 1

# The only classes a memo can make (an allowlist: anything else fails the read): these, and
# those of the configuration's optional parts (`config.sections`), a root's credentials and
# signing key (`transports.rootkeys`) and secret references, loaded when an entry holds one
# (a configuration of plain roots never creates them).
CLASSES: dict[str, type] = {c.__name__: c for c in (Settings, RootSettings, AdmissionSettings)}
LOADED_CLASSES: dict[str, str] = {
    **dict.fromkeys(
        (
            "PublishSettings",
            "ViewSettings",
            "HttpSourceSettings",
            "GitSourceSettings",
            "CommandRoleSettings",
            "OpenAIRoleSettings",
            "HubSettings",
            "HookSettings",
            "WebhookSettings",
        ),
        "memsync.config.sections",
    ),
    **dict.fromkeys(("GitCredentials", "CommitKey"), "memsync.transports.rootkeys"),
    "SecretRef": "memsync.secrets",
}
# Secret references the memo may hold: where a secret is, never the secret.
STORED_SECRETS = ("env", "file", "credential")
# The code that decides what a file loads into: an edit to it retires every entry.
_SOURCES = (
    "schema.py",
    "model.py",
    "sections.py",
    "load.py",
    "secrets.py",
    "units.py",
    "paths.py",
)


def allowed(name: str) -> type:
    """The allowlisted class called `name` (KeyError for any other name)."""
    found = CLASSES.get(name)
    if found is not None:
        return found
    cls: type = getattr(importlib.import_module(LOADED_CLASSES[name]), name)
    return cls


class Unmemoable(ValueError):
    """A value the memo does not hold (an inline secret, a type outside the allowlist)."""


def encode(value: object) -> object:
    """`value` as tagged JSON data (Unmemoable for anything outside the allowlist)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    from dataclasses import fields, is_dataclass  # noqa: PLC0415 - after a full load only

    from memsync.secrets import SecretRef  # noqa: PLC0415 - loaded by the full load before

    if isinstance(value, SecretRef) and value.kind not in STORED_SECRETS:
        raise Unmemoable("an inline secret")
    if is_dataclass(value) and not isinstance(value, type):
        name = type(value).__name__
        try:
            known: type | None = allowed(name)
        except KeyError:
            known = None
        if known is not type(value):
            raise Unmemoable(f"a {name}")
        return {"@": name, **{f.name: encode(getattr(value, f.name)) for f in fields(value)}}
    if isinstance(value, Path):
        return {"@path": str(value)}
    if isinstance(value, timedelta):
        return {"@td": [value.days, value.seconds, value.microseconds]}
    if isinstance(value, tuple):
        return {"@tuple": [encode(v) for v in value]}
    if isinstance(value, frozenset):
        return {"@frozenset": sorted(encode(v) for v in value)}  # type: ignore[type-var]
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise Unmemoable("a mapping with non-string keys")
        return {"@dict": {k: encode(v) for k, v in value.items()}}
    raise Unmemoable(f"a {type(value).__name__}")


def decode(data: object) -> Any:
    """What `encode` made (ValueError, TypeError or KeyError for anything else)."""
    if data is None or isinstance(data, bool | int | float | str):
        return data
    if not isinstance(data, dict):
        raise ValueError("not tagged data")
    if "@" in data:
        cls = allowed(data["@"])
        return cls(**{k: decode(v) for k, v in data.items() if k != "@"})
    if len(data) != 1:
        raise ValueError("not tagged data")
    ((tag, inner),) = data.items()
    if tag == "@path" and isinstance(inner, str):
        return Path(inner)
    if tag == "@td" and isinstance(inner, list) and all(type(i) is int for i in inner):
        return timedelta(*inner)
    if tag in ("@tuple", "@frozenset") and isinstance(inner, list):
        items = [decode(v) for v in inner]
        return tuple(items) if tag == "@tuple" else frozenset(items)
    if tag == "@dict" and isinstance(inner, dict):
        return {k: decode(v) for k, v in inner.items()}
    raise ValueError(f"unknown tag {tag!r}")


def _memo_file(path: Path) -> Path | None:
    memo = paths.memo_path()
    if memo is None:
        return None
    name = memo_digest(str(path.absolute()).encode())
    return memo.parent / DIR_NAME / f"{name}.json"


def _key(path: Path, raw: bytes) -> str:
    here = Path(__file__).parent
    code: list[list[int] | None] = []
    for source in _SOURCES:
        try:
            st = (here / source).stat()
            code.append([st.st_mtime_ns, st.st_size])
        except OSError:
            code.append(None)
    return memo_digest(json.dumps([paths.memo_key(str(path.absolute()), raw), code]).encode())


def recall(path: Path, raw: bytes) -> Settings | None:
    """The settings these bytes of `path` loaded into before, under the same conditions;
    None when that is not known (the caller loads the file in full)."""
    memo = _memo_file(path)
    if memo is None:
        return None
    try:
        data = json.loads(read_regular(memo, MAX_BYTES))
        if not isinstance(data, dict) or data.get("version") != VERSION:
            return None
        if data.get("key") != _key(path, raw):
            return None
        settings = decode(data.get("settings"))
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return None
    if not isinstance(settings, Settings):
        return None
    # The file named by a relative path here and an absolute one before (the same absolute
    # path: another spelling is a miss) loads the same settings but for the name given.
    return replace(settings, config_path=path)


def remember(path: Path, raw: bytes, settings: Settings) -> None:
    """Keep `settings` for these bytes of `path`, when reading them back gives the same
    settings (best effort: a memo that cannot be written only costs the next process)."""
    memo = _memo_file(path)
    if memo is None:
        return
    try:
        encoded = encode(settings)
    except Unmemoable:
        return
    text = json.dumps({"version": VERSION, "key": _key(path, raw), "settings": encoded})
    try:
        same = decode(json.loads(text)["settings"]) == settings
    except (ValueError, TypeError, KeyError, RecursionError):
        same = False
    if len(text) > MAX_BYTES or not same:
        return
    tmp = memo.with_name(f".{memo.name}.{os.getpid()}")
    try:
        memo.parent.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        memo.parent.mkdir(exist_ok=True, mode=0o700)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        tmp.replace(memo)
    except OSError:
        tmp.unlink(missing_ok=True)
