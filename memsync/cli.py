"""The command line: parse argv, call one function, render the result or the error, exit.

All wording a person reads about an error is produced here, by `render_error`. Exit codes
(CONTRACT §1): 0 ok, 1 verdict not ok, 2 usage or configuration, 3 internal, 130 interrupted.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import sys
import traceback
from collections.abc import Sequence
from pathlib import Path
from typing import ClassVar, NoReturn

import click

from memsync import __version__, clitext
from memsync.clikit import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VERDICT,
    App,
    emit,
    emitted,
)
from memsync.config import find_config_path, format_problem, load_config, settings_from
from memsync.config.model import RootSettings, Settings
from memsync.config.sample import SAMPLE
from memsync.config.statedir import check_state_dir
from memsync.errors import (
    ConfigError,
    GitError,
    GitMissing,
    GitTimeout,
    LockBusy,
    MemsyncError,
    RootError,
    SecretError,
    StateDirError,
    UsageError,
)
from memsync.roots.create import init_root
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.roots.disktree import disk_tree_view
from memsync.roots.repoconfig import repo_config_problems
from memsync.roots.result import SyncResult
from memsync.status import status_report
from memsync.transports.git import Git, redact
from memsync.validators.gate import validate_tree
from memsync.validators.policy import SyncPolicy
from memsync.validators.rightmemory import default_graph_validator
from memsync.wire import (
    InitReport,
    ProblemModel,
    StatusReport,
    SyncReport,
    SyncResultModel,
    ValidateReport,
)
from memsync.wire.cli import (
    ConfigValidateReport,
    DoctorCheck,
    DoctorReport,
    ErrorDetail,
    ErrorProblem,
    ErrorReport,
)

log = logging.getLogger("memsync")


class _Redacting(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact(record.getMessage())
        record.args = ()
        return True


def _setup_logging(debug: bool) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("memsync: %(levelname)s %(message)s"))
    handler.addFilter(_Redacting())
    root = logging.getLogger("memsync")
    root.handlers[:] = [handler]
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    root.propagate = False


class _LazyGroup(click.Group):
    """Command groups whose modules load only when used: `sync-now` from a timer should not
    pay for the hub's web server and the view machinery at every start."""

    LAZY: ClassVar[dict[str, str]] = {
        "keys": "memsync.cli_views",
        "views": "memsync.cli_views",
        "hub": "memsync.cli_hub",
        "run": "memsync.cli_daemon",
        "cycle": "memsync.cli_cycle",
    }

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.LAZY and cmd_name not in self.commands:
            module = importlib.import_module(self.LAZY[cmd_name])
            command = getattr(module, cmd_name)
            if not isinstance(command, click.Command):
                raise TypeError(f"{self.LAZY[cmd_name]}.{cmd_name} is not a command")
            self.add_command(command)
        return super().get_command(ctx, cmd_name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--config",
    "config_path",
    metavar="PATH",
    help="Config file (default: $MEMSYNC_CONFIG, then "
    "$XDG_CONFIG_HOME/memsync/config.yaml, then /etc/memsync/config.yaml).",
)
@click.option("--debug", is_flag=True, help="Verbose logs on stderr; tracebacks on errors.")
@click.version_option(__version__, prog_name="memsync")
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, debug: bool) -> None:
    """memsync keeps Git-backed agent memory roots in step with their upstream, safely.

    Every incoming commit is staged, validated and published by a fenced fast-forward;
    every local commit is validated before it is pushed; a refusal leaves the root as it was.
    """
    _setup_logging(debug)
    app = ctx.ensure_object(App)
    app.config_path, app.debug = config_path, debug


# -- init ------------------------------------------------------------------------------------


@cli.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--upstream",
    metavar="URL",
    help="Git remote to use as `origin`; an empty "
    "upstream receives the baseline, an existing one is joined.",
)
@click.option("--branch", default="main", show_default=True, help="Branch name.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def init(app: App, path: Path, upstream: str | None, branch: str, as_json: bool) -> int:
    """Create a valid RightMemory-format memory root at PATH.

    When the configuration already names a root at PATH, its `sync.https` or `sync.ssh`
    credentials reach a private upstream.
    """
    credentials = None
    if upstream is not None and find_config_path(app.config_path) is not None:
        with contextlib.suppress(ConfigError):
            target = path.expanduser().absolute()
            for root in app.settings().roots:
                if root.path.expanduser().absolute() == target:
                    credentials = root.git_credentials
    done = init_root(path, upstream=upstream, branch=branch, credentials=credentials)
    report = InitReport(
        path=str(done.path),
        created=done.created,
        joined=done.joined,
        head=done.head,
        branch=done.branch,
        upstream=redact(done.upstream) if done.upstream else None,
        pushed=done.pushed,
        message=done.message,
    )
    if as_json:
        emit(report)
    else:
        click.echo(f"{done.path}: {done.message} (branch {done.branch}, head {done.head[:12]})")
        if done.upstream is None:
            click.echo(
                "next: add an upstream with `git remote add origin URL`, then list the "
                "root under `roots:` in your memsync config"
            )
    return EXIT_OK


# -- validate --------------------------------------------------------------------------------


@cli.command()
@click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--rev", metavar="REV", help="Validate this commit instead of the work tree.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def validate(path: Path, rev: str | None, as_json: bool) -> int:
    """Check a root's paths, modes, names and memory graph (work tree, or one commit)."""
    policy = SyncPolicy()
    if rev is not None:
        git = Git(path)
        commit = git.rev_parse(rev)
        if commit is None:
            raise UsageError(
                f"{rev!r} is not a commit in {path}",
                hint="give a branch, tag or commit id that exists",
            )
        tree = git.tree_view(commit)
    else:
        tree = disk_tree_view(path)
    report = validate_tree(tree, policy, default_graph_validator(enforce_capacity=True))
    # The repository's own config is the root's too, whichever commit is checked.
    problems = [*report.problems, *repo_config_problems(path)]
    out = ValidateReport(
        valid=not problems,
        root=str(path.absolute()),
        rev=rev,
        files=report.files,
        items=report.items,
        problems=[ProblemModel.of(p) for p in problems],
    )
    if as_json:
        emit(out)
    else:
        clitext.print_validation(f"{path} at {rev}" if rev else str(path), out)
    return EXIT_VERDICT if problems else EXIT_OK


# -- sync-now --------------------------------------------------------------------------------


@cli.command("sync-now")
@click.argument("roots", nargs=-1, metavar="[ROOT]...")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.option(
    "--accept-rewrite",
    is_flag=True,
    help="Proceed even though the upstream was rewound or rewritten.",
)
@click.option("--no-push", is_flag=True, help="Admit incoming commits but push nothing.")
@click.option("--dry-run", is_flag=True, help="Plan and validate; publish and push nothing.")
@click.pass_obj
def sync_now(
    app: App,
    roots: tuple[str, ...],
    as_json: bool,
    accept_rewrite: bool,
    no_push: bool,
    dry_run: bool,
) -> int:
    """Run one sync cycle for each named root (all configured roots when none is named)."""
    settings = app.settings()
    chosen = _choose(settings, roots)
    options = SyncOptions(
        accept_rewrite=accept_rewrite, no_push=no_push, dry_run=dry_run, wait=None
    )
    results = _sync_through_daemon(settings, roots, options)
    if results is None:  # no daemon: run the cycles in this process
        results = [sync_root(r, settings.state_dir, options) for r in chosen]
    if as_json:
        emit(SyncReport(results=[SyncResultModel.of(r) for r in results]))
    else:
        for r in results:
            clitext.print_result(r)
    return EXIT_OK if all(r.ok for r in results) else EXIT_VERDICT


def _sync_through_daemon(
    settings: Settings, roots: Sequence[str], options: SyncOptions
) -> list[SyncResult] | None:
    """The running daemon's verdicts for these roots, or None when no daemon answers."""
    from memsync.daemon.client import DaemonUnavailable, call  # noqa: PLC0415 - stdlib only

    body = {
        "roots": list(roots),
        "accept_rewrite": options.accept_rewrite,
        "dry_run": options.dry_run,
        "no_push": options.no_push,
    }
    try:
        answer = call(settings.control_socket, "POST", "/v1/sync", body)
    except DaemonUnavailable:
        return None
    return [model.to_result() for model in SyncReport.model_validate(answer).results]


def _choose(settings: Settings, names: Sequence[str]) -> list[RootSettings]:
    known = {r.name: r for r in settings.roots}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(
            f"unknown root(s): {', '.join(unknown)}",
            hint=f"configured roots: {', '.join(known) or 'none'}",
        )
    if not known:
        raise ConfigError("the configuration lists no roots", hint="add one under `roots:`")
    return [known[n] for n in names] if names else list(known.values())


# -- status ----------------------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def status(app: App, as_json: bool) -> int:
    """Show roots, views, the daemon and pending operations."""
    settings = app.settings()
    report = _status_from_daemon(settings) or status_report(settings)
    if as_json:
        emit(report)
    else:
        clitext.print_status(report)
    return EXIT_OK


def _status_from_daemon(settings: Settings) -> StatusReport | None:
    from memsync.daemon.client import DaemonUnavailable, call  # noqa: PLC0415 - stdlib only

    try:
        answer = call(settings.control_socket, "GET", "/v1/status", timeout=30)
    except DaemonUnavailable:
        return None
    return StatusReport.model_validate(answer)


# -- config ----------------------------------------------------------------------------------


@cli.group()
def config() -> None:
    """Check or create a configuration file."""


@config.command("validate")
@click.argument("path", required=False, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def config_validate(app: App, path: Path | None, as_json: bool) -> int:
    """Check a config file and report every problem at once.

    A valid file whose state_dir this user cannot create or write is still valid (the
    daemon may run as another user) but draws a warning: memsync commands run as this user
    would stop with exit 2.
    """
    target = path or find_config_path(app.config_path)
    if target is None:
        raise ConfigError("no configuration file found", hint="pass the file's PATH")
    settings = settings_from(load_config(target), target)
    warnings: list[str] = []
    try:
        check_state_dir(settings.state_dir)
    except StateDirError as exc:
        warnings.append(f"{exc.message} (memsync commands run as this user stop with exit 2)")
    if as_json:
        report = ConfigValidateReport(
            valid=True,
            path=str(target),
            roots=len(settings.roots),
            views=len(settings.views),
            warnings=warnings,
        )
        emit(report)
    else:
        click.echo(f"{target}: valid ({len(settings.roots)} root(s))")
        for warning in warnings:
            click.echo(f"memsync: warning: {warning}", err=True)
    return EXIT_OK


@config.command("sample")
def config_sample() -> int:
    """Print a commented sample configuration that validates."""
    click.echo(SAMPLE, nl=False)
    return EXIT_OK


# -- doctor ----------------------------------------------------------------------------------


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def doctor(app: App, as_json: bool) -> int:
    """Preflight: git, config, state dir, roots, secrets, keys, inotify, clock, disk, socket.

    Exit 0 when no check failed, 1 when one did, 2 when the configuration does not load.
    """
    from memsync.doctor import diagnose  # noqa: PLC0415 - keeps start-up light

    found = diagnose(app.config_path)
    if as_json:
        checks = [
            DoctorCheck(
                name=c.name, status=c.status, message=c.message, hint=c.hint, details=[*c.details]
            )
            for c in found.checks
        ]
        emit(DoctorReport(ok=found.ok, checks=checks))
    else:
        clitext.print_diagnosis(found)
    if found.config_error:
        return EXIT_USAGE
    return EXIT_OK if found.ok else EXIT_VERDICT


# -- errors, rendered in one place ---------------------------------------------------------

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
_INTERNAL_HINT = "rerun with --debug for a traceback, and please report it"


def render_error(exc: BaseException, debug: bool) -> int:
    """Say on stderr what failed and what to do, in one line (a configuration error with
    several problems: one line each); return the exit code."""
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
    if isinstance(exc, MemsyncError):
        hint = f"; {exc.hint}" if exc.hint else ""
        click.echo(f"memsync: {redact(exc.message)}{hint}", err=True)
        if debug and isinstance(exc, GitError) and exc.detail:
            click.echo(redact(exc.detail), err=True)
        return exc.exit_code
    if debug:
        traceback.print_exception(exc, file=sys.stderr)
    click.echo(
        f"memsync: internal error: {type(exc).__name__}: {redact(str(exc))} ({_INTERNAL_HINT})",
        err=True,
    )
    return EXIT_INTERNAL


def error_document(exc: BaseException, exit_code: int) -> ErrorReport:
    """The JSON error document a `--json` command prints on stdout when it fails."""
    if isinstance(exc, KeyboardInterrupt | click.exceptions.Abort):
        detail = ErrorDetail(
            code="interrupted", message="interrupted", hint=None, exit_code=exit_code
        )
        return ErrorReport(error=detail)
    code = next((c for kind, c in _ERROR_CODES if isinstance(exc, kind)), "internal")
    if isinstance(exc, MemsyncError):
        message, hint = redact(exc.message), exc.hint
    elif isinstance(exc, click.ClickException):
        message, hint = exc.format_message(), "see `memsync --help`"
    else:
        message = f"internal error: {type(exc).__name__}: {redact(str(exc))}"
        hint = _INTERNAL_HINT
    detail = ErrorDetail(code=code, message=message, hint=hint, exit_code=exit_code)
    if isinstance(exc, ConfigError):
        problems = [
            ErrorProblem(location=p.location, line=p.line, message=p.message) for p in exc.problems
        ]
        detail = detail.model_copy(update={"source": exc.source, "problems": problems})
    if isinstance(exc, StateDirError):
        detail = detail.model_copy(update={"path": exc.path})
    return ErrorReport(error=detail)


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
    except (KeyboardInterrupt, click.exceptions.Abort) as exc:
        click.echo("memsync: interrupted", err=True)
        code, failure = EXIT_INTERRUPTED, exc
    except click.exceptions.Exit as exc:
        code = exc.exit_code
    except click.ClickException as exc:
        exc.show()
        code = EXIT_USAGE if isinstance(exc, click.UsageError) else exc.exit_code
        failure = exc
    except Exception as exc:
        failure = app.translate(exc)
        code = render_error(failure, debug)
    if failure is not None and as_json and not emitted():
        click.echo(error_document(failure, code).model_dump_json())
    sys.stdout.flush()
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
