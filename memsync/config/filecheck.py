"""`memsync config validate`: a configuration file through the schema, every problem at once
(a `ConfigError`), and what is valid but will stop this user's commands (a warning).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memsync.errors import StateDirError
from memsync.values import value

if TYPE_CHECKING:
    from memsync.config.model import Settings


@value
class FileCheck:
    """A valid file's settings and the warnings about it."""

    settings: Settings
    warnings: tuple[str, ...]


def check_config_file(path: Path) -> FileCheck:
    """Load `path` through the schema (ConfigError with every problem when it is not
    valid); a state dir this user cannot create or write is a warning, not a problem: the
    daemon may run as another user."""
    from memsync.config.load import load_config  # noqa: PLC0415 - pydantic
    from memsync.config.model import settings_from  # noqa: PLC0415
    from memsync.config.statedir import check_state_dir  # noqa: PLC0415

    settings = settings_from(load_config(path), path)
    warnings: list[str] = []
    try:
        check_state_dir(settings.state_dir)
    except StateDirError as exc:
        warnings.append(f"{exc.message} (memsync commands run as this user stop with exit 2)")
    return FileCheck(settings, tuple(warnings))
