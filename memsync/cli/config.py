"""`memsync config validate|init|sample`: check or create a configuration file (loaded
lazily)."""

from __future__ import annotations

from pathlib import Path

import click

from memsync.cli.kit import EXIT_OK, App, emit, emit_document
from memsync.config.paths import find_config_path
from memsync.errors import ConfigError, StateDirError, UsageError


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
