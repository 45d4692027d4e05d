"""`memsync cycle prune|insight ROOT`: one maintenance turn now (loaded lazily; the turn
itself is `cyclerun.turn`, which the plain form runs without click)."""

from __future__ import annotations

import click

from memsync.cli.kit import App


@click.command()
@click.argument("kind", type=click.Choice(["prune", "insight"]))
@click.argument("root")
@click.option("--force", is_flag=True, help="Run even when not due (the gate still decides).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def cycle(app: App, kind: str, root: str, force: bool, as_json: bool) -> int:
    """Run one prune or insight turn for ROOT now, through the configured role.

    The role works in its own worktree; its commit must pass the role's grants and the
    full gate before it lands. Goes through the running daemon when one is up.
    """
    from memsync.cli.cyclerun import turn  # noqa: PLC0415

    return turn(app, kind, root, force, as_json)
