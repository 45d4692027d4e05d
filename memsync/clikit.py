"""What every command module shares: the app context, exit codes, JSON output."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import click
from pydantic import BaseModel

from memsync.config import find_config_path, load_config, settings_from
from memsync.config.model import Settings
from memsync.config.statedir import as_state_dir_error, check_state_dir, ensure_state_dir
from memsync.errors import ConfigError

EXIT_OK, EXIT_VERDICT, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

# Commands that write under the state dir (it is created, 0700, before they run) and those
# that only read it (it is checked, never created). Either way an unusable state dir is a
# configuration error before the command starts, not an OSError in the middle of it.
WRITES_STATE = frozenset({"sync-now", "views pull", "run", "cycle prune", "cycle insight"})
READS_STATE = frozenset({"status"})

_emitted = False


@dataclass
class App:
    config_path: str | None = None
    debug: bool = False
    state_dir: Path | None = None  # the loaded config's, once a command loaded it

    def settings(self) -> Settings:
        """The configuration; for the commands above, with the state dir made sure of."""
        path = find_config_path(self.config_path)
        if path is None:
            raise ConfigError(
                "no configuration file found",
                hint="write one with `memsync config sample > ~/.config/memsync/config.yaml`, "
                "or pass --config PATH",
            )
        settings = settings_from(load_config(path), path)
        self.state_dir = settings.state_dir
        command = _command_name()
        if command in WRITES_STATE:
            ensure_state_dir(settings.state_dir)
        elif command in READS_STATE:
            check_state_dir(settings.state_dir)
        return settings

    def translate(self, exc: Exception) -> Exception:
        """An OSError about the state dir, raised while a command ran, as the configuration
        error it is; any other exception unchanged."""
        if self.state_dir is None:
            return exc
        return as_state_dir_error(exc, self.state_dir) or exc


def _command_name() -> str:
    """`sync-now`, `views pull`: the running command below `memsync`."""
    ctx = click.get_current_context(silent=True)
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


def emit(model: BaseModel) -> None:
    """Print exactly one JSON document on stdout."""
    global _emitted  # noqa: PLW0603 - one process runs one command
    click.echo(model.model_dump_json(indent=None))
    _emitted = True


def emitted() -> bool:
    """Whether this command already printed its JSON document."""
    return _emitted
