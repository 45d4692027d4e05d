"""`memsync status` as a command, without click: through the running daemon when it serves
this configuration, else from local facts; and the argument forms `__main__` runs here
without loading click at all.

Only the plainest forms are taken (`status`, `--config PATH` or `--config=PATH` before it,
`--json` after it); anything else (another option, a repeated one, `--`, a value that looks
like an option) goes to click, which parses it as always. What runs is the same function
the click command runs (`report`), errors are worded by the same code (`cli.fail_unparsed`,
which loads click only then), and lines are printed as `click.echo` prints them
(`cliapp.echo`).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memsync import clitext
from memsync.cliapp import EXIT_OK, App, emit_document, setup_logging

if TYPE_CHECKING:
    from typing import NoReturn

COMMAND = "status"


def plain_args(args: list[str]) -> tuple[str | None, bool] | None:
    """(the `--config` value or None, whether `--json` was given) when `args` is one of the
    plain forms of `memsync status`; None for anything else (click decides)."""
    config: str | None = None
    rest = args
    if rest and rest[0].startswith("--config="):
        config, rest = rest[0].removeprefix("--config="), rest[1:]
        if not config or config.startswith("-"):
            return None
    elif rest and rest[0] == "--config":
        if len(rest) < 2 or not rest[1] or rest[1].startswith("-"):
            return None
        config, rest = rest[1], rest[2:]
    if rest == [COMMAND]:
        return config, False
    if rest == [COMMAND, "--json"]:
        return config, True
    return None


def run(config: str | None, as_json: bool) -> NoReturn:
    """What `memsync [--config PATH] status [--json]` does through click, without click."""
    setup_logging(False, "text")  # the group's callback, as click runs it
    app = App(config_path=config, command=COMMAND)
    try:
        code = report(app, as_json)
    except (KeyboardInterrupt, Exception) as exc:
        from memsync.cli import fail_unparsed  # noqa: PLC0415 - click words errors, as always

        code = fail_unparsed(exc, app, as_json=as_json)
    sys.stdout.flush()
    sys.exit(code)


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
        clitext.print_status(document)
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
