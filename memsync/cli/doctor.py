"""`memsync doctor`: the preflight checks (loaded lazily)."""

from __future__ import annotations

import click

from memsync.cli import text
from memsync.cli.kit import EXIT_OK, EXIT_USAGE, EXIT_VERDICT, App, emit


@click.command()
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
        text.print_diagnosis(found)
    if found.config_error:
        return EXIT_USAGE
    return EXIT_OK if found.ok else EXIT_VERDICT
