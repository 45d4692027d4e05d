"""`memsync cycle prune|insight ROOT`: one maintenance turn now (loaded lazily)."""

from __future__ import annotations

import click

from memsync.cli.kit import EXIT_OK, EXIT_VERDICT, App, emit
from memsync.errors import UsageError
from memsync.wire.cli import CycleReport


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
    from memsync.daemon.client import DaemonUnavailable, call_serving  # noqa: PLC0415
    from memsync.wire.requests import CycleRequest  # noqa: PLC0415

    settings = app.settings()
    if settings.root(root) is None:
        known = ", ".join(r.name for r in settings.roots) or "none"
        raise UsageError(f"unknown root {root!r}", hint=f"configured roots: {known}")
    try:
        answer = call_serving(
            settings.control_socket,
            settings.config_path,
            "POST",
            f"/v1/cycles/{kind}",
            CycleRequest(root=root, force=force).document(),
        )
        report = CycleReport.model_validate(answer)
    except DaemonUnavailable:
        from memsync.cycles.runner import cycle_now  # noqa: PLC0415 - the role stack loads here

        report = cycle_now(settings, root, kind, force=force).model()
    if as_json:
        emit(report)
    else:
        click.echo(f"{report.root:<16} {report.cycle:<8} {report.status:<8} {report.message}")
        for p in report.problems:
            click.echo(f"{'':<16}   {p.code:<20} {p.path or '-'}: {p.message}")
    return EXIT_OK if report.status in ("landed", "noop", "not-due") else EXIT_VERDICT
