"""The one configuration schema (CONTRACT §4): pydantic models, field types, cross-references.

Every model forbids unknown keys and is frozen. Paths expand `~` and resolve relative paths
against `base_dir` from the validation context (the config file's directory). Checks that
relate several fields (a view's root exists, roles exist, trust thresholds, shared paths)
are in `reference_problems`, which works on the raw mapping so that they are reported
together with every field problem; `memsync.config.load` runs both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    PlainSerializer,
    PlainValidator,
    StrictBool,
    StrictInt,
    Tag,
    ValidationInfo,
    model_validator,
)

from memsync.config.units import (
    check_branch,
    check_http_url,
    check_listen,
    check_name,
    check_public_key,
    check_repo_path,
    check_text,
    format_duration,
    format_size,
    parse_duration,
    parse_size,
)
from memsync.secrets import SecretRef
from memsync.transports.credentials import DEFAULT_USERNAME, check_ssh_path
from memsync.transports.hubrule import url_problem

Loc = tuple[str | int, ...]


def _positive_duration(value: object) -> timedelta:
    if isinstance(value, timedelta):
        return value
    parsed = parse_duration(value)
    if not parsed:
        raise ValueError("a duration here must be more than 0")
    return parsed


def _positive_size(value: object) -> int:
    parsed = parse_size(value)
    if not parsed:
        raise ValueError("a size here must be more than 0B")
    return parsed


def expand_path(value: object, base_dir: Path | None) -> Path:
    """`~` expanded, relative paths joined to `base_dir` (else the cwd), `..` collapsed."""
    if isinstance(value, Path):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise ValueError("expected a non-empty path")
    if "\x00" in value:
        raise ValueError("a path cannot contain a NUL character")
    try:
        path = Path(value).expanduser()
    except RuntimeError:
        raise ValueError(f"cannot expand the home directory in {value!r}") from None
    if not path.is_absolute():
        path = (base_dir or Path.cwd()) / path
    return Path(os.path.normpath(path))


def _base_dir(info: ValidationInfo) -> Path | None:
    context = info.context if isinstance(info.context, Mapping) else {}
    base = context.get("base_dir")
    return base if isinstance(base, Path) else None


def _path(value: object, info: ValidationInfo) -> Path:
    return expand_path(value, _base_dir(info))


def _git_url(value: str, info: ValidationInfo) -> str:
    if any(ch.isspace() for ch in value):
        raise ValueError("a repository URL cannot contain spaces")
    scheme = urlsplit(value).scheme if "://" in value else ""
    if scheme in {"http", "https"}:
        return check_http_url(value)
    if scheme in {"ssh", "git", "file"}:
        if urlsplit(value).password is not None:
            raise ValueError("put credentials in a token secret, not in the URL")
        return value
    if scheme:
        raise ValueError(
            "expected an ssh://, https://, git://, file:// URL, user@host:path or a path"
        )
    if re.fullmatch(r"[^/:]+@[^/:]+:.+", value):  # scp-like user@host:path
        return value
    return str(expand_path(value, _base_dir(info)))


Name = Annotated[str, AfterValidator(check_name)]
Text = Annotated[str, AfterValidator(check_text)]
Count = Annotated[StrictInt, Field(ge=1)]
Duration = Annotated[
    timedelta,
    BeforeValidator(_positive_duration),
    PlainSerializer(format_duration, return_type=str),
]
Size = Annotated[
    int, BeforeValidator(_positive_size), PlainSerializer(format_size, return_type=str)
]
ConfigPath = Annotated[Path, BeforeValidator(_path)]
HttpUrl = Annotated[str, AfterValidator(check_http_url)]
GitUrl = Annotated[str, AfterValidator(_git_url)]
Listen = Annotated[str, AfterValidator(check_listen)]
Branch = Annotated[str, AfterValidator(check_branch)]
PublicKey = Annotated[str, AfterValidator(check_public_key)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Control(_Model):
    socket: ConfigPath | None = None  # None: $XDG_RUNTIME_DIR/memsync.sock or <state_dir>/...


class Http(_Model):
    listen: Listen


class Notify(_Model):
    """After a push, tell a hub the upstream moved (`POST /v1/roots/{root}/notify`)."""

    hub: HttpUrl
    token: SecretRef
    root: Name | None = None  # the root's name on the hub; default: this root's name


def _username(value: str) -> str:
    check_text(value)
    if ":" in value or any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError("a username cannot hold ':' or control characters")
    return value


def _ssh_key(ref: SecretRef) -> SecretRef:
    if ref.kind == "file":
        check_ssh_path(ref.ref)
    elif ref.kind != "credential":
        raise ValueError(
            "an SSH key is a file ssh reads: use {file: PATH} or {credential: NAME} "
            "(or leave it out and use ssh-agent)"
        )
    return ref


def _ssh_path(path: Path) -> Path:
    check_ssh_path(str(path))
    return path


class HttpsAuth(_Model):
    """An HTTPS upstream's username and token, given to git by memsync's credential helper
    (never on a command line, in a file or in an environment)."""

    username: Annotated[str, AfterValidator(_username)] = DEFAULT_USERNAME
    token: SecretRef


class SshAuth(_Model):
    """SSH to the upstream with strict host key checking; a key file, or ssh-agent."""

    key: Annotated[SecretRef, AfterValidator(_ssh_key)] | None = None
    known_hosts: Annotated[ConfigPath, AfterValidator(_ssh_path)] | None = None


class Sync(_Model):
    enabled: StrictBool = True
    remote: Name = "origin"
    interval: Duration = timedelta(seconds=60)
    push: StrictBool = True
    autocommit: StrictBool = False
    timeout: Duration = timedelta(seconds=120)
    events: HttpUrl | None = None
    events_token: SecretRef | None = None
    notify: Notify | None = None
    https: HttpsAuth | None = None
    ssh: SshAuth | None = None


class Prune(_Model):
    enabled: StrictBool = False
    role: Text = "pruner"
    generation_commits: Count = 70
    revival_grace: Annotated[StrictInt, Field(ge=0)] = 2  # generations; 0: no grace
    check_every: Duration = timedelta(hours=2)


class Insight(_Model):
    enabled: StrictBool = False
    role: Text = "insight"
    trigger_points: Count = 150
    points_per_commit: Count = 1
    check_every: Duration = timedelta(minutes=50)


class Repair(_Model):
    role: Text


class Publish(_Model):
    view: Name
    hub: HttpUrl
    token: SecretRef
    key: SecretRef


class Signing(_Model):
    """The OpenSSH private key memsync signs the commits it makes with (git's SSH format)."""

    key: SecretRef


def _require(value: object) -> object:
    # YAML 1.1 reads a bare `off` as false; it means the word here (`on` has no meaning).
    return "off" if value is False else value


def _signer(value: object, info: ValidationInfo) -> str | SecretRef:
    """An OpenSSH public key line (checked now), or a reference to a file of them (read
    at each sync, like every secret: a changed file is picked up on the next one)."""
    if not isinstance(value, str):
        return SecretRef.parse(value, _base_dir(info))
    from memsync.validators.commitsig import parse_signer  # noqa: PLC0415 - cryptography

    return parse_signer(value).line


def _dump_signer(value: str | SecretRef) -> object:
    if isinstance(value, str):
        return value
    return {value.kind: "********" if value.kind == "value" else value.ref}


Signer = Annotated[str | SecretRef, PlainValidator(_signer), PlainSerializer(_dump_signer)]


class Admission(_Model):
    """Who may write the root's history: `signed` admits only commits SSH-signed by a key
    in `signers` (memsync's config, never the root's), incoming and outgoing."""

    require: Annotated[Literal["off", "signed"], BeforeValidator(_require)] = "off"
    signers: tuple[Signer, ...] = ()

    @model_validator(mode="after")
    def _someone(self) -> Admission:
        if self.require == "signed" and not self.signers:
            raise ValueError("require: signed needs at least one key in signers")
        return self


class Root(_Model):
    path: ConfigPath
    branch: Branch | None = None  # None: the checked-out branch
    max_file_size: Size = 4 * 1024 * 1024
    watch: StrictBool = True
    sync: Sync = Sync()
    prune: Prune = Prune()
    insight: Insight = Insight()
    repair: Repair | None = None
    publish: tuple[Publish, ...] = ()
    signing: Signing | None = None
    admission: Admission = Admission()


class HttpSource(_Model):
    kind: Literal["http"]
    url: HttpUrl
    token: SecretRef | None = None
    allow_http: StrictBool = False  # plain http:// to a non-loopback host (never by default)


class GitSource(_Model):
    kind: Literal["git"]
    url: GitUrl
    branch: Branch = "main"
    path: Annotated[str, AfterValidator(check_repo_path)]


def _tag(key: str) -> Any:
    def tag(value: Any) -> str | None:
        found = value.get(key) if isinstance(value, Mapping) else getattr(value, key, None)
        return f"{key}={found}" if isinstance(found, str) else None

    return tag


# Tags carry "=" so they can never be mistaken for a key when locations are rendered.
TAGS: dict[str, type[BaseModel]] = {"kind=http": HttpSource, "kind=git": GitSource}
Source = Annotated[
    Annotated[HttpSource, Tag("kind=http")] | Annotated[GitSource, Tag("kind=git")],
    Discriminator(
        _tag("kind"),
        custom_error_type="source_kind",
        custom_error_message="expected a mapping with kind: http or kind: git",
    ),
]


def _distinct(keys: tuple[str, ...]) -> tuple[str, ...]:
    if len(set(keys)) != len(keys):
        raise ValueError("the same key is listed twice")
    return keys


class Trust(_Model):
    keys: Annotated[tuple[PublicKey, ...], AfterValidator(_distinct)] = ()
    threshold: Count = 1
    allow_unsigned: StrictBool = False


class View(_Model):
    root: Text
    heading: Text | None = None  # None: the view's name
    view_id: Name | None = None  # the provider's id; None: the source URL's (or path's) last part
    source: Source
    trust: Trust = Trust()
    refresh: Duration = timedelta(minutes=5)
    max_stale: Duration = timedelta(days=7)
    # The per-file cap of the view's packages (larger files are `too-large`): at most the
    # package total, 10 MiB.
    max_file_size: Annotated[Size, Field(le=10 * 1024 * 1024)] = 1024 * 1024


class CommandRole(_Model):
    executor: Literal["command"]
    command: tuple[Annotated[str, Field(min_length=1)], ...] = Field(min_length=1)
    timeout: Duration = timedelta(minutes=15)


class OpenAIRole(_Model):
    executor: Literal["openai"]
    base_url: HttpUrl
    model: Text
    api_key: SecretRef | None = None
    timeout: Duration = timedelta(minutes=5)


TAGS.update({"executor=command": CommandRole, "executor=openai": OpenAIRole})
Role = Annotated[
    Annotated[CommandRole, Tag("executor=command")] | Annotated[OpenAIRole, Tag("executor=openai")],
    Discriminator(
        _tag("executor"),
        custom_error_type="role_executor",
        custom_error_message="expected a mapping with executor: command or executor: openai",
    ),
]


# The statuses a hook may wait for: every root status (CONTRACT §2 and §8) and view status.
ROOT_STATUSES = frozenset({
    "current", "synced", "pushed", "dirty", "conflict", "rejected", "rewound", "offline",
    "error", "busy", "disabled", "unconfigured", "auth-failed", "host-key-changed", "paused",
})  # fmt: skip
VIEW_STATUSES = frozenset({"pulled", "current", "stale", "unavailable", "paused"})
HOOK_STATUSES = ROOT_STATUSES | VIEW_STATUSES


def _hook_status(value: str) -> str:
    if value not in HOOK_STATUSES:
        known = ", ".join(sorted(HOOK_STATUSES))
        raise ValueError(f"unknown status {value!r} (known: {known})")
    return value


def _some(value: tuple[str, ...]) -> tuple[str, ...]:
    # not `min_length`: pydantic would also call a list with one bad word empty
    if not value:
        raise ValueError("name at least one status")
    return value


class Webhook(_Model):
    """POST the result document to `url` (the hub-client rules: a token only over https
    or loopback http, no redirect)."""

    url: HttpUrl
    token: SecretRef | None = None


class Hook(_Model):
    """Run `command` (an argv, never a shell) and/or POST to `webhook` when a root or view
    enters one of the `on` statuses. `roots`/`views` narrow it (neither: every root and
    view; only one of them: only those)."""

    on: Annotated[tuple[Annotated[str, AfterValidator(_hook_status)], ...], AfterValidator(_some)]
    roots: tuple[Name, ...] | None = None
    views: tuple[Name, ...] | None = None
    command: tuple[Annotated[str, Field(min_length=1)], ...] | None = Field(
        default=None, min_length=1
    )
    webhook: Webhook | None = None
    timeout: Duration = timedelta(seconds=30)

    @model_validator(mode="before")
    @classmethod
    def _on_key(cls, data: object) -> object:
        # YAML 1.1 reads a bare `on:` key as the boolean true; it means the key `on` here.
        if isinstance(data, Mapping) and True in data and "on" not in data:
            return {("on" if key is True else key): value for key, value in data.items()}
        return data

    @model_validator(mode="after")
    def _does_something(self) -> Hook:
        if self.command is None and self.webhook is None:
            raise ValueError("a hook needs a command, a webhook or both")
        return self


class Log(_Model):
    format: Literal["text", "json"] = "text"


class Hub(_Model):
    data_dir: ConfigPath
    listen: Listen = "127.0.0.1:8765"
    header_timeout: Duration = timedelta(seconds=10)  # a request head arrives whole within it
    idle_timeout: Duration = timedelta(seconds=60)  # a connection with no request is closed
    max_connections: Count | None = None  # per worker; None: from the descriptor limit
    max_streams_per_token: Count = 16  # event streams one token may hold at once
    log_interval: Duration = timedelta(seconds=60)  # the same warning at most this often


def default_state_dir() -> Path:
    """`$XDG_STATE_HOME/memsync` (when set and absolute), else `~/.local/state/memsync`."""
    xdg = os.environ.get("XDG_STATE_HOME", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "memsync"
    return Path.home() / ".local" / "state" / "memsync"


def default_control_socket(state_dir: Path) -> Path:
    """`$XDG_RUNTIME_DIR/memsync.sock` (when set and absolute), else `<state_dir>/memsync.sock`."""
    xdg = os.environ.get("XDG_RUNTIME_DIR", "")
    if xdg and Path(xdg).is_absolute():
        return Path(xdg) / "memsync.sock"
    return state_dir / "memsync.sock"


def _version(value: object) -> object:
    if type(value) is not int:  # YAML `true` and `1.0` are not version 1
        raise ValueError("unsupported version (this memsync reads `version: 1`)")
    return value


class Config(_Model):
    """The whole file. `model_validate` checks fields only; `load.load_config_text` also
    runs `reference_problems` and reports everything with line numbers."""

    version: Annotated[Literal[1], BeforeValidator(_version)]
    state_dir: ConfigPath = Field(default_factory=default_state_dir)
    control: Control = Control()
    http: Http | None = None
    roots: dict[Name, Root] = Field(default_factory=dict)
    views: dict[Name, View] = Field(default_factory=dict)
    roles: dict[Name, Role] = Field(default_factory=dict)
    hub: Hub | None = None
    hooks: tuple[Hook, ...] = ()
    log: Log = Log()

    @property
    def control_socket(self) -> Path:
        """The control socket path with its default applied."""
        return self.control.socket or default_control_socket(self.state_dir)


def _mapping(value: object) -> Mapping[Any, Any]:
    return value if isinstance(value, Mapping) else {}


def reference_problems(data: object, base_dir: Path | None) -> list[tuple[Loc, str]]:
    """Cross-field problems in a raw config mapping, tolerant of malformed parts (those
    are reported by the models; here they are skipped)."""
    top = _mapping(data)
    roots, views, roles = (_mapping(top.get(key)) for key in ("roots", "views", "roles"))
    problems: list[tuple[Loc, str]] = []

    def need_role(loc: Loc, role: object) -> None:
        if isinstance(role, str) and role not in roles:
            defined = ", ".join(sorted(map(str, roles))) or "none"
            problems.append((loc, f"role {role!r} is not defined in roles (defined: {defined})"))

    seen_paths: dict[Path, str] = {}
    for name, root in roots.items():
        root_map = _mapping(root)
        for cycle, model in (("prune", Prune), ("insight", Insight)):
            cycle_map = _mapping(root_map.get(cycle))
            if cycle_map.get("enabled") is True:
                role = cycle_map.get("role", model.model_fields["role"].default)
                need_role(("roots", name, cycle, "role"), role)
        repair_role = _mapping(root_map.get("repair")).get("role")
        need_role(("roots", name, "repair", "role"), repair_role)
        if isinstance(repair_role, str) and _mapping(roles.get(repair_role)).get("executor") == (
            "openai"
        ):
            message = (
                f"role {repair_role!r} uses the openai executor, which cannot complete a merge;"
                " a repair role needs executor: command"
            )
            problems.append((("roots", name, "repair", "role"), message))
        unsigned = signing_problem(root_map)
        if unsigned is not None:
            problems.append((("roots", name, "signing"), unsigned))
        try:
            path = expand_path(root_map.get("path"), base_dir)
        except ValueError:
            continue
        if path in seen_paths:
            message = f"roots {seen_paths[path]} and {name} share the path {path}"
            problems.append((("roots", name, "path"), message))
        seen_paths.setdefault(path, str(name))

    for name, view in views.items():
        view_map = _mapping(view)
        root_name = view_map.get("root")
        if isinstance(root_name, str) and root_name not in roots:
            known = ", ".join(sorted(map(str, roots))) or "none"
            message = f"root {root_name!r} is not configured (roots: {known})"
            problems.append((("views", name, "root"), message))
        trust = _mapping(view_map.get("trust"))
        keys, threshold = trust.get("keys", ()), trust.get("threshold", 1)
        if not isinstance(keys, list | tuple) or type(threshold) is not int:
            continue
        distinct = len(set(map(str, keys)))
        if trust.get("allow_unsigned") is not True and threshold > distinct:
            message = (
                f"threshold {threshold} needs at least {threshold} distinct trust.keys "
                f"(has {distinct}); add keys or set allow_unsigned: true"
            )
            problems.append((("views", name, "trust", "threshold"), message))
    return (
        problems
        + hook_problems(top.get("hooks"), roots, views)
        + token_problems(roots, views, roles)
    )


def signing_problem(root: Mapping[Any, Any]) -> str | None:
    """A root that admits only signed commits (`admission.require: signed`) but has no
    `signing.key` cannot make a commit of its own: autocommit and cycles are refused."""
    if _mapping(root.get("admission")).get("require") != "signed":
        return None
    if _mapping(root.get("signing")).get("key") is not None:
        return None
    makers = [
        what
        for what, on in (
            ("sync.autocommit", _mapping(root.get("sync")).get("autocommit") is True),
            ("prune", _mapping(root.get("prune")).get("enabled") is True),
            ("insight", _mapping(root.get("insight")).get("enabled") is True),
            ("repair", root.get("repair") is not None),
        )
        if on
    ]
    if not makers:
        return None
    return (
        f"admission.require: signed needs signing.key for the commits memsync makes here "
        f"({', '.join(makers)}); add signing: {{key: {{file: PATH}}}} or turn those off"
    )


def hook_problems(
    hooks: object, roots: Mapping[Any, Any], views: Mapping[Any, Any]
) -> list[tuple[Loc, str]]:
    """Every root and view a hook names is configured; a webhook's URL passes the one
    rule of `hubrule` (a token only over https or loopback http)."""
    problems: list[tuple[Loc, str]] = []
    for index, hook in enumerate(hooks if isinstance(hooks, list | tuple) else ()):
        hook_map = _mapping(hook)
        for key, known in (("roots", roots), ("views", views)):
            names = hook_map.get(key)
            for at, name in enumerate(names if isinstance(names, list | tuple) else ()):
                if isinstance(name, str) and name not in known:
                    listed = ", ".join(sorted(map(str, known))) or "none"
                    message = f"{key[:-1]} {name!r} is not configured ({key}: {listed})"
                    problems.append((("hooks", index, key, at), message))
        webhook = _mapping(hook_map.get("webhook"))
        url = webhook.get("url")
        if isinstance(url, str):
            problem = url_problem(url, token=webhook.get("token") is not None)
            if problem is not None and url_problem(url, token=False, allow_http=True) is None:
                problems.append((("hooks", index, "webhook", "url"), f"{problem}"))
    return problems


def token_problems(
    roots: Mapping[Any, Any], views: Mapping[Any, Any], roles: Mapping[Any, Any]
) -> list[tuple[Loc, str]]:
    """Every URL a token goes to (`sync.events`, `sync.notify.hub`, `publish[].hub`, a
    view's http source, an openai role's `base_url`) passes the one rule of `hubrule`: a
    token only over https or loopback http; `allow_http` never lets one over plain http."""
    problems: list[tuple[Loc, str]] = []

    def check(loc: Loc, url: object, token: object) -> None:
        # a malformed URL is its own field's problem; here only what the token adds
        if token is None or not isinstance(url, str):
            return
        problem = url_problem(url, token=True)
        if problem is not None and url_problem(url, token=False, allow_http=True) is None:
            problems.append((loc, f"{problem}; use an https:// URL"))

    for name, root in roots.items():
        root_map = _mapping(root)
        sync = _mapping(root_map.get("sync"))
        check(("roots", name, "sync", "events"), sync.get("events"), sync.get("events_token"))
        notify = _mapping(sync.get("notify"))
        check(("roots", name, "sync", "notify", "hub"), notify.get("hub"), notify.get("token"))
        publish = root_map.get("publish")
        for index, entry in enumerate(publish if isinstance(publish, list | tuple) else ()):
            entry_map = _mapping(entry)
            hub, token = entry_map.get("hub"), entry_map.get("token")
            check(("roots", name, "publish", index, "hub"), hub, token)
    for name, view in views.items():
        source = _mapping(_mapping(view).get("source"))
        if source.get("kind") == "http":
            check(("views", name, "source", "url"), source.get("url"), source.get("token"))
    for name, role in roles.items():
        role_map = _mapping(role)
        check(("roles", name, "base_url"), role_map.get("base_url"), role_map.get("api_key"))
    return problems
