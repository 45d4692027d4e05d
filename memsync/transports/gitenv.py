"""The git box's environment: the config every call is forced to, the clean environment,
what a call returns, and the credential pieces a network call is given (see `gitcore.py`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from pathlib import Path

from memsync.errors import GitError, SecretError
from memsync.lazypattern import lazy
from memsync.transports.gitconfig import split_key
from memsync.transports.gitfailure import FINGERPRINT_INTRO, is_important
from memsync.transports.process import search_path
from memsync.values import value

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from memsync.transports.rootkeys import GitCredentials

DEFAULT_TIMEOUT = 120.0

# Daemon-owned configuration, applied to every call after the repository's own config so
# that nothing a root or an upstream carries can run code or change what we parse.
FORCED_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.hooksPath", os.devnull),
    ("core.fsmonitor", "false"),
    ("core.quotePath", "false"),
    ("core.attributesFile", os.devnull),
    ("core.sshCommand", "ssh -o BatchMode=yes"),
    ("core.pager", "cat"),
    ("core.editor", "true"),
    ("core.askPass", ""),
    ("log.showSignature", "false"),  # never run gpg on signatures an upstream supplies
    ("log.showRoot", "true"),  # root commits' paths are checked like any other
    # A gitlink is a change like any other: a root's config must not hide it from `log`,
    # and `log -m` lists a merge against each parent, whatever `log.diffMerges` says.
    ("diff.ignoreSubmodules", "none"),
    ("log.diffMerges", "separate"),
    ("credential.helper", ""),
    ("protocol.ext.allow", "never"),
    ("protocol.file.allow", "always"),
    ("fetch.fsckObjects", "true"),
    ("transfer.fsckObjects", "true"),
    ("fetch.recurseSubmodules", "false"),
    ("submodule.recurse", "false"),
    ("commit.gpgSign", "false"),
    ("tag.gpgSign", "false"),
    ("push.gpgSign", "false"),
    # Signing and verification are off above; should anything still ask, it gets `false`.
    ("gpg.program", "false"),
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("gpg.ssh.defaultKeyCommand", "false"),
    ("sequence.editor", "true"),
    ("merge.verifySignatures", "false"),
    ("merge.ff", "true"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("advice.detachedHead", "false"),
    ("init.defaultBranch", "main"),
    # Cherry-picks and merges never replay a recorded resolution memsync did not make.
    ("rerere.enabled", "false"),
    ("rerere.autoUpdate", "false"),
    # Paths git itself would refuse on other systems stay refused here too.
    ("core.protectHFS", "true"),
    ("core.protectNTFS", "true"),
    # The upstream is reached directly and its certificate checked: a root's config may not
    # say otherwise (the URL-specific forms of these keys refuse the root: see gitkeys.py).
    ("http.sslVerify", "true"),
    ("http.proxy", ""),
)
FORCED_ARGS: tuple[str, ...] = tuple(
    arg for key, value in FORCED_CONFIG for arg in ("-c", f"{key}={value}")
)
FORCED_VALUES = {split_key(key): value for key, value in FORCED_CONFIG}
FORCED_KEYS = frozenset(FORCED_VALUES)

ALLOWED_PROTOCOLS = "file:git:ssh:http:https"

KEEP_ENV = ("PATH", "HOME", "TMPDIR", "SSH_AUTH_SOCK", "SYSTEMROOT", "LD_LIBRARY_PATH")

OID = lazy(r"[0-9a-f]{40}|[0-9a-f]{64}")

# The commands that may talk to an upstream: only these get a root's credentials.
NETWORK = frozenset({"fetch", "push", "ls-remote"})
SCRUBBED = "********"


# Lines git adds to every failed connection whatever the cause: they bury the cause.
_BOILERPLATE = (
    "could not read from remote repository",
    "please make sure you have the correct access rights",
    "and the repository exists",
    # OpenSSH's changed-host-key banner around the lines that matter (the offered key, the
    # offending known_hosts line, "Host key verification failed").
    "it is possible that someone is doing something nasty",
    "someone could be eavesdropping on you right now",
    "it is also possible that a host key has just been changed",
    "please contact your system administrator",
    "add correct host key in",
    "remove with:",
    'ssh-keygen -f "',
)


def _lines(text: str) -> list[str]:
    """`text`'s lines, stripped, with ssh's `@` frames removed and the offered key's
    two-line sentence joined into one."""
    out: list[str] = []
    for line in text.splitlines():
        stripped = line.strip().strip("@").strip()
        if out and out[-1].endswith(FINGERPRINT_INTRO):
            out[-1] = f"{out[-1]} {stripped}"
        else:
            out.append(stripped)
    return out


def cause(text: str, limit: int = 400) -> str:
    """What went wrong, in git's and ssh's own words: every meaningful line, joined.

    Drops blank lines, hints, git's generic access-rights advice and the frame and advice
    of ssh's host key banner, keeps the lines that name the cause (connection refused, host
    unknown, permission denied, the key the remote offered, ...). When the lines are longer
    than `limit` the offered key's line comes first, so that it is never cut. `text` is
    already redacted.
    """
    kept: list[str] = []
    for stripped in _lines(text):
        lowered = stripped.lower().removeprefix("fatal:").strip()
        if not stripped or stripped.startswith("hint:") or lowered.startswith(_BOILERPLATE):
            continue
        if stripped not in kept:
            kept.append(stripped)
    from memsync.transports import gitparse  # noqa: PLC0415 - a failed call's words only

    joined = "; ".join(kept) if kept else gitparse.last_line(text)
    if len(joined) > limit:
        first = [line for line in kept if is_important(line)]
        joined = "; ".join(first + [line for line in kept if line not in first])
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


def find_git(path: str) -> str | None:
    """The git a box with this (already cleaned) PATH runs: the first executable regular
    file named `git` in it, as the kernel's path search finds it; None when there is none.
    (`shutil.which` answers the same, but shutil's import costs a cold process more than
    this loop.)"""
    for entry in path.split(os.pathsep):
        candidate = Path(entry, "git")
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git process gets: only what git needs, nothing it may obey;
    PATH holds absolute directories only (`search_path`)."""
    env = {key: os.environ[key] for key in KEEP_ENV if key in os.environ}
    env["PATH"] = search_path(env.get("PATH"))
    env.update(
        {
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_TERMINAL_PROMPT": "0",
            "GIT_ATTR_NOSYSTEM": "1",
            "GIT_NO_REPLACE_OBJECTS": "1",
            "GIT_OPTIONAL_LOCKS": "0",
            "GIT_EDITOR": "true",
            "GIT_SEQUENCE_EDITOR": "true",
            "GIT_PAGER": "cat",
            # Only these transports: no remote helpers (`foo::url`, `remote.*.vcs`), no
            # `ext::`, whatever the repository's protocol.* or url.*.insteadOf config says.
            "GIT_ALLOW_PROTOCOL": ALLOWED_PROTOCOLS,
            # Set but empty: git then skips core.gitProxy (first value wins) and uses none.
            "GIT_PROXY_COMMAND": "",
            "LC_ALL": "C",
            "LANGUAGE": "C",
        }
    )
    if extra:
        env.update(extra)
    return env


@value
class GitResult:
    """A finished git call: its exit code, stdout and (decoded) stderr."""

    returncode: int
    stdout: bytes
    stderr: str


class FetchOutcome(Enum):
    OK = "ok"
    MISSING_BRANCH = "missing-branch"
    UNREACHABLE = "unreachable"
    BAD_OBJECTS = "bad-objects"  # object checking refused what the upstream sent


class PushOutcome(Enum):
    OK = "ok"
    REJECTED = "rejected"
    UNREACHABLE = "unreachable"


@value(repr=False)
class Auth:
    """Config for one authenticated call, and the secret to scrub from what git prints."""

    config: tuple[tuple[str, str], ...] = ()
    secret: str | None = None
    started: Callable[[int], None] | None = None  # told git's pid as soon as it runs

    def scrub(self, text: str) -> str:
        return text.replace(self.secret, SCRUBBED) if self.secret else text

    def scrub_bytes(self, data: bytes) -> bytes:
        return data.replace(self.secret.encode(), SCRUBBED.encode()) if self.secret else data


def remote_argument(args: Sequence[str]) -> str | None:
    """The remote (name or URL) a fetch, push or ls-remote command line names."""
    if "--end-of-options" in args:
        at = list(args).index("--end-of-options") + 1
        return args[at] if at < len(args) else None
    return next((arg for arg in args[1:] if not arg.startswith("-")), None)


def token_of(creds: GitCredentials) -> str:
    """The HTTPS token, read now; GitError naming the reference (never the secret)."""
    from memsync.secrets import resolve  # noqa: PLC0415 - a root with a token only

    where = f"{creds.where}.https"
    if creds.token is None:
        raise GitError(f"{where}: no token is configured")
    try:
        token = resolve(creds.token)
    except SecretError as exc:
        raise GitError(f"{where}.token: {exc.message}", hint=exc.hint) from exc
    if any(ch in token for ch in "\r\n\x00"):
        raise GitError(f"{where}.token: {creds.token.describe()} holds a line break or NUL")
    return token


def strict_ssh_command(creds: GitCredentials) -> str:
    """The strict `core.sshCommand` for a root's SSH settings; GitError when a file is
    missing (a clear message instead of ssh's own after a connection attempt)."""
    # the key and hosts file rules: only a root with SSH settings loads them
    from memsync.transports.credentials import key_path, ssh_command  # noqa: PLC0415

    where = f"{creds.where}.ssh"
    key = None
    if creds.ssh_key is not None:
        try:
            key = key_path(creds.ssh_key, os.environ)
        except ValueError as exc:
            raise GitError(f"{where}.key: {exc}") from exc
        if not os.access(key, os.R_OK):
            raise GitError(
                f"{where}.key: {key} does not exist or cannot be read",
                hint="create the key file (ssh-keygen -t ed25519 -f FILE) or fix the reference",
            )
    known = creds.known_hosts
    if known is not None and not known.is_file():
        raise GitError(
            f"{where}.known_hosts: {known} does not exist",
            hint="add the upstream's host key to it (ssh-keyscan HOST, checked against the "
            "fingerprint the host's owner publishes)",
        )
    try:
        return ssh_command(key, known)
    except ValueError as exc:
        raise GitError(f"{where}: {exc}") from exc
