"""The frozen settings the core consumes, converted from the validated pydantic `Config`.

The core never sees pydantic models: `settings_from` turns a `Config` into these plain
values once (at start-up and on reload), with every default already applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from memsync.config.schema import Config, Root
from memsync.config.secrets import SecretRef


@dataclass(frozen=True)
class RootSettings:
    """One configured memory root and how it syncs."""

    name: str
    path: Path
    branch: str | None  # None: the checked-out branch
    max_file_size: int  # bytes
    watch: bool
    sync_enabled: bool
    remote: str
    interval: timedelta
    push: bool
    autocommit: bool
    timeout: timedelta
    events: str | None = None  # hub SSE URL that triggers an immediate sync
    events_token: SecretRef | None = None


@dataclass(frozen=True)
class Settings:
    """Everything the daemon and the one-shot commands need from the configuration."""

    state_dir: Path
    control_socket: Path
    roots: tuple[RootSettings, ...]
    config_path: Path | None
    http_listen: str | None = None

    def root(self, name: str) -> RootSettings | None:
        """The root called `name`, or None."""
        return next((root for root in self.roots if root.name == name), None)


def root_settings(name: str, root: Root) -> RootSettings:
    """Convert one validated root."""
    sync = root.sync
    return RootSettings(
        name=name,
        path=root.path,
        branch=root.branch,
        max_file_size=root.max_file_size,
        watch=root.watch,
        sync_enabled=sync.enabled,
        remote=sync.remote,
        interval=sync.interval,
        push=sync.push,
        autocommit=sync.autocommit,
        timeout=sync.timeout,
        events=sync.events,
        events_token=sync.events_token,
    )


def settings_from(config: Config, config_path: Path | None) -> Settings:
    """Convert a validated Config; roots keep their order in the file."""
    return Settings(
        state_dir=config.state_dir,
        control_socket=config.control_socket,
        roots=tuple(root_settings(name, root) for name, root in config.roots.items()),
        config_path=config_path,
        http_listen=config.http.listen if config.http else None,
    )
