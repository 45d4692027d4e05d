"""`memsync config validate|init|sample`: check or create a configuration file (loaded
lazily)."""

from __future__ import annotations

from pathlib import Path

import click

from memsync.cli.kit import EXIT_OK, App, emit, emit_document
from memsync.config.paths import find_config_path
from memsync.errors import ConfigError


@click.group()
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
    from memsync.config.filecheck import check_config_file  # noqa: PLC0415
    from memsync.wire.cli import ConfigValidateReport  # noqa: PLC0415

    target = path or find_config_path(app.config_path)
    if target is None:
        raise ConfigError("no configuration file found", hint="pass the file's PATH")
    checked = check_config_file(target)
    settings, warnings = checked.settings, list(checked.warnings)
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

    done = starter.start_config(
        root_options, out=out, config_path=app.config_path, force=force, environ=os.environ
    )
    target, replaced, roots = done.path, done.replaced, done.roots
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
