"""The git box: the only module that runs git.

Every call runs the real `git` binary on the process box (`process.py`: its own process
group, killed whole at the caller's deadline) with a clean environment (no system or
global config, no hooks, no prompts, no pager, and nothing the repository's own config or
attributes name: see `gitconfig.py`), object checking on fetch, and `-z` output parsed as
bytes (parsers in `gitparse`). Credentials in URLs are redacted from every message this
module produces.

A root's own credentials (`credentials.GitCredentials`: an HTTPS token, an SSH key and
`known_hosts`) are read at each network call (`fetch`, `push`, `ls-remote`) and handed to
git by memsync's own credential helper and a forced `core.sshCommand`: never on a command
line, in a file or in an environment (see `credentials.py`); whatever git prints is
scrubbed of the token too.

What can be read from the repository's files without a process is read with GitPython:
refs, symbolic refs and packed refs (`ref_value`, `current_branch`), where the repository
is (`git_dir`, `common_dir`), its own config and remotes (`config_get`, `remote_url`;
repository level only, as git in the box sees it). The rule for GitPython here: **it never
starts a process.** No `repo.git.*`, no `is_dirty()`, no object reads (its object database
would start `git cat-file`), nothing that calls `git`; it is imported lazily (CLI start-up
never pays for it) with its executable pointed at a path that cannot exist, so a call that
would run git fails instead of running git outside the box. Whatever it cannot answer for
certain (an unusual ref or value, an unreadable file, an environment it would obey and git
in the box would not) is asked of git, through the box. One cheap `Repo` handle is kept
per work tree and dropped when `.git` changes identity; nothing else of GitPython's
outlives a call.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

from memsync.config.secrets import resolve
from memsync.errors import GitError, GitMissing, GitTimeout, SecretError
from memsync.redaction import redact
from memsync.transports import gitparse
from memsync.transports.credentials import (
    DEFAULT_USERNAME,
    CredentialServer,
    GitCredentials,
    Origin,
    key_path,
    ssh_command,
)
from memsync.transports.gitconfig import (
    ConfigEntry,
    config_env,
    neutralizing_config,
    parse_config_list,
    split_key,
)
from memsync.transports.gitparse import StatusEntry, WorkState
from memsync.transports.process import Deadline, run_process
from memsync.validators.tree import Change, Entry, TreeView

if TYPE_CHECKING:
    from git.repo import Repo

__all__ = [
    "FetchOutcome",
    "Git",
    "GitBlobs",
    "GitCredentials",
    "PushOutcome",
    "StatusEntry",
    "WorkState",
    "clean_env",
    "redact",
]

DEFAULT_TIMEOUT = 120.0

# Daemon-owned configuration, applied to every call after the repository's own config so
# that nothing a root or an upstream carries can run code or change what we parse.
_FORCED_CONFIG: tuple[tuple[str, str], ...] = (
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
)
_FORCED_ARGS: tuple[str, ...] = tuple(
    arg for key, value in _FORCED_CONFIG for arg in ("-c", f"{key}={value}")
)
_FORCED_VALUES = {split_key(key): value for key, value in _FORCED_CONFIG}

ALLOWED_PROTOCOLS = "file:git:ssh:http:https"

_KEEP_ENV = ("PATH", "HOME", "TMPDIR", "SSH_AUTH_SOCK", "SYSTEMROOT", "LD_LIBRARY_PATH")

_OID = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")

# The commands that may talk to an upstream: only these get a root's credentials.
_NETWORK = frozenset({"fetch", "push", "ls-remote"})
_SCRUBBED = "********"


# Lines git adds to every failed connection whatever the cause: they bury the cause.
_BOILERPLATE = (
    "could not read from remote repository",
    "please make sure you have the correct access rights",
    "and the repository exists",
)


def cause(text: str, limit: int = 400) -> str:
    """What went wrong, in git's and ssh's own words: every meaningful line, joined.

    Drops blank lines, hints and git's generic access-rights advice, keeps the lines that
    name the cause (connection refused, host unknown, permission denied, ...). `text` is
    already redacted.
    """
    kept: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        lowered = stripped.lower().removeprefix("fatal:").strip()
        if not stripped or stripped.startswith("hint:") or lowered.startswith(_BOILERPLATE):
            continue
        if stripped not in kept:
            kept.append(stripped)
    joined = "; ".join(kept) if kept else gitparse.last_line(text)
    return joined if len(joined) <= limit else joined[: limit - 1] + "…"


def clean_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment every git process gets: only what git needs, nothing it may obey."""
    env = {key: os.environ[key] for key in _KEEP_ENV if key in os.environ}
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


@dataclass(frozen=True)
class GitResult:
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


class Git:
    """git for one repository (or work tree) directory."""

    def __init__(
        self,
        cwd: Path,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
        deadline: Deadline | None = None,
        credentials: GitCredentials | None = None,
    ) -> None:
        """`timeout` bounds each call; `deadline`, when given, bounds all calls together
        (a sync cycle's `sync.timeout`): each process gets what is left of it.
        `credentials`: how network calls authenticate (read at each call)."""
        self.cwd = cwd
        self.timeout = timeout
        self.deadline = deadline
        self.credentials = credentials
        self._env = clean_env(env)

    def at(self, cwd: Path) -> Git:
        """The same box, with the same deadline and credentials, for another directory
        (a candidate worktree)."""
        other = Git(cwd, timeout=self.timeout, deadline=self.deadline, credentials=self.credentials)
        other._env = dict(self._env)
        return other

    # -- running -------------------------------------------------------------------------------

    def run(
        self,
        *args: str,
        input: bytes | None = None,
        timeout: float | None = None,
        check: bool = True,
        config: Sequence[tuple[str, str]] = (),
        env: Mapping[str, str] | None = None,
        guard: bool = True,
    ) -> GitResult:
        """Run git in the box. `guard=False` only for reading the config the guard needs.

        A network command (`fetch`, `push`, `ls-remote`) of a box with credentials gets
        them for its remote (see `_authenticated`).
        """
        limit = self.timeout if timeout is None else timeout
        shown = redact(" ".join(["git", *args]))
        by_deadline = self.deadline is not None and self.deadline.remaining() < limit
        if self.deadline is not None:
            limit = self.deadline.cap(limit)
        if limit <= 0:
            raise self._timeout(shown, limit, by_deadline=True)
        run_env = self._env
        if guard or env:
            run_env = {**self._env, **(_GUARD.env(self) if guard else {}), **(env or {})}
        with self._authenticated(args) as auth:
            argv = ["git", *_FORCED_ARGS]
            for key, value in (*auth.config, *config):
                argv += ["-c", f"{key}={value}"]
            argv += args
            try:
                done = run_process(argv, cwd=self.cwd, env=run_env, seconds=limit, input=input)
            except FileNotFoundError as exc:
                raise GitMissing(
                    "git is not installed or not on PATH", hint="install git 2.30 or newer"
                ) from exc
        if done.expired:
            raise self._timeout(shown, limit, by_deadline=by_deadline)
        stdout = auth.scrub_bytes(done.stdout)
        stderr = redact(auth.scrub(done.stderr.decode("utf-8", errors="replace").strip()))
        if check and done.returncode != 0:
            raise GitError(
                f"`{shown}` failed: {cause(stderr)}",
                argv=[shown],
                returncode=done.returncode,
                detail=stderr,
            )
        return GitResult(done.returncode, stdout, stderr)

    def _timeout(self, shown: str, limit: float, *, by_deadline: bool) -> GitTimeout:
        if by_deadline and self.deadline is not None:
            message = f"the cycle's time limit ({self.deadline.seconds:g}s) ran out at `{shown}`"
        else:
            message = f"`{shown}` did not finish within {limit:g}s and was stopped"
        return GitTimeout(
            message, argv=[shown], hint="raise the root's sync.timeout or check the network"
        )

    # -- credentials ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _authenticated(self, args: Sequence[str]) -> Iterator[_Auth]:
        """The config that hands a network command this box's credentials, for one call.

        SSH: a strict `core.sshCommand` with the key and `known_hosts`. HTTPS: the token is
        read now and served by a `CredentialServer` while git runs, only to the origins the
        remote's own URLs (url, pushurl) name; git's helper list is reset first (forced
        `credential.helper=`), so no helper the root's config names ever runs.
        """
        creds = self.credentials
        if creds is None or not args or args[0] not in _NETWORK:
            yield _Auth()
            return
        pairs: list[tuple[str, str]] = []
        if creds.ssh:
            pairs.append(("core.sshCommand", _ssh_command(creds)))
        origins = self._http_origins(args) if creds.token is not None else frozenset()
        if not origins:
            yield _Auth(tuple(pairs))
            return
        clear = sorted(str(origin) for origin in origins if origin.plain_remote)
        if clear:
            raise GitError(
                f"{creds.where}.https: refusing to send the token in clear text to {clear[0]}",
                hint="use an https:// URL for the upstream (plain http:// only on loopback)",
            )
        token = _token(creds)
        try:
            server = CredentialServer(origins, creds.username or DEFAULT_USERNAME, token)
            server.__enter__()
        except OSError as exc:
            raise GitError(
                f"{creds.where}.https: cannot start memsync's credential helper socket: {exc}",
                hint="check that $XDG_RUNTIME_DIR or the temporary directory is writable",
            ) from exc
        try:
            yield _Auth((*pairs, ("credential.helper", server.helper)), token)
        finally:
            server.__exit__(None, None, None)

    def _http_origins(self, args: Sequence[str]) -> frozenset[Origin]:
        """The http(s) origins of the remote a network command names (its url and pushurl
        values, as git reads the repository's config), or of the URL it names."""
        remote = _remote_argument(args)
        if remote is None:
            return frozenset()
        if "://" in remote:
            urls = [remote]
        else:
            urls = [
                entry.value or ""
                for entry in _GUARD.entries(self)
                if entry.scope != "command"
                and split_key(entry.key)[:2] == ("remote", remote)
                and split_key(entry.key)[2] in ("url", "pushurl")
            ]
        found = (Origin.of_url(url) for url in urls)
        return frozenset(origin for origin in found if origin is not None)

    def out(self, *args: str) -> str:
        """Run and return stdout as text, stripped (for single-value answers)."""
        return self.run(*args).stdout.decode("utf-8", "surrogateescape").strip()

    # -- repository facts ----------------------------------------------------------------------

    def git_dir(self) -> Path | None:
        """The repository directory of a work tree whose top level is `cwd`, else None.

        Read from the file system (a `.git` directory, or a `gitdir:` file) by GitPython,
        without running git, so that checking a root costs nothing; a root nested inside
        another repository has no `.git` of its own and answers None, and so does a `.git`
        that is not a repository.
        """
        handle = _HANDLES.open(self.cwd)
        if handle is _Read.NO_REPOSITORY:
            return None
        if handle is _Read.ASK_GIT:
            return self._git_dir_by_git()
        return handle.git_dir

    def _git_dir_by_git(self) -> Path | None:
        # Unguarded: the config guard itself asks for the repository's directories.
        result = self.run(
            "rev-parse", "--absolute-git-dir", "--show-toplevel", check=False, guard=False
        )
        lines = result.stdout.decode("utf-8", "surrogateescape").splitlines()
        if result.returncode != 0 or len(lines) != 2 or Path(lines[1]) != self.cwd.resolve():
            return None
        return Path(lines[0])

    def toplevel(self) -> Path | None:
        """The work tree's top level, or None when `cwd` is not inside a non-bare work tree."""
        result = self.run("rev-parse", "--is-bare-repository", "--show-toplevel", check=False)
        lines = result.stdout.decode("utf-8", "surrogateescape").splitlines()
        if result.returncode != 0 or len(lines) < 2 or lines[0].strip() != "false":
            return None
        return Path(lines[1].strip())

    def work_state(self, *, refresh: bool = False) -> WorkState:
        """Branch, HEAD, upstream, ahead/behind and every changed path, in one call.

        `refresh` lets git write back refreshed stat data to the index (it takes the index
        lock briefly, as a plain `git status` does); without it, files git cannot trust by
        their stat data are hashed again on every call, which is slow on large roots.
        """
        raw = self.run(
            "status",
            "--porcelain=v2",
            "--branch",
            "-z",
            "--untracked-files=all",
            "--no-renames",
            "--ignore-submodules=none",
            env={"GIT_OPTIONAL_LOCKS": "1"} if refresh else None,
        ).stdout
        return gitparse.parse_status_v2(raw)

    def status(self) -> list[StatusEntry]:
        return list(self.work_state().entries)

    def merge_in_progress(self) -> bool:
        git_dir = self.git_dir()
        return git_dir is not None and (git_dir / "MERGE_HEAD").exists()

    def rev_parse(self, ref: str) -> str | None:
        """The commit `ref` names, or None when it does not resolve."""
        result = self.run(
            "rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}", check=False
        )
        return result.stdout.decode("ascii").strip() if result.returncode == 0 else None

    def ref_value(self, ref: str) -> str | None:
        """The object a full ref name (or HEAD) points at, or None when it does not resolve.

        GitPython reads the loose ref file `git fetch` writes, or the `packed-refs` line a
        fresh clone lists, following symbolic refs: no process on every cycle. Anything it
        cannot read (a missing, per-worktree or unusual ref, an unreadable file, another ref
        backend) is asked of `rev-parse` through the box.
        """
        if ref == "HEAD" or (ref.startswith("refs/") and not ref.startswith(_PER_WORKTREE)):
            handle = _HANDLES.open(self.cwd)
            if not isinstance(handle, _Read):
                oid = _read_ref(handle.repo, ref)
                if oid is not None:
                    return oid
        return self.rev_parse(ref)

    def current_branch(self) -> str | None:
        """The branch HEAD names (short), or None when HEAD is detached or unreadable."""
        handle = _HANDLES.open(self.cwd)
        if not isinstance(handle, _Read):
            branch = _head_branch(handle.repo)
            if not isinstance(branch, _Read):
                return branch
        result = self.run("symbolic-ref", "--quiet", "--short", "HEAD", check=False)
        if result.returncode != 0:
            return None
        return result.stdout.decode("utf-8", "surrogateescape").strip()

    def config_entries(self) -> tuple[ConfigEntry, ...]:
        """Every config entry git sees here (the repository's own files and includes)."""
        return _GUARD.entries(self)

    def common_dir(self) -> Path | None:
        """The repository's common directory (shared by its worktrees), read from files."""
        handle = _HANDLES.open(self.cwd)
        if handle is _Read.NO_REPOSITORY:
            return None
        if handle is _Read.ASK_GIT:
            if self._git_dir_by_git() is None:
                return None
            result = self.run(
                "rev-parse", "--path-format=absolute", "--git-common-dir", check=False, guard=False
            )
            text = result.stdout.decode("utf-8", "surrogateescape").strip()
            return Path(text) if result.returncode == 0 and text else None
        repo = handle.repo
        if os.path.normpath(repo.common_dir) == os.path.normpath(repo.git_dir):
            return handle.git_dir
        return Path(repo.common_dir).resolve()

    def config_get(self, key: str) -> str | None:
        """The value `git config --get` gives here: the box's own for the keys it forces,
        else the repository's config (its own files and includes; never global or system).

        GitPython reads it; a key it does not find, and any value its parser might read
        differently from git's (quotes or backslashes in it, a `config.worktree`, a file
        it cannot decode), is asked of git through the box.
        """
        forced = _FORCED_VALUES.get(split_key(key))
        if forced is not None:
            return forced
        handle = _HANDLES.open(self.cwd)
        if not isinstance(handle, _Read):
            repo = handle.repo
            section, subsection, name = split_key(key)
            header = section if subsection is None else f'{section} "{subsection}"'
            value = _config_value(repo, lambda: repo.config_reader("repository").get(header, name))
            if value is not None:
                return value
        return self._config_by_git(key)

    def _config_by_git(self, key: str) -> str | None:
        result = self.run("config", "--get", key, check=False)
        if result.returncode != 0:
            return None
        return result.stdout.decode("utf-8", "surrogateescape").strip()

    def remote_url(self, remote: str) -> str | None:
        """The remote's URL (the last one configured, as `git config --get` says)."""
        handle = _HANDLES.open(self.cwd)
        if not isinstance(handle, _Read):
            repo = handle.repo
            url = _config_value(repo, lambda: repo.remote(remote).url)
            if url is not None:
                return url
        return self._config_by_git(f"remote.{remote}.url")

    def is_ancestor(self, ancestor: str, descendant: str) -> bool:
        result = self.run("merge-base", "--is-ancestor", ancestor, descendant, check=False)
        if result.returncode in (0, 1):
            return result.returncode == 0
        raise GitError(f"cannot compare {ancestor[:12]} and {descendant[:12]}: {result.stderr}")

    def merge_base(self, a: str, b: str) -> str | None:
        result = self.run("merge-base", a, b, check=False)
        if result.returncode == 1:
            return None
        if result.returncode != 0:
            raise GitError(f"cannot find a merge base of {a[:12]} and {b[:12]}: {result.stderr}")
        return result.stdout.decode("ascii").strip()

    def rev_list(self, include: str, *excludes: str | None, no_merges: bool = False) -> list[str]:
        """Commits reachable from `include` but from none of `excludes`, oldest first."""
        args = ["rev-list", "--reverse", *(["--no-merges"] if no_merges else []), include]
        args += [f"^{exclude}" for exclude in excludes if exclude]
        return self.run(*args).stdout.decode("ascii").split()

    def tree_of(self, rev: str) -> str:
        return self.out("rev-parse", "--verify", f"{rev}^{{tree}}")

    def ls_tree(self, rev: str) -> dict[str, Entry]:
        """Every leaf of a commit's tree with mode, size and object id."""
        return gitparse.parse_ls_tree(
            self.run("ls-tree", "-r", "-t", "-z", "-l", "--full-tree", rev).stdout
        )

    def tree_view(self, rev: str) -> TreeView:
        return TreeView(self.ls_tree(rev), GitBlobs(self))

    def changes(self, include: str, exclude: str | None) -> tuple[int, list[Change]]:
        """(commit count, every path changed by every commit in `include ^exclude`).

        Each parent of a merge counts; the new side carries mode, size and object id.
        """
        args = [
            "log",
            "--reverse",
            "-m",
            "--raw",
            "-z",
            "--no-renames",
            "--no-abbrev",
            "--no-ext-diff",
            "--no-textconv",
            "--format=%x01%H %P",
            include,
        ]
        if exclude:
            args.append(f"^{exclude}")
        raw = self.run(*args).stdout
        records = gitparse.parse_log_raw(raw)
        commits = len(set(re.findall(rb"\x01([0-9a-f]+)", raw)))
        sizes = self.blob_sizes([oid for *_, oid in records if oid is not None])
        return commits, gitparse.changes_from(records, sizes)

    def changed_paths(self, old: str, new: str) -> tuple[str, ...]:
        raw = self.run(
            "diff-tree",
            "-r",
            "-z",
            "--name-only",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            old,
            new,
        ).stdout
        return tuple(sorted(gitparse.decode_path(p) for p in raw.split(b"\0") if p))

    def tree_diff(self, old: str, new: str) -> list[tuple[str, str]]:
        """(status letter, path) for every path that differs: A added, D deleted, M, T."""
        raw = self.run(
            "diff-tree",
            "-r",
            "-z",
            "--name-status",
            "--no-renames",
            "--no-ext-diff",
            "--no-textconv",
            old,
            new,
        ).stdout
        fields = raw.split(b"\0")
        return [
            (fields[i].decode("ascii")[:1], gitparse.decode_path(fields[i + 1]))
            for i in range(0, len(fields) - 1, 2)
        ]

    def blob_sizes(self, oids: Sequence[str]) -> dict[str, int]:
        wanted = sorted(set(oids))
        if not wanted:
            return {}
        raw = self.run(
            "cat-file",
            "--batch-check=%(objectname) %(objecttype) %(objectsize)",
            input=("\n".join(wanted) + "\n").encode("ascii"),
        ).stdout
        return gitparse.parse_batch_check(raw)

    def read_blobs(self, oids: Sequence[str]) -> dict[str, bytes]:
        wanted = sorted(set(oids))
        if not wanted:
            return {}
        raw = self.run(
            "cat-file", "--batch", input=("\n".join(wanted) + "\n").encode("ascii")
        ).stdout
        return gitparse.parse_batch(raw)

    def hash_files(self, paths: Sequence[str]) -> dict[str, str]:
        """Blob ids of work-tree files as they are on disk (no filters applied)."""
        if not paths:
            return {}
        raw = self.run(
            "hash-object",
            "--no-filters",
            "--stdin-paths",
            input=b"".join(gitparse.encode_path(p) + b"\n" for p in paths),
        ).stdout
        return dict(zip(paths, raw.decode("ascii").split(), strict=True))

    def list_files(self) -> list[str]:
        """Work-tree paths git would consider: tracked ones and untracked ones not ignored."""
        raw = self.run(
            "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--deduplicate"
        ).stdout
        return sorted({gitparse.decode_path(p) for p in raw.split(b"\0") if p})

    def read_stage(self, path: str, stage: int) -> bytes | None:
        """The bytes of `path` at an index stage (1 base, 2 ours, 3 theirs), None if absent."""
        result = self.run("cat-file", "blob", f":{stage}:{path}", check=False)
        return result.stdout if result.returncode == 0 else None

    def write_tree(self) -> str:
        return self.out("write-tree")

    def refs(self, prefix: str) -> dict[str, str]:
        raw = self.run("for-each-ref", "--format=%(refname)%00%(objectname)", prefix).stdout
        return gitparse.parse_refs(raw)

    def identity_config(self) -> list[tuple[str, str]]:
        """The committer for merge commits: the root's own identity, else memsync's."""
        name = self.config_get("user.name")
        email = self.config_get("user.email")
        return [("user.name", name or "memsync"), ("user.email", email or "memsync@localhost")]

    def unmerged_paths(self) -> list[str]:
        return sorted(e.path for e in self.status() if e.unmerged)

    # -- network -------------------------------------------------------------------------------

    def fetch(
        self, remote: str, branch: str, into: str, timeout: float | None = None
    ) -> tuple[FetchOutcome, str]:
        """Fetch one upstream branch into `into` (forced: the planner judges rewinds)."""
        # Naming upload-pack and receive-pack keeps a root's remote.*.uploadpack and
        # remote.*.receivepack settings (commands in repository config) from ever running.
        result = self.run(
            "fetch",
            "--upload-pack=git-upload-pack",
            "--no-tags",
            "--no-write-fetch-head",
            "--no-recurse-submodules",
            "--quiet",
            "--end-of-options",
            remote,
            f"+refs/heads/{branch}:{into}",
            timeout=timeout,
            check=False,
        )
        if result.returncode == 0:
            return FetchOutcome.OK, ""
        text = result.stderr
        if "couldn't find remote ref" in text.lower():
            return FetchOutcome.MISSING_BRANCH, text
        if gitparse.looks_like_bad_objects(text):
            return FetchOutcome.BAD_OBJECTS, text
        return FetchOutcome.UNREACHABLE, text

    def push(
        self, remote: str, commit: str, branch: str, timeout: float | None = None
    ) -> tuple[PushOutcome, str]:
        """Push one exact commit to the upstream branch, never forced."""
        result = self.run(
            "push",
            "--receive-pack=git-receive-pack",
            "--porcelain",
            "--no-verify",
            "--end-of-options",
            remote,
            f"{commit}:refs/heads/{branch}",
            timeout=timeout,
            check=False,
        )
        if result.returncode == 0:
            return PushOutcome.OK, ""
        text = redact((result.stderr + "\n" + result.stdout.decode("utf-8", "replace")).strip())
        lowered = text.lower()
        if "[rejected]" in lowered or "non-fast-forward" in lowered or "fetch first" in lowered:
            return PushOutcome.REJECTED, text
        return PushOutcome.UNREACHABLE, text

    # -- refs, worktrees, the work tree ------------------------------------------------------

    def update_ref(
        self, ref: str, new: str, old: str | None = None, reason: str = "memsync"
    ) -> None:
        """Move `ref` to `new`, only if it still points at `old` (compare-and-swap)."""
        self.run("update-ref", "-m", reason, ref, new, *([old] if old is not None else []))

    def move_refs(
        self, updates: Sequence[tuple[str, str, str]], deletes: Sequence[str], reason: str
    ) -> None:
        """One atomic transaction: (ref, new, old) compare-and-swap updates, then deletions."""
        lines = [f"update {ref} {new} {old}" for ref, new, old in updates]
        lines += [f"delete {ref}" for ref in deletes]
        self.run(
            "update-ref",
            "-m",
            reason,
            "--stdin",
            input=("start\n" + "\n".join(lines) + "\nprepare\ncommit\n").encode(),
        )

    def delete_ref(self, ref: str) -> None:
        self.run("update-ref", "-d", ref, check=False)

    def worktree_add(self, path: Path, commit: str) -> None:
        self.run("worktree", "add", "--detach", "--quiet", str(path), commit)

    def worktree_remove(self, path: Path) -> None:
        self.run("worktree", "remove", "--force", "--force", str(path), check=False)

    def worktree_prune(self) -> None:
        self.run("worktree", "prune", check=False)

    def read_tree_update(self, old: str, new: str) -> None:
        """Move index and work tree from `old` to `new` (two-tree merge: only changed files).

        Stale stat data in the index makes git think clean files changed; refresh and
        retry once before giving up.
        """
        first = self.run("read-tree", "-m", "-u", old, new, check=False)
        if first.returncode != 0:
            self.run("update-index", "-q", "--refresh", check=False)
            self.run("read-tree", "-m", "-u", old, new)

    def commit_paths(self, start: str, paths: Sequence[str], message: str, index: Path) -> str:
        """A commit on top of `start` holding the work tree's `paths` as they are now.

        Built in a private index file (`index`), so the root's own index and work tree are
        not touched; deleted paths are removed. Returns the new commit's id.
        """
        env = {"GIT_INDEX_FILE": str(index), "GIT_LITERAL_PATHSPECS": "1"}
        self.run("read-tree", start, env=env)
        self.run(
            "add", "--all", "--force", "--", *paths, env=env
        )  # --force: the allowlist .gitignore ignores everything first
        tree = self.run("write-tree", env=env).stdout.decode("ascii").strip()
        done = self.run(
            "commit-tree", tree, "-p", start, "-m", message, config=self.identity_config()
        )
        return done.stdout.decode("ascii").strip()

    def read_tree_index(self, commit: str) -> None:
        """Set the index to `commit`'s tree, leaving the work tree as it is."""
        self.run("read-tree", commit)
        self.run("update-index", "-q", "--refresh", check=False)

    def reset_to(self, commit: str) -> None:
        """Force index and work tree to `commit` (recovery of our own interrupted write)."""
        self.run("read-tree", "--reset", "-u", commit)


@dataclass(frozen=True, repr=False)
class _Auth:
    """Config for one authenticated call, and the secret to scrub from what git prints."""

    config: tuple[tuple[str, str], ...] = ()
    secret: str | None = None

    def scrub(self, text: str) -> str:
        return text.replace(self.secret, _SCRUBBED) if self.secret else text

    def scrub_bytes(self, data: bytes) -> bytes:
        return data.replace(self.secret.encode(), _SCRUBBED.encode()) if self.secret else data


def _remote_argument(args: Sequence[str]) -> str | None:
    """The remote (name or URL) a fetch, push or ls-remote command line names."""
    if "--end-of-options" in args:
        at = list(args).index("--end-of-options") + 1
        return args[at] if at < len(args) else None
    return next((arg for arg in args[1:] if not arg.startswith("-")), None)


def _token(creds: GitCredentials) -> str:
    """The HTTPS token, read now; GitError naming the reference (never the secret)."""
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


def _ssh_command(creds: GitCredentials) -> str:
    """The strict `core.sshCommand` for a root's SSH settings; GitError when a file is
    missing (a clear message instead of ssh's own after a connection attempt)."""
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


_K = TypeVar("_K")
_V = TypeVar("_V")

# Work trees whose config reading and GitPython handle are kept: every root, and the
# candidate worktrees of recent cycles (each has its own path, so the oldest are forgotten).
_KEPT = 128


class _Recent(Generic[_K, _V]):
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


@dataclass(frozen=True)
class _Reading:
    files: tuple[Path, ...]
    stamps: tuple[tuple[int, int, int] | None, ...]
    entries: tuple[ConfigEntry, ...]
    env: dict[str, str]


class _ConfigGuard:
    """Per repository: its config entries and the overrides that defuse them.

    Read with one `git config --list` and kept until one of the files it came from (or
    might come from: the repository's config files, every include target) changes, so a
    cycle with nothing to do still costs no extra process.
    """

    def __init__(self) -> None:
        self._cache: _Recent[Path, _Reading] = _Recent(_KEPT)

    def env(self, git: Git) -> dict[str, str]:
        return self._load(git).env

    def entries(self, git: Git) -> tuple[ConfigEntry, ...]:
        return self._load(git).entries

    def _load(self, git: Git) -> _Reading:
        cached = self._cache.get(git.cwd)
        if cached is not None and _stamps(cached.files) == cached.stamps:
            return cached
        result = git.run(
            "config", "--list", "-z", "--show-scope", "--show-origin", check=False, guard=False
        )
        entries = tuple(parse_config_list(result.stdout)) if result.returncode == 0 else ()
        files = _config_files(git, entries)
        reading = _Reading(files, _stamps(files), entries, config_env(neutralizing_config(entries)))
        self._cache.put(git.cwd, reading)
        return reading


def _config_files(git: Git, entries: Sequence[ConfigEntry]) -> tuple[Path, ...]:
    """Every file whose change could change what `git config --list` says here."""
    files = {git.cwd / "config", git.cwd / ".git" / "config"}
    git_dir, common = git.git_dir(), git.common_dir()
    for directory in (git_dir, common):
        if directory is not None:
            files |= {directory / "config", directory / "config.worktree"}
    for entry in entries:
        if entry.origin.startswith("file:"):
            origin = git.cwd / entry.origin.removeprefix("file:")
            files.add(origin)
            if entry.key.lower().startswith("include") and entry.key.lower().endswith(".path"):
                target = Path(entry.value or "").expanduser()
                files.add(target if target.is_absolute() else origin.parent / target)
    return tuple(sorted(files))


def _stamps(paths: Sequence[Path]) -> tuple[tuple[int, int, int] | None, ...]:
    stamps: list[tuple[int, int, int] | None] = []
    for path in paths:
        try:
            st = path.stat()
        except OSError:
            stamps.append(None)
        else:
            stamps.append((st.st_mtime_ns, st.st_size, st.st_ino))
    return tuple(stamps)


_GUARD = _ConfigGuard()


class GitBlobs:
    """A BlobSource backed by `git cat-file --batch`."""

    def __init__(self, git: Git) -> None:
        self._git = git

    def read_many(self, oids: Sequence[str]) -> Mapping[str, bytes]:
        return self._git.read_blobs(oids)


# -- GitPython: the repository's files, read without a process ---------------------------------

# Where GitPython looks for git: nothing can be there, so a GitPython call that would start
# git (`repo.git.*`, `is_dirty()`, an object read) fails instead of running git outside the box.
_NO_GIT = "/nonexistent/memsync-runs-git-only-through-its-box/git"
# Variables GitPython obeys when it opens a repository and git in the box never sees.
_OBEYED_ENV = ("GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY")
# Refs each worktree has its own of (GitPython reads every ref but HEAD from the common dir).
_PER_WORKTREE = ("refs/worktree/", "refs/bisect/", "refs/rewritten/")


class _Read(Enum):
    NO_REPOSITORY = "no-repository"  # no `.git` of its own, or not a repository
    ASK_GIT = "ask-git"  # GitPython cannot answer for certain: git in the box decides


_IMPORT_LOCK = threading.Lock()


@functools.cache
def _load_gitpython() -> None:
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


@dataclass(frozen=True)
class _Handle:
    identity: tuple[int, ...]  # of `.git`: its inode, and a `gitdir:` file's stat
    git_dir: Path
    repo: Repo


class _Handles:
    """One GitPython `Repo` per work tree, kept while its `.git` stays the same file.

    Opening a `Repo` reads `.git` and the config (~0.2 ms); it holds no process and no
    open file afterwards, and every read through it goes back to the files. A `.git` that
    is not (yet) a repository is not remembered: a clone in progress is seen once done.
    """

    def __init__(self, size: int) -> None:
        self._cache: _Recent[Path, _Handle] = _Recent(size)

    def open(self, worktree: Path) -> _Handle | _Read:
        dot = worktree / ".git"
        try:
            st = dot.lstat()
            if stat.S_ISLNK(st.st_mode):
                st = dot.stat()
                if stat.S_ISDIR(st.st_mode):  # a symlinked `.git` directory is not the root's own
                    return _Read.NO_REPOSITORY
        except OSError:
            return _Read.NO_REPOSITORY
        if stat.S_ISDIR(st.st_mode):
            identity: tuple[int, ...] = (st.st_dev, st.st_ino)
        else:  # a `gitdir:` file (a linked worktree): what it says changes its stat
            identity = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        if any(key in os.environ for key in _OBEYED_ENV):
            return _Read.ASK_GIT
        cached = self._cache.get(worktree)
        if cached is not None and cached.identity == identity:
            return cached
        _load_gitpython()
        from git.exc import InvalidGitRepositoryError, NoSuchPathError  # noqa: PLC0415
        from git.repo import Repo  # noqa: PLC0415

        try:
            repo = Repo(worktree, search_parent_directories=False, expand_vars=False)
        except (InvalidGitRepositoryError, NoSuchPathError):
            return _Read.NO_REPOSITORY
        except Exception:  # anything else GitPython trips on: git decides
            return _Read.ASK_GIT
        if not stat.S_ISDIR(st.st_mode):
            git_dir = Path(repo.git_dir)
        elif dot.samefile(repo.git_dir):
            git_dir = dot
        else:  # `.git` is no repository, but the work tree itself looks like a bare one
            return _Read.NO_REPOSITORY
        handle = _Handle(identity, git_dir, repo)
        self._cache.put(worktree, handle)
        return handle


_HANDLES = _Handles(_KEPT)


def _read_ref(repo: Repo, ref: str) -> str | None:
    """The object id `ref` holds, loose or packed, through symbolic refs; None: ask git."""
    from git.refs.symbolic import SymbolicReference  # noqa: PLC0415

    try:
        oid = SymbolicReference.dereference_recursive(repo, ref)
    except Exception:  # missing, unreadable, too deep, an unknown packed-refs format
        return None
    return oid if _OID.fullmatch(oid) else None


def _head_branch(repo: Repo) -> str | _Read | None:
    """The branch HEAD names when it holds a commit; None when HEAD is detached."""
    try:
        head = repo.head.reference
    except TypeError:  # HEAD holds an object id
        return None
    except Exception:  # unreadable HEAD
        return _Read.ASK_GIT
    name = str(head.path)
    try:
        # `is_detached`: the branch holds an object id (git names the last ref of a chain)
        plain = name.startswith("refs/heads/") and head.is_detached
    except Exception:  # an unborn branch, an invalid name (another ref backend): git decides
        return _Read.ASK_GIT
    return name.removeprefix("refs/heads/") if plain else _Read.ASK_GIT


def _config_value(repo: Repo, read: Callable[[], object]) -> str | None:
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
