"""`memsync status`: roots, views, the daemon and pending operations (loaded lazily)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from memsync import clitext
from memsync.clikit import EXIT_OK, App, emit_document


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def status(app: App, as_json: bool) -> int:
    """Show roots, views, the daemon and pending operations."""
    # Through a running daemon with a configuration known to load (`config.paths`), nothing
    # heavy is imported; otherwise the full configuration loads, with its errors, as always.
    # A daemon that serves another configuration file does not answer for this one: the
    # report is read in process and names the file that daemon serves.
    known = app.known_paths()
    config = app.config_file()
    report, other = _status_from_daemon(known.control_socket, config) if known else (None, None)
    if report is None:
        settings = app.settings()
        if known is None or known.control_socket != settings.control_socket:
            report, other = _status_from_daemon(settings.control_socket, config)
        if report is None:
            from memsync.status import status_json  # noqa: PLC0415 - git, state files

            report = status_json(settings, other_config=other)
    if as_json:
        emit_document(report)
    else:
        clitext.print_status(report)
    return EXIT_OK


def _status_from_daemon(socket: Path, config: Path) -> tuple[dict[str, Any] | None, str | None]:
    """The daemon's status document (CONTRACT §2) when the daemon serves `config`; else
    None and, when a daemon serving another file answers, that file's name."""
    from memsync.daemon.client import (  # noqa: PLC0415 - stdlib only
        DaemonUnavailable,
        call,
        serves,
    )
    from memsync.wire.shape import STATUS_REPORT, fit  # noqa: PLC0415 - stdlib only

    try:
        answer = call(socket, "GET", "/v1/status", timeout=30)
    except DaemonUnavailable:
        return None, None
    daemon = answer.get("daemon") if isinstance(answer, dict) else None
    if not serves(daemon, config):
        served = daemon.get("config") if isinstance(daemon, dict) else None
        return None, served if isinstance(served, str) and served else "unknown"
    document: dict[str, Any] | None = fit(answer, STATUS_REPORT)
    if document is None:  # another shape: the model decides (and words any error)
        from memsync.wire.cli import StatusReport  # noqa: PLC0415

        document = StatusReport.model_validate(answer).model_dump(mode="json")
    return document, None
