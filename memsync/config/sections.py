"""The settings of the configuration's optional parts: a root's publish targets, views and
their sources, roles, the hub, hooks and their webhooks. Frozen plain values like
`model`'s (no pydantic; a default here is the schema's, tests hold it), made by `model`'s
converters; apart from it so that a command whose configuration has none of these (a
cold `status` or `sync-now` of plain roots) never creates their classes.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Literal

from memsync.secrets import SecretRef
from memsync.values import value


@value
class PublishSettings:
    """A view this root provides: rebuilt, signed and published whenever its HEAD moves."""

    view: str
    hub: str
    token: SecretRef
    key: SecretRef  # {file: PATH} or {credential: NAME}: the Ed25519 private key file


@value
class HttpSourceSettings:
    """A view served over HTTP(S) by a hub or any static host: `<url>/manifest`, `<url>/package`."""

    url: str
    token: SecretRef | None
    allow_http: bool  # plain http:// to a non-loopback host
    kind: Literal["http"] = "http"


@value
class GitSourceSettings:
    """A Git share: `<path>/manifest.json` and `<path>/package/` on `branch` of `url`."""

    url: str
    path: str
    branch: str
    kind: Literal["git"] = "git"


SourceSettings = HttpSourceSettings | GitSourceSettings  # discriminated by `kind`


@value
class ViewSettings:
    """One imported view: where it comes from, how it is trusted, where it lands."""

    name: str
    root: str
    root_path: Path
    heading: str
    view_id: str  # the provider's view id the manifest must name
    source: SourceSettings
    keys: tuple[str, ...]
    threshold: int
    allow_unsigned: bool
    refresh: timedelta
    max_stale: timedelta
    max_file_size: int  # the per-file cap of its packages (`too-large`)


@value
class CommandRoleSettings:
    """A role run as an agent CLI in the candidate worktree (CONTRACT §7)."""

    name: str
    command: tuple[str, ...]
    timeout: timedelta
    executor: Literal["command"] = "command"


@value
class OpenAIRoleSettings:
    """A role asked through an OpenAI-compatible chat-completions endpoint (CONTRACT §7)."""

    name: str
    base_url: str
    model: str
    api_key: SecretRef | None
    timeout: timedelta
    executor: Literal["openai"] = "openai"


RoleSettings = CommandRoleSettings | OpenAIRoleSettings


@value
class HubSettings:
    data_dir: Path
    listen: str
    header_timeout: float
    idle_timeout: float
    max_connections: int | None
    max_streams_per_token: int
    log_interval: float


@value
class WebhookSettings:
    url: str
    token: SecretRef | None


@value
class HookSettings:
    """A hook from memsync's own config (never a root's): what it waits for, what it runs."""

    on: frozenset[str]
    roots: frozenset[str] | None  # None: not narrowed by root
    views: frozenset[str] | None
    command: tuple[str, ...] | None
    webhook: WebhookSettings | None
    timeout: timedelta

    def wants(self, kind: str, name: str, status: str) -> bool:
        """Whether a `kind` ("root"/"view") called `name` entering `status` runs it."""
        if status not in self.on:
            return False
        if self.roots is None and self.views is None:
            return True
        chosen = self.roots if kind == "root" else self.views
        return chosen is not None and name in chosen
