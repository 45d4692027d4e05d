"""`memsync status` as a command, without click: through the running daemon when it serves
this configuration, else from local facts. The click command (`cli.status`) and the plain
forms `__main__` runs without click (`cli.plain`) both run `report` here.
"""

from __future__ import annotations

from pathlib import Path

from memsync.cli import text
from memsync.cli.app import EXIT_OK, App, emit_document

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any


def report(app: App, as_json: bool) -> int:
    """Print the status report (CONTRACT §2): the document, or the table."""
    # Through a running daemon with a configuration known to load (`config.paths`), nothing
    # heavy is imported; otherwise the full configuration loads, with its errors, as always.
    # A daemon that serves another configuration file does not answer for this one: the
    # report is read in process and names the file that daemon serves.
    known = app.known_paths()
    config = app.config_file()
    document, other = from_daemon(known.control_socket, config) if known else (None, None)
    if document is None:
        settings = app.settings()
        if known is None or known.control_socket != settings.control_socket:
            document, other = from_daemon(settings.control_socket, config)
        if document is None:
            from memsync.status import status_json  # noqa: PLC0415 - git, state files

            document = status_json(settings, other_config=other)
    if as_json:
        emit_document(document)
    else:
        text.print_status(document)
    return EXIT_OK


def from_daemon(socket: Path, config: Path) -> tuple[dict[str, Any] | None, str | None]:
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
