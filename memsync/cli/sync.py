"""`memsync sync-now [ROOT]...`: one sync cycle per root, through the running daemon when
it serves this configuration, else in this process (loaded lazily: a timer's `sync-now`
imports no other command; the plain forms run without click at all: `cli.plain`)."""

from __future__ import annotations

import click

from memsync.cli import syncrun
from memsync.cli.kit import App


@click.command("sync-now")
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
    return syncrun.sync_now(app, roots, as_json, accept_rewrite, no_push, dry_run)
