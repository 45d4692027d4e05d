"""`memsync pause ROOT|VIEW [--for DURATION]` and `memsync resume ROOT|VIEW` (loaded lazily).

Through the running daemon when it serves this configuration (it writes the record, wakes
the root at `resume` or when the time runs out); without one, the record is written here
and every later `sync-now`, `views pull`, timer or restarted daemon honours it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import click

from memsync.cli.kit import EXIT_OK, App, emit
from memsync.errors import UsageError

if TYPE_CHECKING:
    from memsync.wire.pause import PauseReport

_KIND = click.Choice(["root", "view"])


@click.command()
@click.argument("name", metavar="ROOT|VIEW")
@click.option(
    "--for", "duration", metavar="DURATION", help="Resume by itself after this long (e.g. 2h)."
)
@click.option("--kind", type=_KIND, help="Whether NAME is a root or a view (when both exist).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def pause(app: App, name: str, duration: str | None, kind: str | None, as_json: bool) -> int:
    """Hold a root or view: nothing syncs or pulls it until `resume` (or --for runs out).

    The pause is kept in the state dir: it survives a daemon restart, and `sync-now` on a
    paused root answers `paused` (exit 0).
    """
    from memsync import timefmt  # noqa: PLC0415
    from memsync.config.units import parse_duration  # noqa: PLC0415
    from memsync.daemon.client import DaemonUnavailable, call_serving  # noqa: PLC0415
    from memsync.daemon.pause import report, resolve  # noqa: PLC0415
    from memsync.roots import pause as records  # noqa: PLC0415
    from memsync.wire.pause import PauseReport, PauseRequest  # noqa: PLC0415

    settings = app.settings()
    chosen = resolve(
        [r.name for r in settings.roots], [v.name for v in settings.views], name, _kind(kind)
    )
    until = None
    if duration is not None:
        try:
            span = parse_duration(duration)
        except ValueError as exc:
            raise UsageError(f"--for: {exc}", hint="e.g. --for 30m or --for 2h") from exc
        if not span or span > records.MAX_DURATION:
            raise UsageError(
                f"--for {duration}: a pause lasts more than 0s and at most 3650d",
                hint="leave --for out to pause until `memsync resume`",
            )
        until = records.until_after(span, timefmt.now())
    body = PauseRequest(name=name, kind=chosen, until=until).model_dump()
    try:
        answer = call_serving(
            settings.control_socket, settings.config_path, "POST", "/v1/pause", body
        )
        done = PauseReport.model_validate(answer)
    except DaemonUnavailable:
        held = records.pause(settings.state_dir, chosen, name, until)
        done = report(chosen, name, held)
    _show(done, as_json)
    return EXIT_OK


@click.command()
@click.argument("name", metavar="ROOT|VIEW")
@click.option("--kind", type=_KIND, help="Whether NAME is a root or a view (when both exist).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def resume(app: App, name: str, kind: str | None, as_json: bool) -> int:
    """Let a paused root or view run again (the running daemon syncs it at once)."""
    from memsync.daemon.client import DaemonUnavailable, call_serving  # noqa: PLC0415
    from memsync.daemon.pause import report, resolve  # noqa: PLC0415
    from memsync.roots import pause as records  # noqa: PLC0415
    from memsync.wire.pause import PauseReport, ResumeRequest  # noqa: PLC0415

    settings = app.settings()
    chosen = resolve(
        [r.name for r in settings.roots], [v.name for v in settings.views], name, _kind(kind)
    )
    try:
        answer = call_serving(
            settings.control_socket,
            settings.config_path,
            "POST",
            "/v1/resume",
            ResumeRequest(name=name, kind=chosen).model_dump(),
        )
        done = PauseReport.model_validate(answer)
    except DaemonUnavailable:
        held = records.resume(settings.state_dir, chosen, name)
        done = report(chosen, name, None, resumed=held is not None)
    _show(done, as_json)
    return EXIT_OK


def _kind(kind: str | None) -> Literal["root", "view"] | None:
    return "root" if kind == "root" else "view" if kind == "view" else None


def _show(done: PauseReport, as_json: bool) -> None:
    if as_json:
        emit(done)
    else:
        click.echo(f"{done.kind} {done.name}: {done.message}")
