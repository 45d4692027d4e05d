"""`memsync status`: roots, views, the daemon and pending operations (loaded lazily; the
plain forms run without click at all: `cli.plain`)."""

from __future__ import annotations

import click

from memsync.cli import statusrun
from memsync.cli.kit import App


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def status(app: App, as_json: bool) -> int:
    """Show roots, views, the daemon and pending operations."""
    return statusrun.report(app, as_json)
