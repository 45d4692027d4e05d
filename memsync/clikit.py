"""What every command module shares: the app context, exit codes, logging, JSON output
(results and the error document), the lazy command group.

Cheap to import (click and the standard library): `memsync status` and `--help` run with
nothing more. The configuration schema and pydantic load when a command asks for them.
"""

from __future__ import annotations

import importlib
import json
import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

import click

from memsync.config.paths import StatePaths, find_config_path, read_config, recall, remember
from memsync.config.statedir import as_state_dir_error, check_state_dir, ensure_state_dir
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
from memsync.logsetup import LogFormat, formatter, use_format
from memsync.redaction import redact, redact_secrets

if TYPE_CHECKING:
    from memsync.config.model import Settings
    from memsync.wire.cli import ErrorReport

EXIT_OK, EXIT_VERDICT, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

# Commands that write under the state dir (it is created, 0700, before they run) and those
# that only read it (it is checked, never created). Either way an unusable state dir is a
# configuration error before the command starts, not an OSError in the middle of it.
WRITES_STATE = frozenset(
    {"sync-now", "views pull", "run", "cycle prune", "cycle insight", "pause", "resume"}
)
READS_STATE = frozenset({"status"})

_emitted = False


class _Redacting(logging.Filter):
    """Credentials out of the message and out of any traceback or stack it carries."""

    _format = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_secrets(record.getMessage())
        record.args = ()
        if record.exc_info and not record.exc_text:
            record.exc_text = self._format.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_secrets(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_secrets(record.stack_info)
        return True


def setup_logging(debug: bool, log_format: LogFormat = "text") -> None:
    """memsync's messages, and those of the libraries it runs (aiohttp logs a malformed
    request's header lines), go to stderr through one redacting handler (`logsetup` says
    how a record is written)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format, daemon=False))
    handler.addFilter(_Redacting())
    ours = logging.getLogger("memsync")
    ours.handlers[:] = [handler]
    ours.setLevel(logging.DEBUG if debug else logging.WARNING)
    ours.propagate = False
    libraries = logging.getLogger()  # the root logger, where every library's records go
    libraries.handlers[:] = [handler]
    libraries.setLevel(logging.WARNING)


@dataclass
class App:
    config_path: str | None = None
    debug: bool = False
    state_dir: Path | None = None  # the loaded config's, once a command loaded it
    log_format: LogFormat | None = None  # --log-format; None: the config's `log.format`

    def settings(self) -> Settings:
        """The configuration; for the commands above, with the state dir made sure of."""
        from memsync.config import settingsmemo  # noqa: PLC0415

        path = self._config_file()
        raw = read_config(path)
        settings = settingsmemo.recall(path, raw)  # these bytes loaded before: no schema
        if settings is None:
            from memsync.config.load import load_config_bytes  # noqa: PLC0415 - pydantic
            from memsync.config.model import settings_from  # noqa: PLC0415

            settings = settings_from(load_config_bytes(raw, path), path)
            settingsmemo.remember(path, raw, settings)
        self.state_dir = settings.state_dir
        if self.log_format is None and settings.log_format != "text":
            use_format(settings.log_format)  # the command line's choice wins
        self._check_state_dir(settings.state_dir)
        remember(path, raw, StatePaths(settings.state_dir, settings.control_socket))
        return settings

    def known_paths(self) -> StatePaths | None:
        """Where the state dir and the control socket are, without loading the schema: when
        the configuration file's current bytes loaded cleanly before (`config.paths`), with
        the state dir checked as `settings` would; None when that is not known."""
        found = recall(self._config_file())
        if found is not None:
            self.state_dir = found.state_dir
            self._check_state_dir(found.state_dir)
        return found

    def config_file(self) -> Path:
        """The configuration file this command reads (ConfigError when there is none)."""
        return self._config_file()

    def _config_file(self) -> Path:
        path = find_config_path(self.config_path)
        if path is None:
            raise ConfigError(
                "no configuration file found",
                hint="write one for your memory roots with `memsync config init`, "
                "or pass --config PATH",
            )
        return path

    @staticmethod
    def _check_state_dir(state_dir: Path) -> None:
        command = _command_name()
        if command in WRITES_STATE:
            ensure_state_dir(state_dir)
        elif command in READS_STATE:
            check_state_dir(state_dir)

    def translate(self, exc: Exception) -> Exception:
        """An OSError about the state dir, raised while a command ran, as the configuration
        error it is; any other exception unchanged."""
        if self.state_dir is None:
            return exc
        return as_state_dir_error(exc, self.state_dir) or exc


def _command_name() -> str:
    """`sync-now`, `views pull`: the running command below `memsync`."""
    ctx = click.get_current_context(silent=True)
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


class JsonModel(Protocol):
    """What `emit` prints: a wire model (pydantic, but not imported for it)."""

    def model_dump_json(self, *, indent: int | None = None) -> str: ...


def emit(model: JsonModel) -> None:
    """Print exactly one JSON document on stdout."""
    global _emitted  # noqa: PLW0603 - one process runs one command
    click.echo(model.model_dump_json(indent=None))
    _emitted = True


def emit_document(document: Mapping[str, Any]) -> None:
    """Print exactly one JSON document on stdout, written as `emit` writes a wire model
    holding the same values (compact, UTF-8 unescaped)."""
    global _emitted  # noqa: PLW0603 - one process runs one command
    click.echo(json.dumps(document, ensure_ascii=False, separators=(",", ":")))
    _emitted = True


def emitted() -> bool:
    """Whether this command already printed its JSON document."""
    return _emitted


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
