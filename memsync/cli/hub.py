"""Commands for the hub: create it, serve it, manage its tokens (thin shells over
`memsync.hub`)."""

from __future__ import annotations

import logging
from pathlib import Path

import click

from memsync import timefmt
from memsync.cli.kit import EXIT_OK, App, emit
from memsync.config.units import parse_duration
from memsync.errors import UsageError
from memsync.hub.tokens import hub_init, open_store

# The server stack (aiohttp, the hub's app, its workers) loads for `hub serve` only and
# the wire models (pydantic) for a `--json` document only: `hub init` and the token
# commands are short jobs that read and write the token store (issue 18).

# -- hub --------------------------------------------------------------------------------------


@click.group()
def hub() -> None:
    """Run a memsync hub: signed view revisions, tokens, change events."""


def _hub_dir(app: App, data: Path | None) -> Path:
    if data is not None:
        return data
    settings = app.settings()
    if settings.hub is None:
        raise UsageError("no hub data dir", hint="pass --data DIR or set hub.data_dir")
    return settings.hub.data_dir


@hub.command("init")
@click.argument("data_dir", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def hub_init_cmd(data_dir: Path, as_json: bool) -> int:
    """Create a hub data dir and print the first admin token (shown this once)."""
    raw = hub_init(data_dir)
    if as_json:
        from memsync.wire.hub import TokenCreated  # noqa: PLC0415

        token_id = raw.split("_")[1]
        emit(
            TokenCreated(
                id=token_id, token=raw, scopes=["admin"], label="initial admin", expires_at=None
            )
        )
    else:
        click.echo(raw)
        click.echo(
            f"hub data dir created at {data_dir}; the admin token above is shown only "
            "once: store it now",
            err=True,
        )
    return EXIT_OK


@hub.command("serve")
@click.option("--data", "data", type=click.Path(path_type=Path), help="The hub data dir.")
@click.option(
    "--listen",
    default=None,
    metavar="HOST:PORT",
    help="Address to listen on (default: hub.listen, else 127.0.0.1:8765).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=None,
    metavar="N",
    help="Worker processes sharing the port (default: the number of cores; 1 serves in "
    "this process).",
)
@click.option(
    "--header-timeout",
    metavar="DURATION",
    help="A request head must arrive whole within this (default: hub.header_timeout, else 10s).",
)
@click.option(
    "--idle-timeout",
    metavar="DURATION",
    help="Close a connection with no request under way after this (default: "
    "hub.idle_timeout, else 60s).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(min=1),
    metavar="N",
    help="Connections one worker holds; more are closed at once (default: "
    "hub.max_connections, else the descriptor limit less an eighth (at least 64) and "
    "less 256).",
)
@click.option(
    "--max-streams-per-token",
    type=click.IntRange(min=1),
    metavar="N",
    help="Event streams one token may hold; more get 429 (default: "
    "hub.max_streams_per_token, else 16).",
)
@click.option(
    "--stop-grace",
    metavar="DURATION",
    help="After SIGTERM, kill a worker still running after this (default: 20s).",
)
@click.pass_obj
def hub_serve(
    app: App,
    data: Path | None,
    listen: str | None,
    workers: int | None,
    header_timeout: str | None,
    idle_timeout: str | None,
    max_connections: int | None,
    max_streams_per_token: int | None,
    stop_grace: str | None,
) -> int:
    """Serve views, tokens and change events until SIGTERM or Ctrl-C.

    With several workers, this process supervises them: if one of them dies, the hub
    stops them all and exits 3 (for systemd to restart it).

    With --data, the configuration is not read; otherwise the `hub:` section gives the
    data dir, the address and the limits the options above do not set.
    """
    from memsync.tlstrust import no_trust_store  # noqa: PLC0415

    with no_trust_store(verifying=True):  # the server stack: a hub is never a client
        from memsync.hub.guard import Limits  # noqa: PLC0415
        from memsync.hub.serve import run_hub  # noqa: PLC0415
        from memsync.hub.workers import STOP_GRACE, default_workers  # noqa: PLC0415

    data_dir = _hub_dir(app, data)
    settings = app.settings().hub if data is None else None
    # With --data the `hub:` section's defaults are the hub's own: no schema is loaded.
    base = settings or Unconfigured(data_dir)
    limits = Limits(
        header_timeout=_seconds("--header-timeout", header_timeout, base.header_timeout),
        idle_timeout=_seconds("--idle-timeout", idle_timeout, base.idle_timeout),
        max_connections=max_connections or base.max_connections,
        max_streams_per_token=max_streams_per_token or base.max_streams_per_token,
    )
    if not app.debug:  # what an operator wants to see: serving where, revisions, stopping
        logging.getLogger("memsync.hub").setLevel(logging.INFO)
        logging.getLogger("memsync.hub.access").setLevel(logging.WARNING)  # not every GET
    run_hub(
        data_dir,
        listen or base.listen,
        workers if workers is not None else default_workers(),
        limits,
        base.log_interval,
        _seconds("--stop-grace", stop_grace, STOP_GRACE),
    )
    return EXIT_OK


DEFAULT_LISTEN = "127.0.0.1:8765"


class Unconfigured:
    """`hub serve --data DIR`: the `hub:` section's settings with only `data_dir` given, as
    `config.model.default_hub` makes them, without loading the configuration's schema
    (pydantic; tests/unit/test_hub_serve_defaults.py proves the two equal)."""

    def __init__(self, data_dir: Path) -> None:
        from memsync.hub.guard import (  # noqa: PLC0415
            HEADER_TIMEOUT,
            IDLE_TIMEOUT,
            MAX_STREAMS_PER_TOKEN,
        )
        from memsync.hub.ratelog import LOG_INTERVAL  # noqa: PLC0415

        self.data_dir = data_dir
        self.listen = DEFAULT_LISTEN
        self.header_timeout = HEADER_TIMEOUT
        self.idle_timeout = IDLE_TIMEOUT
        self.max_connections: int | None = None
        self.max_streams_per_token = MAX_STREAMS_PER_TOKEN
        self.log_interval = LOG_INTERVAL


def _seconds(option: str, given: str | None, default: float) -> float:
    if given is None:
        return default
    try:
        seconds = parse_duration(given).total_seconds()
    except ValueError as exc:
        raise UsageError(f"{option}: {exc}") from exc
    if seconds <= 0:
        raise UsageError(f"{option} must be more than 0, not {given!r}")
    return seconds


@hub.group("token")
def hub_token() -> None:
    """Create, list and revoke hub tokens."""


@hub_token.command("create")
@click.option("--data", "data", type=click.Path(path_type=Path), help="The hub data dir.")
@click.option(
    "--scope",
    "scopes",
    multiple=True,
    required=True,
    metavar="SCOPE",
    help="read:<view>, publish:<view>, root:<root>, notify:<root>, <kind>:*, metrics "
    "(GET /metrics only) or admin (repeatable; see above).",
)
@click.option("--label", help="A note to recognise the token by.")
@click.option("--expires", metavar="DURATION", help="Lifetime such as 90d (default: none).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def hub_token_create(
    app: App,
    data: Path | None,
    scopes: tuple[str, ...],
    label: str | None,
    expires: str | None,
    as_json: bool,
) -> int:
    """Create a token; the raw token is printed once.

    \b
    Scopes (views and roots are separate: read:team does not cover root team):
      read:<view>     read a view: manifest, package, revisions, `revision` events
      publish:<view>  publish revisions of a view (and read it)
      root:<root>     receive `upstream` events of a root (/v1/events?root=<root>)
      notify:<root>   notify a root (POST /v1/roots/<root>/notify) and receive its events
      <kind>:*        the same for every view or root, e.g. read:* or root:*
      admin           everything
    """
    store = open_store(_hub_dir(app, data))
    try:
        lifetime = parse_duration(expires) if expires else None
        token_id, raw = store.create(list(scopes), label=label, expires=lifetime)
        info = next(t for t in store.list() if t.id == token_id)
    finally:
        store.close()
    if as_json:
        from memsync.wire.hub import TokenCreated  # noqa: PLC0415

        entry = info.model(timefmt.now())
        emit(
            TokenCreated(
                id=token_id,
                token=raw,
                scopes=entry.scopes,
                label=entry.label,
                expires_at=entry.expires_at,
            )
        )
    else:
        click.echo(raw)
        click.echo(f"token {token_id} created; it is shown only once", err=True)
    return EXIT_OK


@hub_token.command("list")
@click.option("--data", "data", type=click.Path(path_type=Path), help="The hub data dir.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def hub_token_list(app: App, data: Path | None, as_json: bool) -> int:
    """List tokens (never their secrets)."""
    store = open_store(_hub_dir(app, data))
    try:
        now = timefmt.now()
        entries = [t.model(now) for t in store.list()]
    finally:
        store.close()
    if as_json:
        from memsync.wire.hub import TokenList  # noqa: PLC0415

        emit(TokenList(tokens=entries))
    else:
        for e in entries:
            click.echo(
                f"{e.id}  {e.state:<8} {' '.join(e.scopes):<30} "
                f"expires {e.expires_at or 'never'}  {e.label or ''}"
            )
    return EXIT_OK


@hub_token.command("revoke")
@click.argument("token_id")
@click.option("--data", "data", type=click.Path(path_type=Path), help="The hub data dir.")
@click.pass_obj
def hub_token_revoke(app: App, token_id: str, data: Path | None) -> int:
    """Revoke a token at once (the running hub refuses it on the next request)."""
    store = open_store(_hub_dir(app, data))
    try:
        changed = store.revoke(token_id)
    finally:
        store.close()
    click.echo(f"token {token_id} {'revoked' if changed else 'was already revoked'}")
    return EXIT_OK
