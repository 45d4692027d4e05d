"""What every command module shares: the app context, exit codes, JSON output."""

from __future__ import annotations

from dataclasses import dataclass

import click
from pydantic import BaseModel

from memsync.config import find_config_path, load_config, settings_from
from memsync.config.model import Settings
from memsync.errors import ConfigError

EXIT_OK, EXIT_VERDICT, EXIT_USAGE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


@dataclass
class App:
    config_path: str | None
    debug: bool

    def settings(self) -> Settings:
        path = find_config_path(self.config_path)
        if path is None:
            raise ConfigError(
                "no configuration file found",
                hint="write one with `memsync config sample > ~/.config/memsync/config.yaml`, "
                "or pass --config PATH",
            )
        return settings_from(load_config(path), path)


def emit(model: BaseModel) -> None:
    """Print exactly one JSON document on stdout."""
    click.echo(model.model_dump_json(indent=None))
