"""The frozen settings the core consumes, converted from the validated pydantic `Config`.

The core never sees pydantic models: `settings_from` turns a `Config` into these plain
values once (at start-up and on reload), with every default already applied. Importing
this module imports no pydantic: a command that finds its settings in the memo
(`config.settingsmemo`) never builds the schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path

from memsync.values import field, replace, value

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:  # the schema (pydantic) is imported by the code that validates a file
    from typing import Literal

    from memsync.config.schema import CommandRole, Config, Hook, Hub, OpenAIRole, Root, View
    from memsync.config.sections import (  # made by the converters below when a file has them
        HookSettings,
        HubSettings,
        PublishSettings,
        RoleSettings,
        SourceSettings,
        ViewSettings,
    )
    from memsync.secrets import SecretRef
    from memsync.transports.rootkeys import CommitKey, GitCredentials


@value
class AdmissionSettings:
    """`roots.*.admission`: `signed` admits only commits signed by one of `signers`
    (OpenSSH public key lines, or references to files of them, read at each sync)."""

    require: Literal["off", "signed"]
    signers: tuple[str | SecretRef, ...]


@value
class RootSettings:
    """One configured memory root and how it syncs: `roots.<name>` of the schema, every
    field given by `root_settings` (no defaults here: the schema's are the only ones; code
    that wants a root without a file converts `schema.Root(path=...)`, see `default_root`)."""

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
    events: str | None  # hub SSE URL that triggers an immediate sync
    events_token: SecretRef | None
    notify_hub: str | None  # after a push, POST {hub}/v1/roots/{notify_root}/notify
    notify_token: SecretRef | None
    notify_root: str | None
    prune_enabled: bool
    insight_enabled: bool
    insight_threshold: int  # insight.trigger_points
    publish: tuple[PublishSettings, ...]
    prune_role: str
    prune_generation_commits: int
    prune_revival_grace: int
    prune_check_every: timedelta
    insight_role: str
    insight_points_per_commit: int
    insight_check_every: timedelta
    git_credentials: GitCredentials | None  # sync.https / sync.ssh, by reference
    repair_role: str | None  # roots.*.repair.role; None: conflicts wait for a person
    repair: RoleSettings | None  # that role, resolved from `roles`
    repair_attempts: int  # repair.attempts: failed repairs of one conflict before giving up
    repair_backoff: timedelta  # repair.backoff: after the first failure; doubles each time
    signing: CommitKey | None  # signs every commit memsync makes (roots.*.signing.key)
    admission: AdmissionSettings  # roots.*.admission


@value
class Settings:
    """Everything the daemon and the one-shot commands need from the configuration."""

    state_dir: Path
    control_socket: Path
    roots: tuple[RootSettings, ...]
    config_path: Path | None
    http_listen: str | None = None
    views: tuple[ViewSettings, ...] = ()
    hub: HubSettings | None = None
    roles: Mapping[str, RoleSettings] = field(default_factory=dict)
    hooks: tuple[HookSettings, ...] = ()
    log_format: Literal["text", "json"] = "text"

    def root(self, name: str) -> RootSettings | None:
        """The root called `name`, or None."""
        return next((root for root in self.roots if root.name == name), None)

    def root_at(self, path: Path) -> RootSettings | None:
        """The root configured at `path` (both taken absolute, `~` expanded; the schema
        refuses two roots sharing a path), or None."""
        target = path.expanduser().absolute()
        return next((r for r in self.roots if r.path.expanduser().absolute() == target), None)


def root_settings(
    name: str, root: Root, roles: Mapping[str, RoleSettings] | None = None
) -> RootSettings:
    """Convert one validated root (`roles`: the converted roles, for its repair role)."""
    from memsync.config.schema import Repair  # noqa: PLC0415 - loaded with `root` already
    from memsync.config.sections import PublishSettings  # noqa: PLC0415
    from memsync.transports.rootkeys import CommitKey  # noqa: PLC0415

    sync = root.sync
    repair_role = root.repair.role if root.repair else None
    # without a repair role its limits are unused; they still come from the schema
    repair = root.repair or Repair.model_construct(role="")
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
        notify_hub=sync.notify.hub if sync.notify else None,
        notify_token=sync.notify.token if sync.notify else None,
        notify_root=(sync.notify.root or name) if sync.notify else None,
        prune_enabled=root.prune.enabled,
        insight_enabled=root.insight.enabled,
        insight_threshold=root.insight.trigger_points,
        prune_role=root.prune.role,
        prune_generation_commits=root.prune.generation_commits,
        prune_revival_grace=root.prune.revival_grace,
        prune_check_every=root.prune.check_every,
        insight_role=root.insight.role,
        insight_points_per_commit=root.insight.points_per_commit,
        insight_check_every=root.insight.check_every,
        publish=tuple(PublishSettings(p.view, p.hub, p.token, p.key) for p in root.publish),
        git_credentials=_git_credentials(name, root),
        repair_role=repair_role,
        repair=(roles or {}).get(repair_role) if repair_role else None,
        repair_attempts=repair.attempts,
        repair_backoff=repair.backoff,
        signing=CommitKey(f"roots.{name}.signing.key", root.signing.key) if root.signing else None,
        admission=AdmissionSettings(root.admission.require, root.admission.signers),
    )


def default_root(name: str, path: Path, **overrides: object) -> RootSettings:
    """The settings of `roots: {name: {path: PATH}}` (every default the schema's), with
    `overrides`: for code that runs a root without a config file (tests, bench)."""
    from memsync.config.schema import Root  # noqa: PLC0415 - pydantic, only here

    return replace(root_settings(name, Root(path=path)), **overrides)  # type: ignore[arg-type]


def default_hub(data_dir: Path) -> HubSettings:
    """The `hub:` section's settings with only `data_dir` given (every default the
    schema's): `hub serve --data DIR` reads no configuration."""
    from memsync.config.schema import Hub  # noqa: PLC0415 - pydantic, only here

    return replace(_hub(Hub(data_dir=data_dir)), data_dir=data_dir)  # the path as given


def _git_credentials(name: str, root: Root) -> GitCredentials | None:
    """What the git box authenticates this root's upstream with (None: git's defaults)."""
    https, ssh = root.sync.https, root.sync.ssh
    if https is None and ssh is None:
        return None
    from memsync.transports.rootkeys import GitCredentials  # noqa: PLC0415

    return GitCredentials(
        where=f"roots.{name}.sync",
        username=https.username if https else None,
        token=https.token if https else None,
        ssh=ssh is not None,
        ssh_key=ssh.key if ssh else None,
        known_hosts=ssh.known_hosts if ssh else None,
    )


def view_settings(name: str, view: View, roots: Mapping[str, Root]) -> ViewSettings:
    """Convert one validated view (its root exists: the schema checked it)."""
    from memsync.config.schema import GitSource  # noqa: PLC0415
    from memsync.config.sections import (  # noqa: PLC0415
        GitSourceSettings,
        HttpSourceSettings,
        ViewSettings,
    )

    source: SourceSettings
    if isinstance(view.source, GitSource):
        source = GitSourceSettings(view.source.url, view.source.path, view.source.branch)
        where = view.source.path
    else:
        source = HttpSourceSettings(view.source.url, view.source.token, view.source.allow_http)
        where = view.source.url
    return ViewSettings(
        name=name,
        root=view.root,
        root_path=roots[view.root].path,
        heading=view.heading or name,
        view_id=view.view_id or _last_part(where) or name,
        source=source,
        keys=tuple(view.trust.keys),
        threshold=view.trust.threshold,
        allow_unsigned=view.trust.allow_unsigned,
        refresh=view.refresh,
        max_stale=view.max_stale,
        max_file_size=view.max_file_size,
    )


def _last_part(location: str) -> str:
    """`https://hub/v1/views/auth` -> `auth`; `shares/auth` -> `auth`."""
    return location.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1]


def settings_from(config: Config, config_path: Path | None) -> Settings:
    """Convert a validated Config; roots and views keep their order in the file."""
    roles = {name: _role(name, role) for name, role in config.roles.items()}
    return Settings(
        state_dir=config.state_dir,
        control_socket=config.control_socket,
        roots=tuple(root_settings(name, root, roles) for name, root in config.roots.items()),
        config_path=config_path,
        http_listen=config.http.listen if config.http else None,
        views=tuple(view_settings(n, v, config.roots) for n, v in config.views.items()),
        hub=_hub(config.hub) if config.hub else None,
        roles=roles,
        hooks=tuple(_hook(hook) for hook in config.hooks),
        log_format=config.log.format,
    )


def _hook(hook: Hook) -> HookSettings:
    from memsync.config.sections import HookSettings, WebhookSettings  # noqa: PLC0415

    webhook = hook.webhook
    return HookSettings(
        on=frozenset(hook.on),
        roots=frozenset(hook.roots) if hook.roots is not None else None,
        views=frozenset(hook.views) if hook.views is not None else None,
        command=hook.command,
        webhook=WebhookSettings(webhook.url, webhook.token) if webhook else None,
        timeout=hook.timeout,
    )


def _role(name: str, role: CommandRole | OpenAIRole) -> RoleSettings:
    from memsync.config.schema import CommandRole  # noqa: PLC0415
    from memsync.config.sections import CommandRoleSettings, OpenAIRoleSettings  # noqa: PLC0415

    if isinstance(role, CommandRole):
        return CommandRoleSettings(name, tuple(role.command), role.timeout)
    return OpenAIRoleSettings(name, role.base_url, role.model, role.api_key, role.timeout)


def _hub(hub: Hub) -> HubSettings:
    from memsync.config.sections import HubSettings  # noqa: PLC0415

    return HubSettings(
        hub.data_dir,
        hub.listen,
        header_timeout=hub.header_timeout.total_seconds(),
        idle_timeout=hub.idle_timeout.total_seconds(),
        max_connections=hub.max_connections,
        max_streams_per_token=hub.max_streams_per_token,
        log_interval=hub.log_interval.total_seconds(),
    )
