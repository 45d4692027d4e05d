"""The one exception tree.

User errors carry structured facts (problems, hints), never finished prose for a person:
the wording a person reads is produced by the renderer in `memsync.cli.group`. Third-party
errors are translated at the transport boundary with `raise ... from exc`.
"""

from __future__ import annotations

from collections.abc import Sequence

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:  # the CLI's help and status paths import errors, never the validators
    from typing import ClassVar, TypeVar

    from memsync.configproblem import Located
    from memsync.validators.problems import Problem

    T = TypeVar("T")


def format_problem(problem: Located, source: str | None = None) -> str:
    """`config.yaml:12: roots.personal.sync.interval: invalid duration '60x' (...)`."""
    where = "".join(
        f"{part}:" for part in (source, problem.line) if part is not None and part != ""
    )
    what = f"{problem.location}: {problem.message}" if problem.location else problem.message
    return f"{where} {what}" if where else what


class MemsyncError(Exception):
    """Root of every error memsync raises on purpose."""

    exit_code = 3

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class ProblemError(MemsyncError):
    """A verdict on some input: `problems` (CONTRACT §3) say what is wrong, and every
    renderer lists them (the JSON error document's `problems`, one stderr line each).

    A class whose verdict always has problems (`needs_problems`) refuses to be raised
    without them: a refusal never says "refused" and shows none.
    """

    exit_code = 1
    needs_problems: ClassVar[bool] = True
    error_code: ClassVar[str] = "refused"  # the JSON error document's `code`

    def __init__(
        self, message: str, problems: Sequence[Problem] = (), *, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.problems = tuple(problems)
        if self.needs_problems and not self.problems:
            raise InternalError(f"internal: {type(self).__name__} without problems: {message}")


class UsageError(MemsyncError):
    """The command line asked for something that cannot be done as asked."""

    exit_code = 2


class ConfigError(UsageError):
    """The configuration is missing or invalid; `problems` lists every issue at once."""

    def __init__(
        self,
        message: str,
        *,
        problems: Sequence[Located] = (),
        source: str | None = None,
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.problems = tuple(problems)
        self.source = source


class SecretError(ConfigError):
    """A secret reference could not be resolved (the secret itself is never shown)."""


class StateDirError(ConfigError):
    """The state directory cannot be created or written (`path`, and the OS's `cause`).

    A configuration error, not an internal one: the fix is to point `state_dir` at a
    directory this user can write, or to repair the one configured.
    """

    def __init__(self, path: str, cause: str, *, hint: str | None = None) -> None:
        super().__init__(f"state dir {path} is unusable: {cause}", hint=hint)
        self.path = path
        self.cause = cause


class RootError(UsageError):
    """A memory root path is unusable for the requested command (init, validate)."""


class GitError(MemsyncError):
    """A git command failed; `detail` is git's own stderr with credentials redacted."""

    def __init__(
        self,
        message: str,
        *,
        argv: Sequence[str] = (),
        returncode: int | None = None,
        detail: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.argv = tuple(argv)
        self.returncode = returncode
        self.detail = detail


class GitTimeout(GitError):
    """A git command ran past its timeout and was killed with its process group."""


class UnsafeRepoConfig(GitError):
    """git will not run on a repository whose own config or object store memsync does not
    know to be inert (`unsafe-repo-config`). `findings` are (file or None, message) pairs,
    each naming a key or file and how to remove it; never a value."""

    def __init__(
        self, message: str, findings: Sequence[tuple[str | None, str]], *, hint: str | None
    ) -> None:
        super().__init__(message, hint=hint)
        self.findings = tuple(findings)


class GitMissing(MemsyncError):
    """The git binary is not installed or too old."""

    exit_code = 2


class LockBusy(MemsyncError):
    """Another process holds a root's lock."""

    def __init__(self, message: str, *, holder: str | None = None) -> None:
        super().__init__(message, hint="wait for the other memsync run to finish, then retry")
        self.holder = holder


class InternalError(MemsyncError):
    """A state memsync itself should never reach (a bug): reported, never hidden."""


def require(value: T | None, what: str) -> T:
    """`value`, or an InternalError naming what was missing (asserts vanish under -O)."""
    if value is None:
        raise InternalError(f"internal: {what} is missing")
    return value
