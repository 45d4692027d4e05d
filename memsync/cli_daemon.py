"""`memsync run`: the daemon in the foreground (what systemd starts), loaded lazily."""

from __future__ import annotations

import logging
import os
import sys

import click

from memsync.clikit import App

_PRIORITY = {"DEBUG": 7, "INFO": 6, "WARNING": 4, "ERROR": 3, "CRITICAL": 2}


class _JournalFormatter(logging.Formatter):
    """One line per event; under systemd, a `<priority>` prefix journald turns into a level."""

    def __init__(self, journald: bool) -> None:
        super().__init__()
        self.journald = journald

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(super().format(record).split("\n"))
        if self.journald:
            return f"<{_PRIORITY.get(record.levelname, 6)}>{text}"
        return f"memsync: {record.levelname} {text}"


@click.command()
@click.pass_obj
def run(app: App) -> int:
    """Run the daemon in the foreground: keep every root and view in step by itself.

    Reacts to local commits and edits (watch), to hub events and to its schedule; answers
    `sync-now`, `views pull` and `status` on its control socket. SIGTERM stops it after the
    running cycles finish; SIGHUP reloads the configuration (an invalid one is refused and
    the running one kept).
    """
    from memsync.daemon.app import run_daemon  # noqa: PLC0415 - the daemon stack loads here only

    logger = logging.getLogger("memsync")
    for handler in logger.handlers:
        handler.setFormatter(_JournalFormatter(journald="JOURNAL_STREAM" in os.environ))
    if not app.debug:
        logger.setLevel(logging.INFO)
    settings = app.settings()
    sys.stdout.flush()
    return run_daemon(settings, app.settings)
