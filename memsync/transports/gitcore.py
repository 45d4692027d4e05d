"""The git runner: one call of the real `git` binary in the box (see `git.py`).

`GitCore` runs git on the process box with the clean environment, the forced config, the
config guard's overrides and, for a network call, the root's credentials; it also finds
the repository (`git_dir`, `common_dir`) from its files. `Git` builds on it.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

from memsync.errors import GitError, GitMissing, GitTimeout
from memsync.redaction import redact
from memsync.transports.gitconfig import split_key
from memsync.transports.gitenv import (
    DEFAULT_TIMEOUT,
    FORCED_ARGS,
    NETWORK,
    Auth,
    GitResult,
    cause,
    clean_env,
    remote_argument,
    strict_ssh_command,
    token_of,
)
from memsync.transports.gitguard import GUARD
from memsync.transports.gitread import HANDLES, Read, plain_git_dir
from memsync.transports.gitversion import MIN_GIT_TEXT
from memsync.transports.process import Deadline, Session, run_process

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:  # the credential server (tempfile, sockets): a call with a token loads it
    from typing import Self

    from memsync.transports.credentials import Origin
    from memsync.transports.rootkeys import GitCredentials


class GitCore:
    """git for one repository (or work tree) directory: running it, and where it is."""

    def __init__(
        self,
        cwd: Path,
        *,
        timeout: float = DEFAULT_TIMEOUT,
        env: Mapping[str, str] | None = None,
        deadline: Deadline | None = None,
        credentials: GitCredentials | None = None,
        trusted_alternates: bool = False,
        resident: bool = True,
    ) -> None:
        """`timeout` bounds each call; `deadline`, when given, bounds all calls together
        (a sync cycle's `sync.timeout`): each process gets what is left of it.
        `credentials`: how network calls authenticate (read at each call).
        `trusted_alternates`: a repository memsync made itself, whose alternate object
        stores it chose (a root's never are: git refuses to run on a root with one).
        `resident`: this process lives on (the daemon), so GitPython's handle and gitdb's
        object reads, imported once, pay for themselves; False (a one-shot `sync-now`):
        what the plain file readers cannot answer is asked of git, and GitPython is never
        imported (its import costs more than the few processes a cycle saves with it)."""
        self.cwd = cwd
        self.timeout = timeout
        self.deadline = deadline
        self.credentials = credentials
        self.trusted_alternates = trusted_alternates
        self.resident = resident
        self._env = clean_env(env)
        # Where the config guard may keep what `git config --list` said of this repository
        # for the next one-shot process (`gitconfigrecord`); None: asked of git each process.
        # Set by the owner of a root's box only, never carried to another directory (`at`).
        self.config_record: Path | None = None
        # Not resident: git's answer for a `.git` that is not plain, while `.git` is the same
        self._asked: tuple[tuple[int, ...], Path | None] | None = None

    def at(self, cwd: Path, *, trusted_alternates: bool | None = None) -> Self:
        """The same box, with the same deadline and credentials, for another directory
        (a candidate worktree; with `trusted_alternates`, a repository memsync made that
        borrows objects it chose, such as a role's own repository)."""
        other = type(self)(
            cwd,
            timeout=self.timeout,
            deadline=self.deadline,
            credentials=self.credentials,
            trusted_alternates=(
                self.trusted_alternates if trusted_alternates is None else trusted_alternates
            ),
            resident=self.resident,
        )
        other._env = dict(self._env)
        return other

    @classmethod
    def like(cls, box: GitCore) -> Self:
        """A box of this class that is `box` in all but its methods: the same directory,
        deadline (the same one: what is left of it is shared), credentials, environment and
        config record, so each of its processes runs as one of `box`'s would (a cycle's
        `Git`, made while its first processes run on a `gitfetch.Fetches`)."""
        other = cls(
            box.cwd,
            timeout=box.timeout,
            deadline=box.deadline,
            credentials=box.credentials,
            trusted_alternates=box.trusted_alternates,
            resident=box.resident,
        )
        other._env = dict(box._env)
        other.config_record = box.config_record
        other._asked = box._asked
        return other

    @property
    def box_env(self) -> dict[str, str]:
        """The environment every git process of this box starts from (`clean_env`)."""
        return dict(self._env)

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
        on_stderr_line: Callable[[bytes], None] | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> GitResult:
        """Run git in the box. `guard=False` only for reading the config the guard needs.
        `on_stderr_line` sees git's stderr line by line as it runs (its progress); the
        result's stderr then holds the other lines only. `on_start` is told git's pid as
        soon as it runs (not the guard's own reading before it).

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
            run_env = {**self._env, **(GUARD.env(self) if guard else {}), **(env or {})}
        with self._authenticated(args) as auth:
            argv = ["git", *FORCED_ARGS]
            for key, value in (*auth.config, *config):
                argv += ["-c", f"{key}={value}"]
            argv += args
            try:
                done = run_process(
                    argv,
                    cwd=self.cwd,
                    env=run_env,
                    seconds=limit,
                    input=input,
                    on_start=_both(auth.started, on_start),
                    on_stderr_line=on_stderr_line,
                )
            except FileNotFoundError as exc:
                raise GitMissing(
                    "git is not installed or not on PATH",
                    hint=f"install git {MIN_GIT_TEXT} or newer",
                ) from exc
        if done.expired:
            raise self._timeout(shown, limit, by_deadline=by_deadline)
        stdout = auth.scrub_bytes(done.stdout)
        stderr = redact(auth.scrub(done.stderr.decode("utf-8", errors="replace").strip()))
        if on_stderr_line is not None and done.returncode != 0:  # what is left says what failed
            from memsync.gitprogress import without_progress  # noqa: PLC0415 - streamed only

            stderr = without_progress(stderr)
        if check and done.returncode != 0:
            raise GitError(
                f"`{shown}` failed: {cause(stderr)}",
                argv=[shown],
                returncode=done.returncode,
                detail=stderr,
            )
        return GitResult(done.returncode, stdout, stderr)

    def session(self, *args: str) -> Session:
        """A git that answers requests as it reads them (`cat-file --batch`), in the box as
        `run` starts one (the forced config, the config guard's overrides, what is left of
        the deadline); never a network command. The caller closes it."""
        if args and args[0] in NETWORK:
            raise ValueError("a network command runs once, through `run`")
        limit = self.timeout if self.deadline is None else self.deadline.cap(self.timeout)
        if limit <= 0:
            raise self._timeout(redact(" ".join(["git", *args])), limit, by_deadline=True)
        env = {**self._env, **GUARD.env(self)}
        try:
            return Session(["git", *FORCED_ARGS, *args], cwd=self.cwd, env=env, seconds=limit)
        except FileNotFoundError as exc:
            raise GitMissing(
                "git is not installed or not on PATH",
                hint=f"install git {MIN_GIT_TEXT} or newer",
            ) from exc

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
    def _authenticated(self, args: Sequence[str]) -> Iterator[Auth]:
        """The config that hands a network command this box's credentials, for one call.

        SSH: a strict `core.sshCommand` with the key and `known_hosts`. HTTPS: the token is
        read now and served by a `CredentialServer` while git runs, only to this git's own
        HTTP helper and only for the origin of the remote's URL (a `pushurl` refuses the
        root); git's helper list is reset first (forced `credential.helper=`), so no helper
        the root's config names ever runs.
        """
        creds = self.credentials
        if creds is None or not args or args[0] not in NETWORK:
            yield Auth()
            return
        pairs: list[tuple[str, str]] = []
        if creds.ssh:
            pairs.append(("core.sshCommand", strict_ssh_command(creds)))
        origins = self._http_origins(args) if creds.token is not None else frozenset()
        if not origins:
            yield Auth(tuple(pairs))
            return
        clear = sorted(str(origin) for origin in origins if origin.plain_remote)
        if clear:
            raise GitError(
                f"{creds.where}.https: refusing to send the token in clear text to {clear[0]}",
                hint="use an https:// URL for the upstream (plain http:// only on loopback)",
            )
        token = token_of(creds)
        from memsync.transports.credentials import (  # noqa: PLC0415 - a token: load it now
            DEFAULT_USERNAME,
            CredentialServer,
        )

        try:
            server = CredentialServer(origins, creds.username or DEFAULT_USERNAME, token)
            server.__enter__()
        except OSError as exc:
            raise GitError(
                f"{creds.where}.https: cannot start memsync's credential helper socket: {exc}",
                hint="check that $XDG_RUNTIME_DIR or the temporary directory is writable",
            ) from exc
        try:
            yield Auth((*pairs, ("credential.helper", server.helper)), token, server.expect)
        finally:
            server.__exit__(None, None, None)

    def _http_origins(self, args: Sequence[str]) -> frozenset[Origin]:
        """The http(s) origin of the remote a network command names (its url, as git reads
        the repository's config), or of the URL it names."""
        from memsync.transports.credentials import Origin  # noqa: PLC0415 - a token only

        remote = remote_argument(args)
        if remote is None:
            return frozenset()
        if "://" in remote:
            urls = [remote]
        else:
            urls = [
                entry.value or ""
                for entry in GUARD.entries(self)
                if entry.scope != "command"
                and split_key(entry.key)[:2] == ("remote", remote)
                and split_key(entry.key)[2] == "url"
            ]
        found = (Origin.of_url(url) for url in urls)
        return frozenset(origin for origin in found if origin is not None)

    def out(self, *args: str) -> str:
        """Run and return stdout as text, stripped (for single-value answers)."""
        return self.run(*args).stdout.decode("utf-8", "surrogateescape").strip()

    # -- repository facts ----------------------------------------------------------------------

    def git_dir(self) -> Path | None:
        """The repository directory of a work tree whose top level is `cwd`, else None.

        Read from the file system (a `.git` directory, or a `gitdir:` file): a plain one
        directly (`plain_git_dir`), any other by GitPython (or, not `resident`, by git),
        so that checking a root costs nothing; a root nested inside another repository
        has no `.git` of its own and answers None, and so does a `.git` that is not a
        repository.
        """
        plain = plain_git_dir(self.cwd)
        if plain is not None:
            return plain
        if not self.resident:
            return self._git_dir_asked()
        handle = HANDLES.open(self.cwd)
        if handle is Read.NO_REPOSITORY:
            return None
        if handle is Read.ASK_GIT:
            return self._git_dir_by_git()
        return handle.git_dir

    def _git_dir_asked(self) -> Path | None:
        """git's answer, asked once while `.git` stays the same file (a candidate worktree's
        `gitdir:` file is read many times in a cycle)."""
        try:
            st = (self.cwd / ".git").lstat()
            identity: tuple[int, ...] = (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)
        except OSError:
            identity = ()
        if self._asked is not None and identity and self._asked[0] == identity:
            return self._asked[1]
        found = self._git_dir_by_git()
        self._asked = (identity, found) if identity else None
        return found

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

    def common_dir(self) -> Path | None:
        """The repository's common directory (shared by its worktrees), read from files."""
        plain = plain_git_dir(self.cwd)
        if plain is not None:
            return plain
        handle = HANDLES.open(self.cwd) if self.resident else Read.ASK_GIT
        if handle is Read.NO_REPOSITORY:
            return None
        if handle is Read.ASK_GIT:
            if (self._git_dir_by_git() if self.resident else self._git_dir_asked()) is None:
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


def _both(
    first: Callable[[int], None] | None, second: Callable[[int], None] | None
) -> Callable[[int], None] | None:
    """One `on_start` telling both (either may be None)."""
    if first is None or second is None:
        return first or second

    def told(pid: int) -> None:
        first(pid)
        second(pid)

    return told
