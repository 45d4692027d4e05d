"""What every command module shares: the lazy command group and the JSON error document
(click's parts), and, from `cli.app`, the app context, exit codes, logging and output.

Cheap to import (click and the standard library): `memsync status` through a daemon runs
with nothing more. The configuration schema and pydantic load when a command asks for them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, ClassVar

import click

from memsync.cli.app import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VERDICT,
    READS_STATE,
    WRITES_STATE,
    App,
    JsonModel,
    echo,
    emit,
    emit_document,
    emitted,
    setup_logging,
)
from memsync.errors import (
    ConfigError,
    GitError,
    GitMissing,
    GitTimeout,
    LockBusy,
    MemsyncError,
    ProblemError,
    RootError,
    SecretError,
    StateDirError,
    UsageError,
)
from memsync.redaction import redact

if TYPE_CHECKING:
    from memsync.wire.cli import ErrorReport

__all__ = [
    "EXIT_INTERNAL",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXIT_VERDICT",
    "INTERNAL_HINT",
    "READS_STATE",
    "WRITES_STATE",
    "App",
    "JsonModel",
    "LazyGroup",
    "echo",
    "emit",
    "emit_document",
    "emitted",
    "error_document",
    "setup_logging",
]


class LazyGroup(click.Group):
    """Command groups whose modules load only when used: `sync-now` from a timer should not
    pay for the hub's web server and the view machinery at every start, nor `--help` for
    any of them. `LAZY` names each command's module and its help's first paragraph (what
    `--help` lists; a test keeps them equal to the commands' own); the command is the
    module's attribute of that name (`-` read as `_`)."""

    LAZY: ClassVar[dict[str, tuple[str, str]]] = {}
    _listing = False

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            module_name, summary = self.LAZY[cmd_name]
            if self._listing:
                return click.Command(cmd_name, help=summary)
            command = getattr(importlib.import_module(module_name), cmd_name.replace("-", "_"))
            if not isinstance(command, click.Command):
                raise TypeError(f"{module_name}.{cmd_name} is not a command")
            self.add_command(command)
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        self._listing = True
        try:
            super().format_commands(ctx, formatter)
        finally:
            self._listing = False


# The `code` of the JSON error document, by error class (first match wins).
_ERROR_CODES: tuple[tuple[type[BaseException], str], ...] = (
    (StateDirError, "state-dir-unusable"),
    (SecretError, "secret-unavailable"),
    (ConfigError, "config-invalid"),
    (RootError, "root-unusable"),
    (GitMissing, "git-missing"),
    (UsageError, "usage"),
    (click.UsageError, "usage"),
    (LockBusy, "busy"),
    (GitTimeout, "git-timeout"),
    (GitError, "git-failed"),
    (MemsyncError, "failed"),
)
INTERNAL_HINT = "rerun with --debug for a traceback, and please report it"


def error_document(exc: BaseException, exit_code: int) -> ErrorReport:
    """The JSON error document a `--json` command prints on stdout when it fails."""
    from memsync.wire.cli import ErrorDetail, ErrorProblem, ErrorReport  # noqa: PLC0415

    if isinstance(exc, KeyboardInterrupt | click.exceptions.Abort):
        detail = ErrorDetail(
            code="interrupted", message="interrupted", hint=None, exit_code=exit_code
        )
        return ErrorReport(error=detail)
    code = next((c for kind, c in _ERROR_CODES if isinstance(exc, kind)), "internal")
    if isinstance(exc, ProblemError):
        code = exc.error_code
    if isinstance(exc, MemsyncError):
        message, hint = redact(exc.message), exc.hint
    elif isinstance(exc, click.ClickException):
        message, hint = exc.format_message(), "see `memsync --help`"
    else:
        message = f"internal error: {type(exc).__name__}: {redact(str(exc))}"
        hint = INTERNAL_HINT
    detail = ErrorDetail(code=code, message=message, hint=hint, exit_code=exit_code)
    if isinstance(exc, ConfigError):
        problems = [
            ErrorProblem(location=p.location, line=p.line, message=p.message) for p in exc.problems
        ]
        detail = detail.model_copy(update={"source": exc.source, "problems": problems})
    if isinstance(exc, ProblemError):  # a verdict: every problem behind it, never none
        problems = [
            ErrorProblem(location=p.path or "", line=p.line, message=redact(p.message), code=p.code)
            for p in exc.problems
        ]
        detail = detail.model_copy(update={"problems": problems})
    if isinstance(exc, StateDirError):
        detail = detail.model_copy(update={"path": exc.path})
    return ErrorReport(error=detail)
