"""Which keys of a root's own Git config memsync lets git run with (pure; the allowlist).

Every entry of a repository's config (its own files, `config.worktree`, anything included)
is one of three kinds:

- **inert**: memsync knows it changes nothing about what its git calls run, reach, trust
  or print for memsync to parse (identity, remotes' URL and refspecs, tracking, index and
  pack tuning, hints, colours that are not `always`);
- **forced**: memsync overrides it on every call, after the repository's config (the box's
  forced config, the defused filter, merge and diff drivers, the emptied credential helper
  list, `core.gitProxy` through the environment);
- **refused**: anything else. A key that is not known to be inert may run a program, send
  traffic elsewhere, weaken TLS or bring in objects memsync did not check, and a list of
  such keys can never be complete. git does not run on a root that has one
  (`unsafe-repo-config`, naming the key, never its value) until the person removes it.

Section and key names are case-insensitive (git lower-cases them); a subsection is
case-sensitive and is matched as written: `gpg.SSH.program` is not `gpg.ssh.program`, so it
is not forced, so it is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

from memsync.transports.gitconfig import ConfigEntry, split_key
from memsync.values import value

Key = tuple[str, str | None, str]  # (section, subsection or None, name)


class Kind(Enum):
    INERT = "inert"
    FORCED = "forced"
    REFUSED = "refused"


@value
class Verdict:
    """The judgement of one config key: its kind and why."""

    kind: Kind
    reason: str  # why (for a refusal: what the key can do), never the value


# Keys without a subsection that change nothing memsync's git calls do: section -> names.
_INERT: dict[str, frozenset[str]] = {
    "core": frozenset(
        {
            "repositoryformatversion",
            "filemode",
            "bare",
            "logallrefupdates",
            "ignorecase",
            "precomposeunicode",
            "symlinks",
            "autocrlf",
            "eol",
            "safecrlf",
            "checkstat",
            "trustctime",
            "untrackedcache",
            "splitindex",
            "preloadindex",
            "commitgraph",
            "multipackindex",
            "abbrev",
            "whitespace",
            "compression",
            "loosecompression",
            "bigfilethreshold",
            "deltabasecachelimit",
            "packedgitlimit",
            "packedgitwindowsize",
            "fsync",
            "fsyncmethod",
            "fsyncobjectfiles",
            "fsmonitorhookversion",  # only read with a hook, and core.fsmonitor is forced off
        }
    ),
    # The repository's own format: git refuses an extension it does not know. Not
    # `partialclone` (a promisor remote fetches missing objects from another place).
    "extensions": frozenset({"objectformat", "worktreeconfig", "refstorage"}),
    "user": frozenset({"name", "email", "signingkey", "useconfigonly"}),
    "author": frozenset({"name", "email"}),
    "committer": frozenset({"name", "email"}),
    "branch": frozenset({"autosetupmerge", "autosetuprebase", "sort"}),
    "pull": frozenset({"rebase", "ff"}),  # memsync never pulls
    # memsync always names the remote and the refspec it pushes.
    "push": frozenset({"default", "autosetupremote"}),
    # `merge.default` names a driver: a defined one is defused, else git's own text merge.
    "merge": frozenset({"conflictstyle", "log", "verbosity", "default"}),
    "fetch": frozenset({"prune"}),  # memsync's fetch names one refspec; prune stays inside it
    "gpg": frozenset({"format"}),  # signing is forced off, every signing program is forced
    "http": frozenset({"postbuffer", "lowspeedlimit", "lowspeedtime", "version"}),
    "feature": frozenset({"manyfiles"}),  # index version 4 and the untracked cache
    "index": frozenset({"version", "threads"}),
    "lfs": frozenset({"repositoryformatversion"}),  # read by git-lfs only, which never runs
}

# Keys with a subsection (any subsection): section -> names.
_INERT_SUB: dict[str, frozenset[str]] = {
    # Not `pushurl` (pushes go elsewhere), `proxy`, `uploadpack`, `receivepack`, `vcs`,
    # `promisor`, `partialclonefilter`, `mirror`: see `_refusal`. The URL is the upstream by
    # definition (and set once: see `unsafe_entries`).
    "remote": frozenset({"url", "fetch", "push", "tagopt", "prune", "skipdefaultupdate"}),
    "branch": frozenset({"remote", "merge", "rebase", "description", "pushremote"}),
    "merge": frozenset({"name", "recursive"}),  # a driver's label; `recursive` names a driver
    "diff": frozenset({"binary", "cachetextconv", "wordregex", "xfuncname", "funcname"}),
    "http": _INERT["http"],  # the same tuning for one URL
}

# Whole sections whose every key is inert: hints on stderr (memsync drops hint lines), and
# garbage collection and maintenance, which memsync never runs (gc.auto and
# maintenance.auto are forced off).
_INERT_SECTIONS = frozenset({"advice", "gc", "maintenance"})


def classify(entry: ConfigEntry, forced: frozenset[Key]) -> Verdict:
    """What memsync does about one entry of a repository's own config.

    `forced` holds the (section, subsection, name) keys the box sets on every call.
    """
    key = split_key(entry.key)
    section, sub, name = key
    if key in forced:
        return Verdict(Kind.FORCED, "memsync sets it on every call")
    driver = _driver(section, sub, name)
    if driver is not None:
        return Verdict(Kind.FORCED, driver)
    if section == "credential" and name == "helper":
        return Verdict(Kind.FORCED, "memsync empties git's list of credential helpers")
    if section == "core" and sub is None and name == "gitproxy":
        return Verdict(Kind.FORCED, "memsync's environment turns core.gitProxy off")
    if section == "color":
        if (entry.value or "").strip().lower() == "always":
            return Verdict(Kind.REFUSED, "puts colour codes into the output memsync reads")
        return Verdict(Kind.INERT, "colours only a terminal's output")
    table = _INERT if sub is None else _INERT_SUB
    if section in _INERT_SECTIONS or name in table.get(section, ()):
        return Verdict(Kind.INERT, "changes nothing memsync's git calls do")
    return Verdict(Kind.REFUSED, _refusal(section, sub, name))


def _driver(section: str, sub: str | None, name: str) -> str | None:
    """Why a driver key is defused on every call (see `gitconfig.neutralizing_config`)."""
    if sub is not None and section == "filter" and name in ("clean", "smudge", "process"):
        return f"memsync empties filter '{sub}' on every call"
    if sub is not None and section == "filter" and name == "required":
        return f"memsync makes filter '{sub}' optional on every call"
    if sub is not None and section == "merge" and name == "driver":
        return f"memsync replaces merge driver '{sub}' by git's own merge on every call"
    if sub is not None and section == "diff" and name in ("command", "textconv"):
        return f"memsync replaces diff driver '{sub}' on every call"
    if sub is None and section == "diff" and name == "external":
        return "memsync replaces diff.external on every call"
    return None


_PROGRAM_SECTIONS = frozenset(
    {"alias", "pager", "mergetool", "difftool", "guitool", "submodule", "uploadpack"}
)
_TLS = frozenset({"pinnedpubkey", "schannelcheckrevoke", "schannelusesslcainfo"})


def _refusal(section: str, sub: str | None, name: str) -> str:
    """What a refused key can do, in a few words (for the message that names it)."""
    if section in ("include", "includeif"):
        return "reads another config file, which memsync cannot hold to this allowlist"
    if section == "core" and name == "worktree":
        return "moves the work tree out of the root"
    if section == "core" and name.startswith("alternaterefs"):
        return "runs a program (or reads refs) from an alternate object store"
    if "proxy" in name:
        return "sends the upstream's traffic, and the token, through a proxy"
    if section == "http" and name == "curloptresolve":
        return "sends the upstream's traffic, and the token, to another address"
    if section == "http" and (name.startswith("ssl") or name in _TLS):
        return "weakens or replaces the TLS checks of the upstream"
    if section == "http":
        return "changes what is sent to the upstream (headers, cookies, redirects, auth)"
    if section == "url":
        return "rewrites the upstream's URL to another one"
    if section == "remote" and name == "pushurl":
        return "sends pushes, and the token, to another URL"
    if section == "remote" and name in ("uploadpack", "receivepack", "vcs"):
        return "names a program git runs to talk to the upstream"
    if section == "remote" and name in ("promisor", "partialclonefilter", "mirror"):
        return "changes which objects and refs are fetched or pushed"
    if section == "extensions" and name == "partialclone":
        return "fetches missing objects from another remote"
    if section in ("fsck", "transfer", "fetch", "receive"):
        return "changes how objects from the upstream are fetched or checked"
    if section == "credential":
        return "changes which credentials git asks for and where it sends them"
    if section == "protocol":
        return "changes which transports and protocols git may use"
    if section in _PROGRAM_SECTIONS or name in ("cmd", "command", "program", "hook"):
        return "can name a program for git to run"
    return "is not a setting memsync knows to be harmless"


def unsafe_entries(
    entries: Iterable[ConfigEntry], forced: frozenset[Key]
) -> list[tuple[ConfigEntry, str]]:
    """The repository's own entries (not the command line's) that refuse the root, with why.

    Also a remote URL given more than once: git pushes to every URL a remote has.
    """
    found: list[tuple[ConfigEntry, str]] = []
    urls: set[tuple[str | None, str]] = set()
    for entry in entries:
        if entry.scope == "command":
            continue
        verdict = classify(entry, forced)
        if verdict.kind is Kind.REFUSED:
            found.append((entry, verdict.reason))
            continue
        section, sub, name = split_key(entry.key)
        if section == "remote" and name == "url":
            if (sub, name) in urls:
                found.append((entry, "is set more than once: git pushes to every URL"))
            urls.add((sub, name))
    return found


def shown_key(key: str) -> str:
    """`key` as a message may print it: a subsection's control characters escaped."""
    return "".join(ch if ch.isprintable() else f"\\x{ord(ch):02x}" for ch in key)


@value
class Unsafe:
    """One thing that refuses a root: a config key (in the file git read it from) or a file
    of the repository, what it can do, and the command that removes it."""

    what: str
    where: str | None
    reason: str
    fix: str
    until: str = "removed"  # what the person does about it

    @property
    def message(self) -> str:
        return (
            f"{self.what}: {self.reason}; memsync runs no git on this root until it is "
            f"{self.until} (`{self.fix}`)"
        )


def unsafe_config(
    entries: Iterable[ConfigEntry], forced: frozenset[Key], root: str
) -> list[Unsafe]:
    """`unsafe_entries` as findings, each with the `git config` command that removes it."""
    found: list[Unsafe] = []
    for entry, reason in unsafe_entries(entries, forced):
        import shlex  # noqa: PLC0415 - a refusal's fix only

        key = shown_key(entry.key)
        where = entry.origin.removeprefix("file:") if entry.origin.startswith("file:") else None
        if entry.scope == "worktree":
            target = ["--worktree"]
        else:
            target = [] if where in (None, ".git/config") else ["--file", str(where)]
        fix = shlex.join(["git", "-C", root, "config", *target, "--unset-all", key])
        found.append(Unsafe(key, where, reason, fix))
    return found
