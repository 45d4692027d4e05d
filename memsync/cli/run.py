"""`memsync run`: the daemon in the foreground (what systemd starts), loaded lazily."""

from __future__ import annotations

import logging
import sys

import click

from memsync.cli.kit import App
from memsync.logsetup import use_format


@click.command()
@click.pass_obj
def run(app: App) -> int:
    """Run the daemon in the foreground: keep every root and view in step by itself.

    Reacts to local commits and edits (watch), to hub events and to its schedule; answers
    `sync-now`, `views pull` and `status` on its control socket. SIGTERM stops it after the
    running cycles finish; SIGHUP reloads the configuration (an invalid one is refused and
    the running one kept).
    """
    from memsync.daemon.app import run_daemon  # noqa: PLC0415 - the daemon stack loads here only
    from memsync.daemon.configcheck import daemon_settings  # noqa: PLC0415

    settings = daemon_settings(app)  # the schema in a child: no pydantic held at rest
    use_format(app.log_format or settings.log_format, daemon=True)
    if not app.debug:
        logging.getLogger("memsync").setLevel(logging.INFO)
    sys.stdout.flush()
    return run_daemon(settings, lambda: daemon_settings(app))
