"""The command line: parse argv, call one function, render the result or the error, exit.

All wording a person reads about an error is produced here, by `render_error`. Exit codes
(CONTRACT §1): 0 ok, 1 verdict not ok, 2 usage or configuration, 3 internal, 130 interrupted.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import click

from memsync import __version__, clitext
from memsync.clikit import (
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_VERDICT,
    INTERNAL_HINT,
    App,
    LazyGroup,
    emit,
    emit_document,
    emitted,
    error_document,
    setup_logging,
)
from memsync.config.paths import find_config_path
from memsync.errors import (
    ConfigError,
    GitError,
    MemsyncError,
    ProblemError,
    StateDirError,
    UsageError,
)
from memsync.logsetup import FORMATS, LogFormat
from memsync.redaction import redact

if TYPE_CHECKING:
    from memsync.config.model import RootSettings, Settings
    from memsync.roots.cycle import SyncOptions
    from memsync.roots.result import SyncResult

# The heavy parts (pydantic, the config schema, git, validators) are imported inside the
# commands that need them: `--version`, `--help` and `status` through a running daemon
# never load them (tests/e2e/test_startup.py).


class _Commands(LazyGroup):
    LAZY: ClassVar[dict[str, tuple[str, str]]] = {
        "keys": ("memsync.cli_views", "Ed25519 signing keys for view manifests."),
        "views": (
            "memsync.cli_views",
            "Build, publish, verify and pull shared views (signed memory packages).",
        ),
        "hub": (
            "memsync.cli_hub",
            "Run a memsync hub: signed view revisions, tokens, change events.",
        ),
        "run": (
            "memsync.cli_daemon",
            "Run the daemon in the foreground: keep every root and view in step by itself.",
        ),
        "pause": (
            "memsync.cli_pause",
            "Hold a root or view: nothing syncs or pulls it until `resume` (or --for runs out).",
        ),
        "resume": (
            "memsync.cli_pause",
            "Let a paused root or view run again (the running daemon syncs it at once).",
        ),
        "cycle": (
            "memsync.cli_cycle",
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
    from memsync.progress import for_terminal  # noqa: PLC0415
    from memsync.roots.create import init_root  # noqa: PLC0415
    from memsync.wire.cli import InitReport  # noqa: PLC0415

    credentials = None
    if upstream is not None and find_config_path(app.config_path) is not None:
        with contextlib.suppress(ConfigError):
            target = path.expanduser().absolute()
            for root in app.settings().roots:
                if root.path.expanduser().absolute() == target:
                    credentials = root.git_credentials
    with for_terminal(as_json) as progress:
        done = init_root(
            path, upstream=upstream, branch=branch, credentials=credentials, progress=progress
        )
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
    from memsync.config.schema import default_state_dir  # noqa: PLC0415
    from memsync.roots.disktree import disk_tree_view  # noqa: PLC0415
    from memsync.roots.repoconfig import refusing_problems, repo_config_problems  # noqa: PLC0415
    from memsync.transports.git import Git  # noqa: PLC0415
    from memsync.validators.cache import STATE_CACHE_DIR, open_persistent  # noqa: PLC0415
    from memsync.validators.gate import validate_tree  # noqa: PLC0415
    from memsync.validators.policy import SyncPolicy  # noqa: PLC0415
    from memsync.validators.rightmemory import default_graph_validator  # noqa: PLC0415
    from memsync.wire.cli import ProblemModel, ValidateReport  # noqa: PLC0415

    policy = SyncPolicy()
    if Git(path).git_dir() is not None and refusing_problems(Git(path)):
        # git does not run on this root: say why (every key), and read nothing through it.
        refused = repo_config_problems(path)
        out = ValidateReport(
            valid=False,
            root=str(path.absolute()),
            rev=rev,
            files=0,
            items=0,
            problems=[ProblemModel.of(p) for p in refused],
            tracked=0,
            memory_files=0,
        )
        if as_json:
            emit(out)
        else:
            clitext.print_validation(f"{path} at {rev}" if rev else str(path), out)
        return EXIT_VERDICT
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
    # Files parsed by an earlier run (same bytes) are not parsed again; the store is only a
    # cache: damaged or foreign entries are ignored, and it may be deleted at any time.
    state_dir = default_state_dir()
    with contextlib.suppress(OSError):  # no usable state dir: the cache stays in memory
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    cache = open_persistent(state_dir / STATE_CACHE_DIR, records=True)
    try:
        graph = default_graph_validator(enforce_capacity=True, cache=cache)
        report = validate_tree(tree, policy, graph)
    finally:
        cache.close()
    # The repository's own config is the root's too, whichever commit is checked.
    problems = [*report.problems, *repo_config_problems(path)]
    out = ValidateReport(
        valid=not problems,
        root=str(path.absolute()),
        rev=rev,
        files=report.files,
        items=report.items,
        problems=[ProblemModel.of(p) for p in problems],
        tracked=len(tree.entries),
        memory_files=report.files,
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
    from dataclasses import replace  # noqa: PLC0415

    from memsync.progress import for_terminal  # noqa: PLC0415
    from memsync.roots.cycle import SyncOptions, sync_root  # noqa: PLC0415
    from memsync.roots.result import HELD  # noqa: PLC0415

    settings = app.settings()
    chosen = _choose(settings, roots)
    options = SyncOptions(
        accept_rewrite=accept_rewrite, no_push=no_push, dry_run=dry_run, wait=None
    )
    results = _sync_through_daemon(settings, roots, options)
    if results is None:  # no daemon: run the cycles in this process (progress on a terminal)
        from memsync.validators.cache import STATE_CACHE_DIR, open_records  # noqa: PLC0415
        from memsync.validators.rightmemory import default_graph_validator  # noqa: PLC0415

        # The lineage and shape records of each root's last validated tree: a fresh process
        # joins and checks only the files that changed since (a cache: damaged or foreign
        # records are ignored).
        cache = open_records(settings.state_dir / STATE_CACHE_DIR)
        graph = default_graph_validator(cache=cache)
        try:
            with for_terminal(as_json) as progress:
                shown = replace(options, progress=progress)
                results = [sync_root(r, settings.state_dir, shown, graph) for r in chosen]
        finally:
            cache.close()
    if as_json:
        from memsync.wire.cli import SyncReport, SyncResultModel  # noqa: PLC0415 - pydantic

        emit(SyncReport(results=[SyncResultModel.of(r) for r in results]))
    else:
        for r in results:
            clitext.print_result(r)
    # A paused root is held because the operator asked for it: not a failure (exit 0).
    return EXIT_OK if all(r.ok or r.status in HELD for r in results) else EXIT_VERDICT


def _sync_through_daemon(
    settings: Settings, roots: Sequence[str], options: SyncOptions
) -> list[SyncResult] | None:
    """The running daemon's verdicts for these roots, or None when no daemon answers."""
    from memsync.daemon.client import DaemonUnavailable, call_serving  # noqa: PLC0415

    body = {
        "roots": list(roots),
        "accept_rewrite": options.accept_rewrite,
        "dry_run": options.dry_run,
        "no_push": options.no_push,
    }
    try:
        answer = call_serving(
            settings.control_socket, settings.config_path, "POST", "/v1/sync", body
        )
    except DaemonUnavailable:
        return None
    from memsync.wire.cli import SyncReport  # noqa: PLC0415 - pydantic, for the answer only

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
    # Through a running daemon with a configuration known to load (`config.paths`), nothing
    # heavy is imported; otherwise the full configuration loads, with its errors, as always.
    # A daemon that serves another configuration file does not answer for this one: the
    # report is read in process and names the file that daemon serves.
    known = app.known_paths()
    config = app.config_file()
    report, other = _status_from_daemon(known.control_socket, config) if known else (None, None)
    if report is None:
        settings = app.settings()
        if known is None or known.control_socket != settings.control_socket:
            report, other = _status_from_daemon(settings.control_socket, config)
        if report is None:
            from memsync.status import status_json  # noqa: PLC0415 - git, state files

            report = status_json(settings, other_config=other)
    if as_json:
        emit_document(report)
    else:
        clitext.print_status(report)
    return EXIT_OK


def _status_from_daemon(socket: Path, config: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The daemon's status document (CONTRACT §2) when the daemon serves `config`; else
    None and, when a daemon serving another file answers, that file's name."""
    from memsync.daemon.client import (  # noqa: PLC0415 - stdlib only
        DaemonUnavailable,
        call,
        serves,
    )
    from memsync.wire.shape import STATUS_REPORT, fit  # noqa: PLC0415 - stdlib only

    try:
        answer = call(socket, "GET", "/v1/status", timeout=30)
    except DaemonUnavailable:
        return None, None
    daemon = answer.get("daemon") if isinstance(answer, dict) else None
    if not serves(daemon, config):
        served = daemon.get("config") if isinstance(daemon, dict) else None
        return None, served if isinstance(served, str) and served else "unknown"
    document: dict[str, Any] | None = fit(answer, STATUS_REPORT)
    if document is None:  # another shape: the model decides (and words any error)
        from memsync.wire.cli import StatusReport  # noqa: PLC0415

        document = StatusReport.model_validate(answer).model_dump(mode="json")
    return document, None


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
    from memsync.config.load import load_config  # noqa: PLC0415
    from memsync.config.model import settings_from  # noqa: PLC0415
    from memsync.config.statedir import check_state_dir  # noqa: PLC0415
    from memsync.wire.cli import ConfigValidateReport  # noqa: PLC0415

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


@config.command("init")
@click.option(
    "--root",
    "root_options",
    multiple=True,
    metavar="NAME=PATH",
    help="A memory root to configure (repeatable). Default: ~/.rightmemory when it is one.",
)
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    metavar="PATH",
    help="Where to write (default: --config, $MEMSYNC_CONFIG, "
    "else $XDG_CONFIG_HOME/memsync/config.yaml).",
)
@click.option("--force", is_flag=True, help="Replace an existing config file.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def config_init(
    app: App, root_options: tuple[str, ...], out: Path | None, force: bool, as_json: bool
) -> int:
    """Write a minimal configuration, one `memsync doctor` passes, for the roots given.

    Each root's sync remote is its branch's tracking remote, else `origin`, else its only
    remote (sync is written off when it has none); the state dir and the control socket
    are written out. Never replaces an existing file without --force, nor a symbolic link.
    """
    import os  # noqa: PLC0415

    from memsync.config import starter  # noqa: PLC0415
    from memsync.config.paths import CONFIG_ENV  # noqa: PLC0415
    from memsync.config.schema import default_state_dir  # noqa: PLC0415

    given = [starter.parse_root_option(text) for text in root_options]
    home = Path.home()
    chosen = given or starter.found_roots(home)
    if not chosen:
        raise UsageError(
            "no memory root given, and none found at ~/.rightmemory",
            hint="pass --root NAME=PATH, or create one with `memsync init ~/.rightmemory`",
        )
    roots = [starter.describe_root(name, path) for name, path in chosen]
    state_dir = default_state_dir()
    text = starter.render(state_dir, starter.runtime_socket(os.environ, state_dir), roots)
    explicit = out or app.config_path or os.environ.get(CONFIG_ENV) or None
    xdg = os.environ.get("XDG_CONFIG_HOME", "")
    config_home = Path(xdg) if xdg and Path(xdg).is_absolute() else home / ".config"
    target = Path(explicit).expanduser() if explicit else config_home / "memsync" / "config.yaml"
    target = target.absolute()
    replaced = starter.write_config(
        target, text, force=force, own_dir=target.parent == config_home / "memsync"
    )
    if as_json:
        emit_document(
            {
                "path": str(target),
                "replaced": replaced,
                "roots": [
                    {
                        "root": r.name,
                        "path": str(r.path),
                        "remote": r.remote,
                        "sync": bool(r.remote),
                    }
                    for r in roots
                ],
            }
        )
    else:
        click.echo(
            f"wrote {starter.shown(str(target))} ({len(roots)} root(s): "
            f"{', '.join(r.name for r in roots)})"
        )
        for root in roots:
            if root.note:
                click.echo(
                    f"memsync: note: roots.{root.name}: sync is off: {root.note} "
                    f"(add a remote, then set sync.enabled: true)",
                    err=True,
                )
        click.echo("next: memsync doctor, then memsync run (or the systemd unit)")
    return EXIT_OK


@config.command("sample")
def config_sample() -> int:
    """Print a commented sample configuration that validates."""
    from memsync.config.sample import SAMPLE  # noqa: PLC0415

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
    from memsync.wire.cli import DoctorCheck, DoctorReport  # noqa: PLC0415

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
