"""`memsync doctor`: preflight checks of everything a daemon needs, each a plain result.

Every check returns a `Check` (name, `ok`/`warn`/`fail`, message, hint); `diagnose` runs
them in a fixed order and the CLI renders the list. Checks only look: the state dir is not
created (doctor may run as another user than the daemon), secrets are resolved but never
shown, the roots' own Git config is reported, never run. Git runs only through the git box.

Check names are stable for scripts: `git`, `config`, `state-dir`, `roots.<name>`,
`roots.<name>.repo-config`, `roots.<name>.hidden-text`, the dotted config location of each
secret and key (`roots.<name>.publish[0].key`, `views.<name>.source.token`),
`views.<name>.trust`, `inotify`, `clock`, `disk`, `socket`, `systemd`.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Literal

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from pydantic import BaseModel

from memsync import timefmt
from memsync.config import find_config_path, format_problem, load_config, settings_from
from memsync.config.model import RootSettings, Settings
from memsync.config.schema import Config, signing_problem
from memsync.config.statedir import check_state_dir
from memsync.daemon.client import SAFE_SOCKET_HINT
from memsync.daemon.peer import (
    DirFacts,
    directory_chain,
    directory_refusal,
    socket_directory_refusal,
)
from memsync.errors import ConfigError, GitError, MemsyncError
from memsync.regularfile import kind_of
from memsync.roots.reach import unreachable
from memsync.roots.result import SyncStatus
from memsync.secrets import SecretRef, resolve, resolve_header
from memsync.transports.commitsign import signer as commit_signer
from memsync.transports.git import Git, RemoteBranch
from memsync.transports.gitparse import parse_version
from memsync.transports.gitversion import MIN_GIT, MIN_GIT_TEXT
from memsync.transports.repoconfig import refusing_problems, repo_config_problems
from memsync.transports.rootkeys import CommitKey
from memsync.validators.paths import check_name, check_text, within_cap
from memsync.validators.policy import SyncPolicy, gitignore_text
from memsync.views.keys import load_private_key, parse_public_key, public_key_text

Status = Literal["ok", "warn", "fail"]
OK: Status = "ok"
WARN: Status = "warn"
FAIL: Status = "fail"

MIN_YEAR = 2024  # before this, every signature and expiry check is wrong
DISK_FAIL = 64 * 1024**2
DISK_WARN = 512 * 1024**2
SOCKET_PATH_MAX = 107  # sun_path is 108 bytes with the terminating NUL
HEADER_SECRETS = (".token", ".events_token", ".api_key")  # config keys of header-bound secrets
# config keys of SSH private keys (ssh's own mode rule; memsync's commit key follows it)
SSH_KEY_SECRETS = (".ssh.key", ".signing.key")
WATCHES_FILE = Path("/proc/sys/fs/inotify/max_user_watches")
HIDDEN_SHOWN = 20  # files with hidden text listed by doctor (validate lists every one)
_COUNT_LIMIT = 1_000_000  # stop counting directories here: the answer is already "too many"


@dataclass(frozen=True)
class Check:
    name: str
    status: Status
    message: str
    hint: str | None = None
    details: tuple[str, ...] = ()


@dataclass(frozen=True)
class Diagnosis:
    checks: tuple[Check, ...]
    config_error: bool  # the configuration could not be loaded (exit 2)

    @property
    def ok(self) -> bool:
        return not self.config_error and all(c.status != FAIL for c in self.checks)


def diagnose(config_path: str | None, *, now: datetime | None = None) -> Diagnosis:
    """Run every check. `config_path` is `--config` (None: the usual lookup)."""
    checks = [check_git()]
    config_check, config, settings = load(config_path)
    checks.append(config_check)
    if config is not None and settings is not None:
        checks.append(check_state(settings.state_dir))
        for root in settings.roots:
            checks += check_root(root)
        checks += check_secrets(config)
        checks += [c for n, r in config.roots.items() if (c := check_admission(n, r.model_dump()))]
        checks += [c for r in settings.roots if (c := check_own_key_pinned(r))]
        checks += check_trust(config)
        checks.append(check_inotify(settings, WATCHES_FILE))
    checks.append(check_clock(now or timefmt.now()))
    if settings is not None:
        checks.append(check_disk(settings.state_dir))
        checks.append(check_socket(settings.control_socket))
    checks.append(check_systemd(os.environ))
    return Diagnosis(tuple(checks), config_error=config is None)


# -- git and config ------------------------------------------------------------------------


def check_git() -> Check:
    try:
        done = Git(Path("/"), timeout=30).version()
    except MemsyncError as exc:
        return Check("git", FAIL, exc.message, exc.hint)
    text = done.text
    version = parse_version(text)
    if not done.ok or version is None:
        return Check("git", FAIL, f"`git --version` answered {text or done.detail!r}")
    if version < MIN_GIT:
        return Check("git", FAIL, f"{text} is too old", f"install git {MIN_GIT_TEXT} or newer")
    return Check("git", OK, text)


def load(config_path: str | None) -> tuple[Check, Config | None, Settings | None]:
    """The config check, and the config when it loads."""
    path = find_config_path(config_path)
    if path is None:
        hint = "write one with `memsync config init`, or pass --config PATH"
        return Check("config", FAIL, "no configuration file found", hint), None, None
    try:
        config = load_config(path)
    except ConfigError as exc:
        details = tuple(format_problem(p, exc.source) for p in exc.problems)
        return Check("config", FAIL, exc.message, exc.hint, details), None, None
    settings = settings_from(config, path)
    message = f"{path}: {len(settings.roots)} root(s), {len(settings.views)} view(s)"
    return Check("config", OK, message), config, settings


def check_state(state_dir: Path) -> Check:
    try:
        check_state_dir(state_dir)
    except ConfigError as exc:
        return Check("state-dir", FAIL, exc.message, exc.hint)
    made = "" if state_dir.is_dir() else " (created on first use)"
    return Check("state-dir", OK, f"{state_dir} is writable{made}")


# -- roots ------------------------------------------------------------------------------------


def check_root(root: RootSettings) -> list[Check]:
    """The root's work tree, branch and remote; then its repository config."""
    name, path = f"roots.{root.name}", root.path
    fix_path = f"fix {name}.path, or create the root with `memsync init {path}`"
    if not path.is_dir():
        return [Check(name, FAIL, f"{path} does not exist or is not a directory", fix_path)]
    git = Git(  # a one-shot: git answers, no GitPython
        path,
        timeout=root.timeout.total_seconds(),
        credentials=root.git_credentials,
        resident=False,
    )
    if git.git_dir() is None:
        return [Check(name, FAIL, f"{path} is not the top level of a Git work tree", fix_path)]
    try:
        refused = refusing_problems(git)
        if refused:  # git does not run on this root: say why, run nothing
            message = f"{path}: memsync refuses this root ({len(refused)} setting(s) below)"
            state = Check(name, FAIL, message, "remove what the repo-config check names")
        else:
            state = _root_state(root, git)
        checks = [state, _allowlist(root), *_repo_config(root)]
        if not refused:
            checks.append(_hidden_text(root, git))
        if state.status == OK and root.sync_enabled:
            checks.append(_upstream(root, git))
        return checks
    except MemsyncError as exc:
        return [Check(name, FAIL, exc.message, exc.hint)]
    except OSError as exc:
        return [Check(name, FAIL, f"cannot read {path}: {exc.strerror or exc}")]


def _root_state(root: RootSettings, git: Git) -> Check:
    name, path = f"roots.{root.name}", root.path
    branch = git.current_branch()
    if branch is None:
        return Check(name, FAIL, f"{path}: HEAD is detached", "check out the root's branch")
    if root.branch is not None and branch != root.branch:
        return Check(
            name,
            FAIL,
            f"{path}: branch {root.branch} is configured but {branch} is checked out",
            f"run `git -C {path} switch {root.branch}`, or fix {name}.branch",
        )
    if not root.sync_enabled:
        return Check(name, OK, f"{path}: on branch {branch} (sync is off)")
    if git.remote_url(root.remote) is None:
        return Check(
            name,
            FAIL,
            f"{path}: has no remote {root.remote}",
            f"run `git -C {path} remote add {root.remote} URL`, or fix {name}.sync.remote",
        )
    return Check(name, OK, f"{path}: on branch {branch}, remote {root.remote}")


def _allowlist(root: RootSettings) -> Check:
    """The root's `.gitignore` is memsync's allowlist (else memory files may go untracked)."""
    name = f"roots.{root.name}.gitignore"
    wanted = gitignore_text(SyncPolicy(max_file_size=root.max_file_size))
    try:
        text = (root.path / ".gitignore").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        text = None
    if text == wanted:
        return Check(name, OK, "the allowlist .gitignore is in place")
    hint = "restore it from a root made by `memsync init` (the gate enforces the allowlist anyway)"
    if text is None:
        return Check(name, WARN, "the root has no readable .gitignore", hint)
    return Check(name, WARN, ".gitignore differs from memsync's allowlist", hint)


def _hidden_text(root: RootSettings, git: Git) -> Check:
    """The committed memory files hold no text a reader cannot see (`hidden-text`).

    The gate refuses it in every file a commit changes; a file that held it before the rule
    (or before this root was memsync's) is found here and by `memsync validate`.
    """
    name = f"roots.{root.name}.hidden-text"
    head = git.rev_parse("HEAD")
    if head is None:
        return Check(name, OK, "no commit yet")
    policy = SyncPolicy(max_file_size=root.max_file_size)
    tree = git.tree_view(head)
    readable = sorted(
        path
        for path, entry in tree.entries.items()
        if check_name(path, policy) is None and within_cap(entry, policy)
    )
    tree.preload(readable)
    found = [
        problem
        for path in readable
        if (problem := check_text(path, tree.content(path))) is not None
        and problem.code == "hidden-text"
    ]
    if not found:
        return Check(name, OK, f"no hidden text in the {len(readable)} committed memory files")
    return Check(
        name,
        FAIL,
        f"{len(found)} committed memory file(s) hold hidden text (hidden-text)",
        f"remove the code points named (run `memsync validate {root.path}`); until then a "
        "commit changing one of these files is refused",
        details=tuple(p.message for p in found[:HIDDEN_SHOWN])
        + (
            (f"... and {len(found) - HIDDEN_SHOWN} more file(s)",)
            if len(found) > HIDDEN_SHOWN
            else ()
        ),
    )


def _upstream(root: RootSettings, git: Git) -> Check:
    """The upstream answers and lets this root in (credentials never shown)."""
    name = f"roots.{root.name}.upstream"
    branch = root.branch or git.current_branch() or "main"
    seconds = min(15.0, root.timeout.total_seconds())
    try:
        found, detail = git.remote_branch(root.remote, branch, seconds)
    except GitError as exc:  # a timeout
        return Check(name, FAIL, exc.message, "check the network, or raise sync.timeout")
    if found is RemoteBranch.PRESENT:
        return Check(name, OK, f"{root.remote} answers and has branch {branch}")
    if found is RemoteBranch.ABSENT:
        return Check(
            name,
            WARN,
            f"{root.remote} answers but has no branch {branch} yet",
            "the first sync pushes it",
        )
    status, message = unreachable(detail, f"{root.remote} cannot be reached")
    return Check(name, FAIL, message, _UPSTREAM_HINTS[status])


_UPSTREAM_HINTS = {
    SyncStatus.OFFLINE: "check the URL, the network and the credentials",
    SyncStatus.AUTH_FAILED: "check the token or key, and that the upstream grants it access",
    SyncStatus.HOST_KEY_CHANGED: "check the offered key with the host's owner, then update "
    "known_hosts (never accept it unchecked)",
}


def _repo_config(root: RootSettings) -> list[Check]:
    name = f"roots.{root.name}.repo-config"
    found = repo_config_problems(root.path)
    if not found:
        return [Check(name, OK, "holds only settings memsync allows, and names no programs")]
    refusing = {p.message for p in refusing_problems(Git(root.path, resident=False))}
    return [
        Check(
            name,
            FAIL,
            f"{p.path or root.path}{f':{p.line}' if p.line else ''}: {p.message}",
            "memsync refuses the root until it is removed (run the command shown)"
            if p.message in refusing
            else "memsync never runs it; remove the setting from the root's Git config",
        )
        for p in found
    ]


# -- secrets and keys -------------------------------------------------------------------------


def secret_refs(model: BaseModel, prefix: str = "") -> Iterator[tuple[str, SecretRef]]:
    """Every secret reference in a validated config, with its dotted location."""
    for field in type(model).model_fields:
        yield from _refs(getattr(model, field), f"{prefix}.{field}" if prefix else field)


def _refs(value: object, where: str) -> Iterator[tuple[str, SecretRef]]:
    if isinstance(value, SecretRef):
        yield where, value
    elif isinstance(value, BaseModel):
        yield from secret_refs(value, where)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _refs(item, f"{where}.{key}")
    elif isinstance(value, tuple | list):
        for index, item in enumerate(value):
            yield from _refs(item, f"{where}[{index}]")


def check_secrets(config: Config) -> list[Check]:
    """Each secret resolves (its value is read, never shown); signing keys also parse."""
    checks = []
    for where, ref in secret_refs(config):
        if where.startswith("roots.") and ".publish[" in where and where.endswith(".key"):
            checks.append(check_signing_key(where, ref))
            continue
        if where.startswith("roots.") and where.endswith(".signing.key"):
            checks.append(check_commit_key(where, ref))
            continue
        if where.startswith("roots.") and ".admission.signers[" in where:
            checks.append(check_signers(where, ref))
            continue
        try:
            if where.endswith(HEADER_SECRETS):  # sent in an HTTP header: one line of ASCII
                resolve_header(ref)
            else:
                resolve(ref)
        except ConfigError as exc:
            checks.append(Check(where, FAIL, exc.message, exc.hint))
            continue
        if ref.kind == "value":
            hint = "use {env: NAME}, {file: PATH} or {credential: NAME} outside tests"
            checks.append(Check(where, WARN, "inline secret value in the config", hint))
        elif ref.kind == "file":
            checks.append(check_secret_file(where, ref))
        else:
            checks.append(Check(where, OK, f"{ref.describe()} is readable"))
    return checks


def check_secret_file(where: str, ref: SecretRef, *, uid: int | None = None) -> Check:
    """A readable secret file must be ours and private: an SSH key no one else may read,
    write or run (ssh itself refuses such a key), a token no one else may read or write."""
    path = Path(ref.ref)
    try:
        info = path.stat()
    except OSError as exc:  # it was just read: gone since
        return Check(where, FAIL, f"{ref.describe()}: cannot stat {path}: {exc.strerror}")
    ours = os.geteuid() if uid is None else uid
    mode = stat.S_IMODE(info.st_mode)
    quoted = shlex.quote(str(path))
    if info.st_uid != ours:
        return Check(
            where,
            FAIL,
            f"{ref.describe()} belongs to uid {info.st_uid}, not to the user memsync runs as "
            f"(uid {ours}): its owner can read or replace the secret",
            f"chown {ours} {quoted} && chmod 600 {quoted}",
        )
    ssh_key = where.endswith(SSH_KEY_SECRETS)
    loose = mode & (0o077 if ssh_key else 0o066)
    if loose:
        who = " and ".join(
            name for name, bits in (("its group", 0o070), ("others", 0o007)) if loose & bits
        )
        refused = "; ssh refuses a key others can read" if ssh_key else ""
        return Check(
            where,
            FAIL,
            f"{ref.describe()} has mode {mode:04o}: {who} can "
            f"{'use' if ssh_key else 'read or write'} it{refused}",
            f"chmod 600 {quoted}",
        )
    return Check(where, OK, f"{ref.describe()} is readable, ours and private (mode {mode:04o})")


def check_signers(where: str, ref: SecretRef, *, uid: int | None = None) -> Check:
    """A file of pinned commit signers (`admission.signers`): every line a public key or
    a comment, owned by us and writable by no one else (whoever can write it can add a
    signer; reading it is harmless: public keys)."""
    from memsync.validators.commitsig import parse_signer  # noqa: PLC0415 - cryptography

    try:
        text = resolve(ref)
    except ConfigError as exc:
        return Check(where, FAIL, exc.message, exc.hint)
    count = 0
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip() and not line.strip().startswith("#"):
            try:
                parse_signer(line)
            except ValueError as exc:
                hint = "list OpenSSH public keys (a .pub file's line), one a line"
                return Check(where, FAIL, f"{ref.describe()} line {number}: {exc}", hint)
            count += 1
    if ref.kind == "file":
        path = Path(ref.ref)
        try:
            info = path.stat()
        except OSError as exc:
            return Check(where, FAIL, f"{ref.describe()}: cannot stat {path}: {exc.strerror}")
        ours = os.geteuid() if uid is None else uid
        quoted = shlex.quote(str(path))
        if info.st_uid not in (ours, 0) or stat.S_IMODE(info.st_mode) & 0o022:
            return Check(
                where,
                FAIL,
                f"{ref.describe()} can be changed by another user (owner uid {info.st_uid}, "
                f"mode {stat.S_IMODE(info.st_mode):04o}): whoever can write it can add a signer",
                f"chown {ours} {quoted} && chmod go-w {quoted}",
            )
    return Check(where, OK, f"{ref.describe()} holds {count} signer key(s)")


def check_signing_key(where: str, ref: SecretRef) -> Check:
    """A publish key: a file only its owner can read, holding an Ed25519 private key."""
    try:
        data = resolve(ref).encode("utf-8")  # names a missing file or variable properly
        if ref.kind in ("file", "credential"):  # also: only its owner may read it
            path = Path(ref.ref)
            if ref.kind == "credential":  # resolve() checked $CREDENTIALS_DIRECTORY is set
                path = Path(os.environ.get("CREDENTIALS_DIRECTORY", "")) / ref.ref
            key = load_private_key(path)
        else:
            try:
                parsed = serialization.load_pem_private_key(data, password=None)
            except (ValueError, TypeError):
                message = f"{ref.describe()} is not an unencrypted PEM private key"
                return Check(where, FAIL, message, "create one with `memsync keys generate`")
            if not isinstance(parsed, Ed25519PrivateKey):
                return Check(where, FAIL, f"{ref.describe()} is not an Ed25519 key")
            key = parsed
    except MemsyncError as exc:
        return Check(where, FAIL, exc.message, exc.hint)
    return Check(where, OK, f"{ref.describe()}: signs as {public_key_text(key)}")


def check_commit_key(where: str, ref: SecretRef) -> Check:
    """A root's commit-signing key: an unencrypted OpenSSH key memsync can sign with, in a
    file only its owner can read."""
    try:
        signer = commit_signer(CommitKey(where, ref))
    except MemsyncError as exc:
        return Check(where, FAIL, exc.message, exc.hint)
    if ref.kind == "file":
        private = check_secret_file(where, ref)
        if private.status != OK:
            return private
    if ref.kind == "value":
        hint = "use {file: PATH} or {credential: NAME} outside tests"
        return Check(where, WARN, "inline private key in the config", hint)
    line = signer.public_key.split(" ")
    public = " ".join(line[:2])
    return Check(
        where,
        OK,
        f"{ref.describe()}: signs commits as {signer.fingerprint}",
        details=(f"allowed signers line: memsync {public}",),
    )


def check_admission(name: str, root: Mapping[str, object]) -> Check | None:
    """`roots.<name>.signing`: a root that admits only signed commits and has no
    `signing.key` cannot autocommit or run cycles (config validation refuses that); its
    merges would be unsigned and refused before push, which doctor warns about."""
    where = f"roots.{name}.signing"
    refused = signing_problem(root)
    if refused is not None:
        return Check(where, FAIL, refused)
    admission = root.get("admission")
    signed = isinstance(admission, Mapping) and admission.get("require") == "signed"
    if not signed or root.get("signing") is not None:
        return None
    return Check(
        where,
        WARN,
        "admission.require: signed without signing.key: a merge memsync makes here would "
        "be unsigned and refused before push",
        "add signing: {key: {file: PATH}} with a key listed in admission.signers",
    )


def check_own_key_pinned(root: RootSettings) -> Check | None:
    """`roots.<name>.admission.own-key`: with `require: signed` and a `signing.key`, the
    commits memsync makes here (merges, autocommits, cycle landings, reverts) pass the
    outgoing check only when that key is one of `admission.signers`. Nothing to say when
    either is unusable: their own checks say why."""
    if root.admission.require != "signed" or root.signing is None:
        return None
    from memsync.roots.admission import SignedAdmission  # noqa: PLC0415 - cryptography

    try:
        pinned = SignedAdmission.of(root.name, root.admission)
        own = commit_signer(root.signing)
    except MemsyncError:
        return None
    if pinned is None:
        return None
    where = f"roots.{root.name}.admission.own-key"
    if own.fingerprint in pinned.signers.fingerprints():
        return Check(where, OK, f"memsync's signing key {own.fingerprint} is a pinned signer")
    public = " ".join(own.public_key.split(" ")[:2])
    return Check(
        where,
        FAIL,
        f"memsync's signing key {own.fingerprint} is not in admission.signers: every commit "
        "memsync makes here (merges, autocommits, cycle landings) would be refused before "
        "push",
        "add its public key line to admission.signers",
        details=(f"public key line: {public} memsync",),
    )


def check_trust(config: Config) -> list[Check]:
    """Pinned view keys parse as Ed25519 public keys; unsigned imports are flagged."""
    checks = []
    for name, view in config.views.items():
        where, trust = f"views.{name}.trust", view.trust
        try:
            for key in trust.keys:
                parse_public_key(key)
        except MemsyncError as exc:
            checks.append(Check(where, FAIL, exc.message, exc.hint))
            continue
        if trust.allow_unsigned:
            hint = f"pin the publisher's keys in {where}.keys and drop allow_unsigned"
            checks.append(Check(where, WARN, "accepts unsigned manifests (tests only)", hint))
        else:
            message = f"{len(trust.keys)} pinned key(s), threshold {trust.threshold}"
            checks.append(Check(where, OK, message))
    return checks


# -- the host ---------------------------------------------------------------------------------


def check_inotify(settings: Settings, watches_file: Path) -> Check:
    """Watched roots need about one inotify watch per directory; the budget is per user."""
    watched = [r for r in settings.roots if r.watch and r.path.is_dir()]
    if not watched:
        return Check("inotify", OK, "no root is watched")
    try:
        limit = int(watches_file.read_text().strip())
    except (OSError, ValueError):
        hint = "local edits are then noticed at the next sync interval only"
        return Check("inotify", WARN, f"cannot read {watches_file}", hint)
    needed = sum(count_directories(r.path) for r in watched)
    message = f"{needed} directories to watch in {len(watched)} root(s); the limit is {limit}"
    hint = f"raise it: `sysctl fs.inotify.max_user_watches={max(needed * 4, 65536)}`"
    if needed > limit:
        return Check("inotify", FAIL, message, hint)
    if needed > limit // 2:  # editors, IDEs and other watchers share the same budget
        return Check("inotify", WARN, message, hint)
    return Check("inotify", OK, message)


def count_directories(root: Path, limit: int = _COUNT_LIMIT) -> int:
    """Directories under `root` (itself included, `.git` excluded), up to `limit`."""
    count = 0
    for _, dirs, _ in os.walk(root):
        dirs[:] = [d for d in dirs if d != ".git"]
        count += 1
        if count >= limit:
            break
    return count


def check_clock(now: datetime) -> Check:
    shown = timefmt.rfc3339(now)
    if now.year < MIN_YEAR:
        return Check(
            "clock",
            FAIL,
            f"the system clock reads {shown}; manifest expiry checks would be wrong",
            "set the clock, e.g. `timedatectl set-ntp true`",
        )
    return Check("clock", OK, shown)


def check_disk(state_dir: Path) -> Check:
    where = _nearest_existing(state_dir)
    try:
        free = shutil.disk_usage(where).free
    except OSError as exc:
        return Check("disk", WARN, f"cannot measure free space at {where}: {exc.strerror}")
    message = f"{_human(free)} free at {where}"
    hint = "free some space: journals, candidates and imports are written there"
    if free < DISK_FAIL:
        return Check("disk", FAIL, message, hint)
    if free < DISK_WARN:
        return Check("disk", WARN, message, hint)
    return Check("disk", OK, message)


def check_socket(socket: Path) -> Check:
    """The daemon can bind its control socket, as `memsync run` would judge the place: a
    short path, in a directory only this user can write (or one it would create), with
    nothing at the path but a socket of this user's."""
    hint = "set control.socket to a path in a directory this user can write"
    size = len(os.fsencode(socket))
    if size > SOCKET_PATH_MAX:
        message = f"{socket} is {size} bytes long; a Unix socket path holds {SOCKET_PATH_MAX}"
        return Check("socket", FAIL, message, "set control.socket to a shorter path")
    entry = next((p for p in (socket.parent, *socket.parent.parents) if p.exists()), Path("/"))
    if not entry.is_dir():
        return Check(
            "socket", FAIL, f"{socket} cannot be created: {entry} is not a directory", hint
        )
    if not os.access(entry, os.W_OK | os.X_OK):
        return Check("socket", FAIL, f"this user cannot create {socket} (in {entry})", hint)
    refusal = _socket_place_refusal(socket, entry)
    if refusal is not None:
        return Check(
            "socket", FAIL, f"memsync run would refuse {socket}: {refusal}", SAFE_SOCKET_HINT
        )
    try:
        info = socket.lstat()
    except OSError:
        return Check("socket", OK, f"{socket} can be created")
    if not stat.S_ISSOCK(info.st_mode):
        message = f"{socket} is {kind_of(info.st_mode)}, not a socket; memsync run would refuse it"
        return Check("socket", FAIL, message, "move it away, or set control.socket to another path")
    if info.st_uid != os.geteuid():
        message = f"{socket} is a socket of uid {info.st_uid}; memsync run would refuse it"
        return Check("socket", FAIL, message, hint)
    return Check(
        "socket", OK, f"{socket} can be created (a socket is there: a daemon may be running)"
    )


def _socket_place_refusal(socket: Path, entry: Path) -> str | None:
    """What `memsync run` would say about the socket's directory; when it does not exist
    yet, about the directories above it (the daemon creates it, 0700)."""
    if entry == socket.parent:
        return socket_directory_refusal(socket)
    try:
        above = directory_chain(entry)
    except OSError as exc:
        return f"{entry} cannot be examined ({exc.strerror})"
    made = DirFacts(str(socket.parent), os.geteuid(), stat.S_IFDIR | 0o700)
    return directory_refusal([made, *above], os.geteuid())


def check_systemd(environ: Mapping[str, str]) -> Check:
    """Reported only: memsync runs fine under any supervisor."""
    if not Path("/run/systemd/system").is_dir() or shutil.which("systemctl") is None:
        return Check(
            "systemd",
            WARN,
            "systemd is not running here",
            "run `memsync run` under the supervisor this system uses",
        )
    runtime = environ.get("XDG_RUNTIME_DIR", "")
    if not runtime or not (Path(runtime) / "systemd").is_dir():
        return Check(
            "systemd",
            WARN,
            "systemd is running, but no user manager for this session",
            "use a system unit, or `loginctl enable-linger` for a user unit",
        )
    return Check("systemd", OK, "systemctl --user is available")


def _nearest_existing(path: Path) -> Path:
    """`path` or its closest ancestor that is an existing directory."""
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            return candidate
    return Path("/")


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"
