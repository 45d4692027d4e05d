"""What the command line's parts share without click: the app context (the configuration,
the state dir), exit codes, logging, and output (`echo`, the JSON documents).

Click-free, so that `status` and `sync-now` can run without click (`cli.plain`); `cli.kit` adds
the click parts (the lazy command group, the JSON error document).
"""

from __future__ import annotations

import codecs
import functools
import json
import sys
from collections.abc import Mapping
from pathlib import Path

from memsync.config.paths import StatePaths, find_config_path, read_config, recall, remember
from memsync.config.statedir import as_state_dir_error, check_state_dir, ensure_state_dir
from memsync.errors import ConfigError
from memsync.lazylog import DEBUG, WARNING, when_loaded
from memsync.values import value

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any, Protocol

    from memsync.config.model import Settings
    from memsync.logsetup import LogFormat

    class JsonModel(Protocol):
        """What `emit` prints: a wire model (pydantic, but not imported for it)."""

        def model_dump_json(self, *, indent: int | None = None) -> str: ...

else:
    JsonModel = object  # a protocol for the type checker only: nothing checks it at run time

EXIT_OK, EXIT_VERDICT, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

# Commands that write under the state dir (it is created, 0700, before they run) and those
# that only read it (it is checked, never created). Either way an unusable state dir is a
# configuration error before the command starts, not an OSError in the middle of it.
WRITES_STATE = frozenset(
    {"sync-now", "views pull", "run", "cycle prune", "cycle insight", "pause", "resume"}
)
READS_STATE = frozenset({"status"})

_emitted = False


def setup_logging(debug: bool, log_format: LogFormat = "text") -> None:
    """memsync's messages, and those of the libraries it runs (aiohttp logs a malformed
    request's header lines), go to stderr through one redacting handler
    (`logsetup.configure`), from the moment `logging` loads (`lazylog`: a command that
    writes no record never loads it)."""

    def configure() -> None:
        from memsync.logsetup import configure  # noqa: PLC0415 - with `logging`

        configure(debug, log_format)

    when_loaded(configure, DEBUG if debug else WARNING)


def _use_format(log_format: LogFormat) -> None:
    from memsync.logsetup import use_format  # noqa: PLC0415 - with `logging`

    use_format(log_format)


@value(frozen=False)
class App:
    """The options every command shares (click's context object), and what they load."""

    config_path: str | None = None
    debug: bool = False
    state_dir: Path | None = None  # the loaded config's, once a command loaded it
    log_format: LogFormat | None = None  # --log-format; None: the config's `log.format`
    command: str | None = None  # the running command; None: click's context names it

    def settings(self) -> Settings:
        """The configuration; for the commands above, with the state dir made sure of."""
        from memsync.config import settingsmemo  # noqa: PLC0415

        path = self._config_file()
        raw = read_config(path)
        settings = settingsmemo.recall(path, raw)  # these bytes loaded before: no schema
        if settings is None:
            from memsync.config.load import load_config_bytes  # noqa: PLC0415 - pydantic
            from memsync.config.model import settings_from  # noqa: PLC0415

            settings = settings_from(load_config_bytes(raw, path), path)
            settingsmemo.remember(path, raw, settings)
        self.state_dir = settings.state_dir
        if self.log_format is None and settings.log_format != "text":
            when_loaded(functools.partial(_use_format, settings.log_format))  # the line's wins
        self._check_state_dir(settings.state_dir)
        remember(path, raw, StatePaths(settings.state_dir, settings.control_socket))
        return settings

    def known_paths(self) -> StatePaths | None:
        """Where the state dir and the control socket are, without loading the schema: when
        the configuration file's current bytes loaded cleanly before (`config.paths`), with
        the state dir checked as `settings` would; None when that is not known."""
        found = recall(self._config_file())
        if found is not None:
            self.state_dir = found.state_dir
            self._check_state_dir(found.state_dir)
        return found

    def config_file(self) -> Path:
        """The configuration file this command reads (ConfigError when there is none)."""
        return self._config_file()

    def _config_file(self) -> Path:
        path = find_config_path(self.config_path)
        if path is None:
            raise ConfigError(
                "no configuration file found",
                hint="write one for your memory roots with `memsync config init`, "
                "or pass --config PATH",
            )
        return path

    def _check_state_dir(self, state_dir: Path) -> None:
        command = self.command if self.command is not None else _command_name()
        if command in WRITES_STATE:
            ensure_state_dir(state_dir)
        elif command in READS_STATE:
            check_state_dir(state_dir)

    def translate(self, exc: Exception) -> Exception:
        """An OSError about the state dir, raised while a command ran, as the configuration
        error it is; any other exception unchanged."""
        if self.state_dir is None:
            return exc
        return as_state_dir_error(exc, self.state_dir) or exc


def _command_name() -> str:
    """`sync-now`, `views pull`, `cycle insight`: the running command below `memsync`, from
    click's context (none when click is not loaded). A cycle's kind is an argument, not a
    subcommand, but names what it runs, as the plain form (`cli.plain`) names it."""
    click = sys.modules.get("click")
    ctx = click.get_current_context(silent=True) if click is not None else None
    names: list[str] = []
    if ctx is not None and ctx.info_name == "cycle" and isinstance(ctx.params.get("kind"), str):
        names.append(ctx.params["kind"])
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


def echo(text: str) -> None:
    """Print one line on stdout, as `click.echo` prints it. Written directly when that is
    the same (standard output's own text stream, not ASCII, and no escape character that
    click would strip when stdout is not a terminal); else by click itself."""
    out = sys.stdout
    if out is not None and "\x1b" not in text and _plain(out):
        out.write(text + "\n")
        out.flush()
        return
    import click  # noqa: PLC0415 - what click decides, click does

    click.echo(text)


def _plain(stream: Any) -> bool:
    """Whether click would write to `stream` as it is (`click._compat.get_text_stdout`)."""
    encoding, errors = getattr(stream, "encoding", None), getattr(stream, "errors", None)
    if not isinstance(encoding, str) or not isinstance(errors, str):
        return False
    try:
        return codecs.lookup(encoding).name != "ascii"
    except LookupError:
        return False


def emit(model: JsonModel) -> None:
    """Print exactly one JSON document on stdout."""
    global _emitted  # noqa: PLW0603 - one process runs one command
    echo(model.model_dump_json(indent=None))
    _emitted = True


def emit_document(document: Mapping[str, Any]) -> None:
    """Print exactly one JSON document on stdout, written as `emit` writes a wire model
    holding the same values (compact, UTF-8 unescaped)."""
    global _emitted  # noqa: PLW0603 - one process runs one command
    echo(json.dumps(document, ensure_ascii=False, separators=(",", ":")))
    _emitted = True


def emitted() -> bool:
    """Whether this command already printed its JSON document."""
    return _emitted
