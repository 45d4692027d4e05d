"""A repository's own Git config, read as data: which entries name programs, and how to
neutralize them (pure; `git.py` feeds it `git config --list -z --show-scope --show-origin`).

memsync never runs a program that a root's config or attributes name. Keys that git reads
"last value wins" are neutralized by daemon-owned values passed after the repository's
config (`GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n`, which carry any byte
of a driver name unambiguously). Keys that cannot be neutralized that way are closed by
the environment instead (see `git.clean_env`: `GIT_ALLOW_PROTOCOL` for remote helpers and
`remote.*.vcs`, `GIT_PROXY_COMMAND=` for `core.gitProxy`). Attributes only name drivers; a
driver with no program behind it does nothing, so neutralizing the config is enough.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from memsync.lazypattern import lazy
from memsync.values import value

# What a neutralized driver becomes. A merge driver cannot be unset, only replaced: git's
# own three-way file merge is the built-in text merge (a conflict stays a conflict).
MERGE_FILE = "git merge-file --marker-size=%L %A %O %B"

BUILTIN_MERGE_DRIVERS = frozenset({"text", "binary", "union"})


@value
class ConfigEntry:
    """One entry of `git config --list`: its scope, origin, key and value."""

    scope: str  # local, worktree, command, ...
    origin: str  # "file:<path>" (relative to the repository's cwd), "command line:" ...
    key: str  # section[.subsection].name; section and name lower-cased by git
    value: str | None  # None for a key given without "=" (boolean true)


def parse_config_list(raw: bytes) -> list[ConfigEntry]:
    """`git config --list -z --show-scope --show-origin`: scope NUL origin NUL key LF value NUL."""
    fields = raw.split(b"\0")
    entries: list[ConfigEntry] = []
    for i in range(0, len(fields) - 2, 3):
        scope, origin, item = (f.decode("utf-8", "surrogateescape") for f in fields[i : i + 3])
        key, newline, value = item.partition("\n")
        entries.append(ConfigEntry(scope, origin, key, value if newline else None))
    return entries


def split_key(key: str) -> tuple[str, str | None, str]:
    """(section, subsection or None, name): the subsection may itself contain dots."""
    section, _, rest = key.partition(".")
    if "." not in rest:
        return section.lower(), None, rest.lower()
    subsection, _, name = rest.rpartition(".")
    return section.lower(), subsection, name.lower()


_FALSE_WORDS = frozenset({"", "false", "no", "off", "0"})
_BOOL_WORDS = _FALSE_WORDS | {"true", "yes", "on", "1"}


def program_reason(entry: ConfigEntry) -> str | None:
    """Why this entry names a program git could run, or None when it does not."""
    section, sub, name = split_key(entry.key)
    value = (entry.value or "").strip()
    if section == "filter" and sub is not None and name in ("clean", "smudge", "process"):
        return f"filter driver '{sub}' runs a program ({name})"
    if section == "merge" and sub is not None and name == "driver":
        return f"merge driver '{sub}' runs a program"
    if section == "diff" and sub is not None and name in ("command", "textconv"):
        return f"diff driver '{sub}' runs a program ({name})"
    if section == "diff" and sub is None and name == "external":
        return "diff.external runs an external diff program"
    if section == "core" and name in (
        "gitproxy",
        "sshcommand",
        "askpass",
        "editor",
        "pager",
        "hookspath",
    ):
        return f"core.{name} names a program"
    if section == "core" and name == "fsmonitor" and value.lower() not in _BOOL_WORDS:
        return "core.fsmonitor names a hook program"
    if section == "core" and name == "worktree":
        return "core.worktree moves the work tree out of the root"
    if section == "remote" and sub is not None and name in ("vcs", "uploadpack", "receivepack"):
        return f"remote '{sub}' names a transport program ({name})"
    if section == "credential" and name == "helper" and value:
        return "a credential helper program is configured"
    if section == "gpg" and name in ("program", "defaultkeycommand"):
        return "a signing program is configured"
    if section == "sequence" and name == "editor":
        return "sequence.editor names a program"
    if section == "pager" or (section in ("mergetool", "difftool") and name == "cmd"):
        return f"{section} names a program"
    if section == "submodule" and name == "update" and value.startswith("!"):
        return "a submodule update command is configured"
    if section == "uploadpack" and name == "packobjectshook":
        return "uploadpack.packObjectsHook names a program"
    if section == "protocol" and name == "allow" and value.lower() == "always":
        return f"{entry.key} allows every transport, remote helpers included"
    return None


def program_entries(entries: Iterable[ConfigEntry]) -> list[tuple[ConfigEntry, str]]:
    """The repository's own entries (not memsync's command-line ones) that name programs."""
    found: list[tuple[ConfigEntry, str]] = []
    for entry in entries:
        if entry.scope == "command":
            continue
        reason = program_reason(entry)
        if reason is not None:
            found.append((entry, reason))
    return found


def neutralizing_config(entries: Iterable[ConfigEntry]) -> list[tuple[str, str]]:
    """Daemon-owned values that defuse every driver the repository's config defines.

    Filters become no-ops (and never `required`), merge drivers git's own file merge,
    diff drivers harmless commands; everything else that names a program is pinned by
    the box's forced config or environment.
    """
    filters: dict[str, None] = {}
    merges: dict[str, None] = {}
    diffs: dict[str, None] = {}
    external_diff = False
    for entry in entries:
        if entry.scope == "command":
            continue
        section, sub, name = split_key(entry.key)
        if sub is None:
            external_diff |= section == "diff" and name == "external"
            continue
        if section == "filter":
            filters.setdefault(sub)
        elif section == "merge":
            merges.setdefault(sub)
        elif section == "diff":
            diffs.setdefault(sub)
    pairs: list[tuple[str, str]] = []
    for sub in filters:
        pairs += [(f"filter.{sub}.{n}", "") for n in ("clean", "smudge", "process")]
        pairs.append((f"filter.{sub}.required", "false"))
    pairs += [(f"merge.{sub}.driver", MERGE_FILE) for sub in merges]
    for sub in diffs:
        pairs += [(f"diff.{sub}.command", "true"), (f"diff.{sub}.textconv", "cat")]
    if external_diff:
        pairs.append(("diff.external", "true"))
    return pairs


def config_env(pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """`pairs` as git's GIT_CONFIG_COUNT environment (read after every config file)."""
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, setting) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = setting
    return env


# -- attributes -----------------------------------------------------------------------------

_DRIVER_ATTR = lazy(r"^(filter|merge|diff)=(\S+)$")


def attribute_drivers(text: str) -> list[tuple[int, str, str]]:
    """(line, attribute, driver) for each line of an attributes file that names a driver.

    Built-in merge drivers (`text`, `binary`, `union`) run no program and are skipped.
    """
    found: list[tuple[int, str, str]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        for word in stripped.split()[1:]:
            match = _DRIVER_ATTR.match(word)
            if match is None:
                continue
            attribute, driver = match.groups()
            if attribute == "merge" and driver in BUILTIN_MERGE_DRIVERS:
                continue
            found.append((number, attribute, driver))
    return found
