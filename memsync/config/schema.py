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
from pydantic_core import PydanticUndefined

from memsync.config.paths import default_state_dir
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


def _about(
    text: str,
    default: Any = PydanticUndefined,
    *,
    example: Any = PydanticUndefined,
    shown: str | None = None,
    **rules: Any,
) -> Any:
    """A field's description, default and sample value: the one place `memsync config
    sample` and the README's key table read them from (`config.sample`). `example` is the
    value the sample shows (else the default), as YAML data; `shown` says the default in
    words where it is computed or `None` means something."""
    extra: dict[str, Any] = {} if shown is None else {"shown": shown}
    return Field(
        default,
        description=text,
        examples=None if example is PydanticUndefined else [example],
        json_schema_extra=extra or None,
        **rules,
    )


class Control(_Model):
    socket: ConfigPath | None = _about(
        "the daemon's control socket (mode 0600)",
        None,
        shown="$XDG_RUNTIME_DIR/memsync.sock, else <state_dir>/memsync.sock",
    )


class Http(_Model):
    listen: Listen = _about("HOST:PORT to serve on", example="127.0.0.1:9464")


class Notify(_Model):
    """After a push, tell a hub the upstream moved (`POST /v1/roots/{root}/notify`)."""

    hub: HttpUrl = _about("the hub's base URL", example="https://hub.example")
    token: SecretRef = _about("hub token with notify:<root> scope", example={"env": "HUB_NOTIFY"})
    root: Name | None = _about(
        "the root's name on the hub", None, example="personal", shown="this root's name"
    )


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

    username: Annotated[str, AfterValidator(_username)] = _about(
        "GitHub tokens; GitLab: oauth2 or the deploy token's user", DEFAULT_USERNAME
    )
    token: SecretRef = _about(
        "or {credential: git-token} under systemd LoadCredential=", example={"env": "GH_TOKEN"}
    )


class SshAuth(_Model):
    """SSH to the upstream with strict host key checking; a key file, or ssh-agent."""

    key: Annotated[SecretRef, AfterValidator(_ssh_key)] | None = _about(
        "or {credential: deploy-key}",
        None,
        example={"file": "~/.ssh/memsync_deploy"},
        shown="ssh-agent",
    )
    known_hosts: Annotated[ConfigPath, AfterValidator(_ssh_path)] | None = _about(
        "the upstream's host key must be in it",
        None,
        example="~/.ssh/known_hosts",
        shown="ssh's own (~/.ssh/known_hosts)",
    )


class Sync(_Model):
    enabled: StrictBool = _about("sync this root", True)
    remote: Name = _about("the Git remote to fetch from and push to", "origin")
    interval: Duration = _about("how often to check the upstream", timedelta(seconds=60))
    push: StrictBool = _about("push validated local commits", True)
    autocommit: StrictBool = _about("commit local edits before syncing", False)
    timeout: Duration = _about("limit for one sync cycle", timedelta(seconds=120))
    events: HttpUrl | None = _about(
        "a hub event stream: sync at once when the upstream moves",
        None,
        example="https://hub.example/v1/events?root=personal",
    )
    events_token: SecretRef | None = _about(
        "bearer token for `events` (scope root:<name>)", None, example={"env": "HUB_TOKEN"}
    )
    notify: Notify | None = _about(
        "after each push, tell a hub so its subscribers sync at once", None
    )
    https: HttpsAuth | None = _about(
        "credentials for an HTTPS upstream that needs a token (a private GitHub or GitLab"
        " repository, a deploy token). memsync's own credential helper hands them to git:"
        " never on a command line, in a file or in an environment, and only to the"
        " remote's own host (https://, or http:// on loopback)",
        None,
        shown="none (git asks no helper; a token written in the remote URL is still used)",
    )
    ssh: SshAuth | None = _about(
        "SSH with strict host key checking (unknown or changed host keys refuse)",
        None,
        shown="none (ssh -o BatchMode=yes with your ~/.ssh/config and ssh-agent)",
    )


class Prune(_Model):
    enabled: StrictBool = _about("run pruning cycles", False)
    role: Text = _about("a name under `roles`", "pruner")
    generation_commits: Count = _about("commits per generation before pruning is due", 70)
    revival_grace: Annotated[StrictInt, Field(ge=0)] = _about(
        "generations a pruned item written back is kept (0: no grace)", 2
    )
    check_every: Duration = _about("how often to check whether pruning is due", timedelta(hours=2))


class Insight(_Model):
    enabled: StrictBool = _about("run insight cycles", False)
    role: Text = _about("a name under `roles`", "insight")
    trigger_points: Count = _about("points that make an insight cycle due", 150)
    points_per_commit: Count = _about("points each new commit adds", 1)
    check_every: Duration = _about(
        "how often to check whether insight is due", timedelta(minutes=50)
    )


class Repair(_Model):
    role: Text = _about("a name under `roles` (an `executor: command` role)", example="reconciler")
    attempts: Count = _about("failed repairs of one conflict before the role is not asked again", 3)
    backoff: Duration = _about(
        "the wait after the first failed repair; it doubles after each", timedelta(minutes=5)
    )


class Publish(_Model):
    view: Name = _about("the VIEW_ID under shared_views/ in this root", example="auth")
    hub: HttpUrl = _about("the hub's base URL", example="https://hub.example")
    token: SecretRef = _about("hub token with publish:<view> scope", example={"env": "HUB_PUBLISH"})
    key: SecretRef = _about(
        "Ed25519 private key; or {file: ~/.config/memsync/view.key}",
        example={"env": "VIEW_SIGNING_KEY"},
    )


class Signing(_Model):
    """The OpenSSH private key memsync signs the commits it makes with (git's SSH format)."""

    key: SecretRef = _about(
        "an unencrypted OpenSSH private key (ed25519, ecdsa or rsa)",
        example={"file": "~/.ssh/memsync_ed25519"},
    )


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

    require: Annotated[Literal["off", "signed"], BeforeValidator(_require)] = _about(
        "off or signed", "off"
    )
    signers: tuple[Signer, ...] = _about(
        "OpenSSH public keys (a .pub file's line), or files of them (one a line, # comments)",
        (),
        example=[
            "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBw1fVZ+RXJhrH+dg+3RYHQVY4TDMB7Z5T3SRvLIf2/p a@b",
            {"file": "~/.config/memsync/team-signers.pub"},
        ],
    )

    @model_validator(mode="after")
    def _someone(self) -> Admission:
        if self.require == "signed" and not self.signers:
            raise ValueError("require: signed needs at least one key in signers")
        return self


class Root(_Model):
    path: ConfigPath = _about("the Git work tree", example="~/.rightmemory")
    branch: Branch | None = _about(
        "the branch to sync", None, example="main", shown="the checked-out branch"
    )
    max_file_size: Size = _about("larger synchronized files are `too-large`", 4 * 1024 * 1024)
    watch: StrictBool = _about("sync soon after local edits", True)
    sync: Sync = _about("how this root syncs with its upstream", Sync())
    prune: Prune = _about("periodic expiry of active memory by a role", Prune())
    insight: Insight = _about("insight logs written by a role", Insight())
    repair: Repair | None = _about(
        "a role that settles a sync merge that conflicts (or merges into invalid memory)"
        " with one merge commit in a private candidate; the gate checks it before it lands",
        None,
        shown="none (the root stays `conflict` until a person merges)",
    )
    publish: tuple[Publish, ...] = _about("views of this root to publish to a hub", ())
    signing: Signing | None = _about(
        "sign every commit memsync makes here (autocommit, merges, prune, insight, repair,"
        " init's baseline) as `git commit -S` with gpg.format=ssh would, in process",
        None,
        shown="none (unsigned)",
    )
    admission: Admission = _about(
        "who may write this root's history. `signed` admits only commits (incoming and"
        " outgoing, each one, merges too) SSH-signed (git's gpg.format=ssh) by a key listed"
        " here; others are `rejected`. Commits trusted when it is turned on stay trusted",
        Admission(),
    )


class HttpSource(_Model):
    kind: Literal["http"] = _about(
        "http: a hub or any static host (<url>/manifest, <url>/package)", example="http"
    )
    url: HttpUrl = _about("where the view is served", example="https://hub.example/v1/views/auth")
    token: SecretRef | None = _about(
        "bearer token with read:<view> scope", None, example={"env": "HUB_TOKEN"}
    )
    allow_http: StrictBool = _about("plain http:// to a non-loopback host", False)


class GitSource(_Model):
    kind: Literal["git"] = _about("git: a Git share", example="git")
    url: GitUrl = _about("the share's repository", example="ssh://git@host/team.git")
    branch: Branch = _about("the share's branch", "main")
    path: Annotated[str, AfterValidator(check_repo_path)] = _about(
        "the directory holding package/ and manifest.json", example="shares/auth"
    )


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
    keys: Annotated[tuple[PublicKey, ...], AfterValidator(_distinct)] = _about(
        "pinned publisher keys",
        (),
        example=["ed25519:AQIDBAUGBwgJCgsMDQ4PEBESExQVFhcYGRobHB0eHyA"],
    )
    threshold: Count = _about("distinct pinned keys that must sign", 1)
    allow_unsigned: StrictBool = _about("accept unsigned manifests (tests only)", False)


class View(_Model):
    root: Text = _about("the configured root that receives the view", example="personal")
    heading: Text | None = _about(
        "heading it is mounted under", None, example="team-auth", shown="the view's name"
    )
    view_id: Name | None = _about(
        "the provider's view id",
        None,
        example="auth",
        shown="the last part of the source's url (or path)",
    )
    source: Source = _about("where it comes from: kind http or git", example={"kind": "http"})
    trust: Trust = _about("the keys its manifests must be signed with", Trust())
    refresh: Duration = _about("how often to check for a new revision", timedelta(minutes=5))
    max_stale: Duration = _about("/readyz fails when the import is older", timedelta(days=7))
    max_file_size: Annotated[Size, Field(le=10 * 1024 * 1024)] = _about(
        "larger files of a package are `too-large` and the revision is refused; at most"
        " 10MiB. Fixed package caps: 512 entries, 10 MiB uncompressed, a 1 MiB manifest,"
        " 200:1 compression per entry, 4 directory levels, 255-byte names",
        1024 * 1024,
    )


class CommandRole(_Model):
    executor: Literal["command"] = _about("command: run a local agent command", example="command")
    command: tuple[Annotated[str, Field(min_length=1)], ...] = _about(
        "argv; {prompt_file}, {worktree} and {role} are substituted; the prompt is also on stdin",
        example=["claude", "-p", "--output-format", "json"],
        min_length=1,
    )
    timeout: Duration = _about("killed (its process group) after this", timedelta(minutes=15))


class OpenAIRole(_Model):
    executor: Literal["openai"] = _about(
        "openai: call an OpenAI-compatible chat completions API", example="openai"
    )
    base_url: HttpUrl = _about("the API's base URL", example="http://127.0.0.1:8080/v1")
    model: Text = _about("the model to ask", example="qwen2.5-7b-instruct")
    api_key: SecretRef | None = _about(
        "bearer token for the API", None, example={"env": "OPENAI_API_KEY"}
    )
    timeout: Duration = _about("limit for one request", timedelta(minutes=5))


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

    url: HttpUrl = _about(
        "POST with `Authorization: Bearer` (https, or http to loopback); 3 tries with back-off",
        example="https://alerts.example/memsync",
    )
    token: SecretRef | None = _about("bearer token", None, example={"env": "ALERT_TOKEN"})


class Hook(_Model):
    """Run `command` (an argv, never a shell) and/or POST to `webhook` when a root or view
    enters one of the `on` statuses. `roots`/`views` narrow it (neither: every root and
    view; only one of them: only those)."""

    on: Annotated[
        tuple[Annotated[str, AfterValidator(_hook_status)], ...], AfterValidator(_some)
    ] = _about("statuses that run it", example=["rejected", "conflict", "auth-failed", "error"])
    roots: tuple[Name, ...] | None = _about(
        "only these roots", None, example=["personal"], shown="every root and view"
    )
    views: tuple[Name, ...] | None = _about(
        "only these views (with roots: these roots and views)",
        None,
        example=["team-auth"],
        shown="every root and view",
    )
    command: tuple[Annotated[str, Field(min_length=1)], ...] | None = _about(
        "argv, never a shell; env MEMSYNC_HOOK_ROOT|VIEW, MEMSYNC_HOOK_STATUS",
        None,
        example=["/usr/local/bin/page-me", "--quiet"],
        min_length=1,
    )
    webhook: Webhook | None = _about("POST the result document", None)
    timeout: Duration = _about("a command is killed after this", timedelta(seconds=30))

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
    format: Literal["text", "json"] = _about(
        "text (one line, with a time unless stderr is the journal) or json (one object a"
        " line); `--log-format` wins",
        "text",
    )


class Hub(_Model):
    data_dir: ConfigPath = _about("made by `memsync hub init DIR`", example="/var/lib/memsync-hub")
    listen: Listen = _about("HOST:PORT to serve on", "127.0.0.1:8765")
    header_timeout: Duration = _about(
        "a request head must arrive whole within this", timedelta(seconds=10)
    )
    idle_timeout: Duration = _about(
        "a connection with no request under way closes", timedelta(seconds=60)
    )
    max_connections: Count | None = _about(
        "per worker",
        None,
        shown="the descriptor limit (ulimit -n, LimitNOFILE=) less an eighth of it (at least"
        " 64) and less 256",
    )
    max_streams_per_token: Count = _about("event streams one token may hold at once", 16)
    log_interval: Duration = _about(
        "the same warning is logged at most this often", timedelta(seconds=60)
    )


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

    version: Annotated[Literal[1], BeforeValidator(_version)] = _about(
        "the format of this file; this memsync reads 1", example=1
    )
    state_dir: ConfigPath = Field(
        default_factory=default_state_dir,
        description="where memsync keeps its journal, trusted marks and imported views",
        examples=["~/.local/state/memsync"],
        json_schema_extra={"shown": "$XDG_STATE_HOME/memsync, else ~/.local/state/memsync"},
    )
    control: Control = _about("where `sync-now`, `status`, ... reach a running daemon", Control())
    http: Http | None = _about("serve /metrics, /healthz and /readyz", None)
    roots: dict[Name, Root] = _about(
        "memory roots to keep in sync, by name (letters, digits, '_', '.', '-')",
        {},
        example={"personal": {}},
    )
    views: dict[Name, View] = _about(
        "views imported from other people's roots into one of yours, by name",
        {},
        example={
            "team-auth": {},
            "team-notes": {
                "heading": "team-notes",
                "view_id": "notes",
                "source": {"kind": "git", "path": "shares/notes"},
            },
        },
    )
    roles: dict[Name, Role] = _about(
        "roles run by prune, insight and repair cycles, by name",
        {},
        example={
            "pruner": {"executor": "command"},
            "reconciler": {
                "executor": "command",
                "command": ["claude", "-p", "--allowedTools", "Read,Edit,Bash(git:*)"],
                "timeout": "10m",
            },
            "insight": {"executor": "openai"},
        },
    )
    hub: Hub | None = _about("settings for `memsync hub serve` (its options override them)", None)
    hooks: tuple[Hook, ...] = _about(
        "run a program and/or call a webhook when a root's or view's status changes (a"
        " transition: nothing while a status stays). The JSON result (the `sync-now --json`"
        " or `views pull --json` entry plus previous_status, event, time) is the program's"
        " stdin or the POST body. A failing hook is logged and never blocks a sync",
        (),
    )
    log: Log = _about("how `memsync run` writes its logs on stderr", Log())

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
