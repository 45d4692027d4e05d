"""How memsync's log records are written: text (for people and journald) or JSON lines
(for log shippers), always through the redacting filter.

A record may carry structured context in `extra={"memsync": {...}}`: `root`, `view`,
`event` and `fields` (a mapping). Text shows only the message; JSON shows all of it, one
object a line: `time` (RFC 3339 UTC), `level`, `logger`, `root`/`view` when known, `event`,
`message`, `fields`. Under journald (stderr is the journal's stream: `$JOURNAL_STREAM`
names stderr's device and inode, as systemd documents) text lines carry a `<priority>`
prefix and no timestamp (the journal stamps them); elsewhere they start with one.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from datetime import UTC, datetime

from memsync import lazylog
from memsync.redaction import redact_secrets

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any, Literal

    LogFormat = Literal["text", "json"]
else:
    LogFormat = str  # the type checker's literal; a plain name at run time
FORMATS: tuple[LogFormat, ...] = ("text", "json")
CONTEXT = "memsync"  # the `extra` key holding a record's structured context

_PRIORITY = {"DEBUG": 7, "INFO": 6, "WARNING": 4, "ERROR": 3, "CRITICAL": 2}
MAX_FIELD_TEXT = 4096  # a string field longer than this is cut (a log line stays bounded)
MAX_FIELD_ITEMS = 100  # items of a list or mapping field kept (the rest are counted)


def journald_stderr(environ: Mapping[str, str] | None = None, fd: int = 2) -> bool:
    """Whether `fd` is the stream systemd connected to the journal (`$JOURNAL_STREAM` is
    `DEVICE:INODE` of it); a child that inherited the variable but writes elsewhere is not."""
    value = (os.environ if environ is None else environ).get("JOURNAL_STREAM", "")
    device, _, inode = value.partition(":")
    if not device.isdigit() or not inode.isdigit():
        return False
    try:
        stat = os.fstat(fd)
    except OSError:
        return False
    return (stat.st_dev, stat.st_ino) == (int(device), int(inode))


def context(record: logging.LogRecord) -> dict[str, Any]:
    """The structured context of a record (empty when it has none)."""
    found = getattr(record, CONTEXT, None)
    return dict(found) if isinstance(found, Mapping) else {}


def redacted(value: object, depth: int = 0) -> object:
    """`value` with every string in it redacted and cut to `MAX_FIELD_TEXT` (JSON-ready)."""
    if isinstance(value, str):
        return redact_secrets(value[:MAX_FIELD_TEXT])
    if value is None or isinstance(value, bool | int | float):
        return value
    if depth > 4:
        return redact_secrets(str(value)[:MAX_FIELD_TEXT])
    if isinstance(value, Mapping):
        pairs = list(value.items())[:MAX_FIELD_ITEMS]
        return {redact_secrets(str(k)[:MAX_FIELD_TEXT]): redacted(v, depth + 1) for k, v in pairs}
    if isinstance(value, list | tuple | set | frozenset):
        items = list(value)
        kept = [redacted(v, depth + 1) for v in items[:MAX_FIELD_ITEMS]]
        return kept + (
            [f"… {len(items) - MAX_FIELD_ITEMS} more"] if len(items) > MAX_FIELD_ITEMS else []
        )
    return redact_secrets(str(value)[:MAX_FIELD_TEXT])


class TextFormatter(logging.Formatter):
    """One line per record: `<6>message` under journald, else
    `2026-12-01T16:00:00Z memsync: INFO message` (`stamp=False`: without the time)."""

    def __init__(self, *, journald: bool, stamp: bool = True) -> None:
        super().__init__()
        self.journald, self.stamp = journald, stamp

    def format(self, record: logging.LogRecord) -> str:
        text = " ".join(super().format(record).split("\n"))
        if self.journald:
            return f"<{_PRIORITY.get(record.levelname, 6)}>{text}"
        if self.stamp:
            return f"{_time(record)} memsync: {record.levelname} {text}"
        return f"memsync: {record.levelname} {text}"


class JsonFormatter(logging.Formatter):
    """One JSON object a line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        found = context(record)
        document: dict[str, Any] = {
            "time": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
        }
        for key in ("root", "view"):
            if isinstance(found.get(key), str):
                document[key] = redacted(found[key])
        document["event"] = str(found.get("event") or "log")
        document["message"] = redact_secrets(record.getMessage())
        fields = found.get("fields")
        document["fields"] = redacted(fields) if isinstance(fields, Mapping) else {}
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            document["exception"] = redact_secrets(record.exc_text)
        return json.dumps(document, ensure_ascii=False, separators=(",", ":"), default=str)


def _time(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def formatter(log_format: LogFormat, *, daemon: bool) -> logging.Formatter:
    """The formatter for `log_format`; text for a daemon is stamped unless stderr is the
    journal's, text for a one-shot command is the plain `memsync: LEVEL message`."""
    if log_format == "json":
        return JsonFormatter()
    if daemon:
        return TextFormatter(journald=journald_stderr())
    return TextFormatter(journald=False, stamp=False)


def use_format(log_format: LogFormat, *, daemon: bool = False) -> None:
    """Write memsync's (and the libraries') records in `log_format` from now on; the
    handlers and their redacting filter stay as `cli.app.setup_logging` made them."""
    chosen = formatter(log_format, daemon=daemon)
    for handler in logging.getLogger("memsync").handlers:  # the root logger shares it
        handler.setFormatter(chosen)


class _Redacting(logging.Filter):
    """Credentials out of the message and out of any traceback or stack it carries."""

    _format = logging.Formatter()

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_secrets(record.getMessage())
        record.args = ()
        if record.exc_info and not record.exc_text:
            record.exc_text = self._format.formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact_secrets(record.exc_text)
        if record.stack_info:
            record.stack_info = redact_secrets(record.stack_info)
        return True


def configure(debug: bool, log_format: LogFormat) -> None:
    """memsync's records (DEBUG and up with `debug`, else WARNING and up) and the libraries'
    (WARNING and up: the root logger) go to stderr through one redacting handler, written
    in `log_format` (`cli.app.setup_logging` runs this once `logging` loads)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format, daemon=False))
    handler.addFilter(_Redacting())
    ours = logging.getLogger("memsync")
    ours.handlers[:] = [handler]
    ours.setLevel(logging.DEBUG if debug else logging.WARNING)
    ours.propagate = False
    libraries = logging.getLogger()  # the root logger, where every library's records go
    libraries.handlers[:] = [handler]
    libraries.setLevel(logging.WARNING)


# A configuration deferred until `logging` loaded (`lazylog`) runs this module's code: when
# this module's import is what loaded `logging`, it runs now that the module is complete.
LOADED = True
lazylog.run_pending()
