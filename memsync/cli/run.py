"""`memsync run`: the daemon in the foreground (what systemd starts), loaded lazily; the
plain `memsync [--config PATH] run` runs `daemonrun.serve` without click."""

from __future__ import annotations

import click

from memsync.cli.kit import App


@click.command()
@click.pass_obj
def run(app: App) -> int:
    """Run the daemon in the foreground: keep every root and view in step by itself.

    Reacts to local commits and edits (watch), to hub events and to its schedule; answers
    `sync-now`, `views pull` and `status` on its control socket. SIGTERM stops it after the
    running cycles finish; SIGHUP reloads the configuration (an invalid one is refused and
    the running one kept).
    """
    from memsync.cli.daemonrun import serve  # noqa: PLC0415 - the daemon stack loads there

    return serve(app)
