"""The command line: parse argv, call one function, render the result or the error, exit.

All wording a person reads about an error is produced here, by `render_error`. Exit codes
(CONTRACT §1): 0 ok, 1 verdict not ok, 2 usage or configuration, 3 internal, 130 interrupted.
"""

from __future__ import annotations

import errno
import gc
import sys
from collections.abc import Sequence
from typing import ClassVar, NoReturn, TextIO, cast

import click

from memsync import __version__
from memsync.cli import helpmemo
from memsync.cli.kit import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    INTERNAL_HINT,
    App,
    LazyGroup,
    emitted,
    error_document,
    setup_logging,
)
from memsync.errors import ConfigError, GitError, MemsyncError, ProblemError
from memsync.logsetup import FORMATS, LogFormat
from memsync.redaction import redact

# The heavy parts (pydantic, the config schema, git, validators) are imported inside the
# commands that need them: `--version`, `--help` and `status` through a running daemon
# never load them (tests/e2e/test_startup.py).


class _Commands(LazyGroup):
    # Every command lives in its own module, imported when that command runs (or its help
    # is asked for): `sync-now` from a timer defines no other command.
    LAZY: ClassVar[dict[str, tuple[str, str]]] = {
        "init": ("memsync.cli.init", "Create a valid RightMemory-format memory root at PATH."),
        "validate": (
            "memsync.cli.validate",
            "Check a root's paths, modes, names and memory graph (work tree, or one commit).",
        ),
        "sync-now": (
            "memsync.cli.sync",
            "Run one sync cycle for each named root (all configured roots when none is named).",
        ),
        "status": ("memsync.cli.status", "Show roots, views, the daemon and pending operations."),
        "config": ("memsync.cli.config", "Check or create a configuration file."),
        "doctor": (
            "memsync.cli.doctor",
            "Preflight: git, config, state dir, roots, secrets, keys, inotify, clock, disk, "
            "socket.",
        ),
        "keys": ("memsync.cli.views", "Ed25519 signing keys for view manifests."),
        "views": (
            "memsync.cli.views",
            "Build, publish, verify and pull shared views (signed memory packages).",
        ),
        "hub": (
            "memsync.cli.hub",
            "Run a memsync hub: signed view revisions, tokens, change events.",
        ),
        "run": (
            "memsync.cli.run",
            "Run the daemon in the foreground: keep every root and view in step by itself.",
        ),
        "pause": (
            "memsync.cli.pause",
            "Hold a root or view: nothing syncs or pulls it until `resume` (or --for runs out).",
        ),
        "resume": (
            "memsync.cli.pause",
            "Let a paused root or view run again (the running daemon syncs it at once).",
        ),
        "provenance": ("memsync.cli.provenance", "Where an item came from; what one key added."),
        "cycle": (
            "memsync.cli.cycle",
            "Run one prune or insight turn for ROOT now, through the configured role.",
        ),
    }


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    metavar="PATH",
    help="Config file (default: $MEMSYNC_CONFIG, then "
    "$XDG_CONFIG_HOME/memsync/config.yaml, then /etc/memsync/config.yaml).",
)
@click.option("--debug", is_flag=True, help="Verbose logs on stderr; tracebacks on errors.")
@click.option(
    "--log-format",
    type=click.Choice(FORMATS),
    default=None,
    help="Logs on stderr as text or as one JSON object a line (default: the config's "
    "log.format, else text).",
)
@click.version_option(__version__, prog_name="memsync")
@click.pass_context
def cli(
    ctx: click.Context, config_path: str | None, debug: bool, log_format: LogFormat | None
) -> None:
    """memsync keeps Git-backed agent memory roots in step with their upstream, safely.

    Every incoming commit is staged, validated and published by a fenced fast-forward;
    every local commit is validated before it is pushed; a refusal leaves the root as it was.
    """
    setup_logging(debug, log_format or "text")
    app = ctx.ensure_object(App)
    app.config_path, app.debug, app.log_format = config_path, debug, log_format


# -- errors, rendered in one place ---------------------------------------------------------


def render_error(exc: BaseException, debug: bool) -> int:
    """Say on stderr what failed and what to do, in one line (a configuration error with
    several problems, a refusal with problems: one line each); return the exit code."""
    if isinstance(exc, ConfigError) and exc.problems:
        from memsync.config.load import format_problem  # noqa: PLC0415 - its problems loaded it
    if isinstance(exc, ConfigError) and len(exc.problems) > 1:
        click.echo(f"memsync: {exc.message}", err=True)
        for problem in exc.problems:
            click.echo(f"  {format_problem(problem, exc.source)}", err=True)
        if exc.hint:
            click.echo(f"  next: {exc.hint}", err=True)
        return exc.exit_code
    if isinstance(exc, ConfigError) and exc.problems:
        hint = f"; {exc.hint}" if exc.hint else ""
        click.echo(f"memsync: {format_problem(exc.problems[0], exc.source)}{hint}", err=True)
        return exc.exit_code
    if isinstance(exc, ProblemError) and exc.problems:  # the verdict, then every problem
        click.echo(f"memsync: {redact(exc.message)}", err=True)
        for p in exc.problems:
            where = f"{p.path}:{p.line}" if p.path and p.line else p.path or "-"
            click.echo(f"  {p.code:<20} {where}: {redact(p.message)}", err=True)
        if exc.hint:
            click.echo(f"  next: {exc.hint}", err=True)
        return exc.exit_code
    if isinstance(exc, MemsyncError):
        hint = f"; {exc.hint}" if exc.hint else ""
        click.echo(f"memsync: {redact(exc.message)}{hint}", err=True)
        if debug and isinstance(exc, GitError) and exc.detail:
            click.echo(redact(exc.detail), err=True)
        return exc.exit_code
    if debug:
        import traceback  # noqa: PLC0415 - only for --debug

        traceback.print_exception(exc, file=sys.stderr)
    click.echo(
        f"memsync: internal error: {type(exc).__name__}: {redact(str(exc))} ({INTERNAL_HINT})",
        err=True,
    )
    return EXIT_INTERNAL


def main(argv: Sequence[str] | None = None) -> NoReturn:
    args = list(argv) if argv is not None else sys.argv[1:]
    debug = "--debug" in args
    # Like --debug, read from argv: the error may come before or during click's parsing.
    as_json = "--json" in (args[: args.index("--")] if "--" in args else args)
    app = App()
    failure: BaseException | None = None
    try:
        code = cli.main(args=args, prog_name="memsync", standalone_mode=False, obj=app)
        code = code if isinstance(code, int) else EXIT_OK
    except (KeyboardInterrupt, Exception) as exc:
        code, failure = fail(exc, app, debug=debug, as_json=as_json)
    sys.stdout.flush()
    if code == EXIT_OK and failure is None and helpmemo.wanted(args):
        _remember_help(args)
    gc.freeze()  # the exit's collections would walk all the command loaded (~50 ms, issue 18)
    sys.exit(code)


def fail_unparsed(exc: BaseException, app: App, *, as_json: bool) -> int:
    """What `main` makes of `exc` raised by a command running outside click (`cli.plain`):
    click's main's own treatment first (an interrupt or end of input is an abort after an
    empty line; a closed pipe exits 1 quietly), then `fail`."""
    if isinstance(exc, EOFError | KeyboardInterrupt):
        click.echo(file=sys.stderr)
        abort = click.exceptions.Abort()
        abort.__cause__ = exc
        return fail(abort, app, debug=False, as_json=as_json)[0]
    if isinstance(exc, OSError) and exc.errno == errno.EPIPE:
        from click.utils import _PacifyFlushWrapper  # noqa: PLC0415 - click's own

        sys.stdout = cast("TextIO", _PacifyFlushWrapper(sys.stdout))
        sys.stderr = cast("TextIO", _PacifyFlushWrapper(sys.stderr))
        return 1
    if not isinstance(exc, Exception):
        raise exc
    return fail(exc, app, debug=False, as_json=as_json)[0]


def fail(
    exc: KeyboardInterrupt | Exception, app: App, *, debug: bool, as_json: bool
) -> tuple[int, BaseException | None]:
    """Say what failed (stderr; the JSON error document on stdout for `--json`): the exit
    code and the failure (None for click's own exit). `cli.plain` ends here too."""
    failure: BaseException | None
    if isinstance(exc, KeyboardInterrupt | click.exceptions.Abort):
        click.echo("memsync: interrupted", err=True)
        code, failure = EXIT_INTERRUPTED, exc
    elif isinstance(exc, click.exceptions.Exit):
        code, failure = exc.exit_code, None
    elif isinstance(exc, click.ClickException):
        exc.show()
        code = EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
        failure = exc
    else:
        failure = app.translate(exc)
        code = render_error(failure, debug)
    if failure is not None and as_json and not emitted():
        click.echo(error_document(failure, code).model_dump_json())
    return code, failure


def _remember_help(args: list[str]) -> None:
    """Render the help click just printed once more, into memory, and keep it for the next
    process (`helpmemo`): only when that render, too, exits 0 with nothing on stderr."""
    import io  # noqa: PLC0415
    import logging  # noqa: PLC0415

    stdout, stderr = sys.stdout, sys.stderr
    out = io.TextIOWrapper(io.BytesIO(), encoding=stdout.encoding, errors=stdout.errors)
    err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
    loggers = (logging.getLogger(), logging.getLogger("memsync"))
    saved = [(lg, lg.handlers[:], lg.level, lg.propagate) for lg in loggers]
    try:
        sys.stdout, sys.stderr = out, err
        code = cli.main(args=args, prog_name="memsync", standalone_mode=False, obj=App())
        out.flush()
        err.flush()
    except Exception:  # no memo, nothing else: click already answered
        return
    finally:
        sys.stdout, sys.stderr = stdout, stderr
        for lg, handlers, level, propagate in saved:
            lg.handlers[:], lg.level, lg.propagate = handlers, level, propagate
    printed, complained = out.detach(), err.detach()
    if code in (None, EXIT_OK) and not complained.getvalue():
        helpmemo.remember(args, printed.getvalue())
