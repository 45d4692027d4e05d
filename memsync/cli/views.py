"""Commands for shared views and signing keys: thin shells over `memsync.views`."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import click

from memsync import timefmt
from memsync.cli.kit import EXIT_OK, EXIT_VERDICT, App, emit
from memsync.config.units import format_size, parse_duration, parse_size
from memsync.errors import UsageError
from memsync.progress import for_terminal
from memsync.views.archive import MAX_FILE_CEILING, ArchiveLimits

# Each command loads its own part of the view stack (issue 18): `keys generate` and `views
# build` no HTTP client, `views build` and `verify` no pull.
if TYPE_CHECKING:
    from memsync.views.build import StaticBuild
    from memsync.views.verify import ViewCheck
    from memsync.wire import ViewsPullReport

FC = TypeVar("FC", bound=Callable[..., object])


def _file_cap(text: str) -> ArchiveLimits:
    """`--max-file-size SIZE`: the package limits with that per-file cap."""
    try:
        size = parse_size(text)
    except ValueError as exc:
        raise UsageError(f"--max-file-size: {exc}") from exc
    if not 1 <= size <= MAX_FILE_CEILING:
        raise UsageError(
            f"--max-file-size must be from 1B to {format_size(MAX_FILE_CEILING)} "
            f"(the package total), not {text}"
        )
    return ArchiveLimits(max_file=size)


def _max_file_size_option(what: str) -> Callable[[FC], FC]:
    return click.option(
        "--max-file-size",
        "max_file_size",
        default="1MiB",
        show_default=True,
        metavar="SIZE",
        help=f"The per-file cap of the package {what} (at most 10MiB); consumers must "
        "allow as much with views.<name>.max_file_size.",
    )


# -- keys -------------------------------------------------------------------------------------


@click.group()
def keys() -> None:
    """Ed25519 signing keys for view manifests."""


@keys.command("generate")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="Where to write the private key (created with mode 0600; never overwritten).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def keys_generate(out: Path, as_json: bool) -> int:
    """Write a new private key and print its public key (`ed25519:…`) to pin on consumers."""
    from memsync.views.keys import generate_key, key_id, parse_public_key  # noqa: PLC0415
    from memsync.wire import KeyReport  # noqa: PLC0415

    public = generate_key(out)
    report = KeyReport(path=str(out), public_key=public, key_id=key_id(parse_public_key(public)))
    if as_json:
        emit(report)
    else:
        click.echo(public)
        click.echo(
            f"private key written to {out} (mode 0600); pin the public key above in "
            "each consumer's views.<name>.trust.keys",
            err=True,
        )
    return EXIT_OK


# -- views ------------------------------------------------------------------------------------


@click.group()
def views() -> None:
    """Build, publish, verify and pull shared views (signed memory packages)."""


@views.command("pull")
@click.argument("names", nargs=-1, metavar="[VIEW]...")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def views_pull(app: App, names: tuple[str, ...], as_json: bool) -> int:
    """Refresh imported views now (all configured views when none is named)."""
    from memsync.wire import ViewsPullReport  # noqa: PLC0415

    settings = app.settings()
    known = {v.name: v for v in settings.views}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(
            f"unknown view(s): {', '.join(unknown)}",
            hint=f"configured views: {', '.join(known) or 'none'}",
        )
    chosen = [known[n] for n in names] if names else list(known.values())
    report = _pull_through_daemon(settings.control_socket, settings.config_path, names)
    if report is None:  # no daemon: pull in this process
        # (the HTTP box loads aiohttp, without its CA bundle loads, for a view over HTTP only)
        from memsync.views.pull import pull_views  # noqa: PLC0415

        with for_terminal(as_json) as progress:  # on a terminal: bytes and files
            results = asyncio.run(pull_views(chosen, settings.state_dir, progress=progress))
        report = ViewsPullReport(results=[r.model() for r in results])
    if as_json:
        emit(report)
    else:
        for r in report.results:
            revision = "-" if r.revision is None else str(r.revision)
            click.echo(f"{r.view:<16} {r.status:<12} rev {revision:<6} {r.message}")
            for p in r.problems:
                click.echo(f"{'':<16}   {p.code:<20} {p.path or '-'}: {p.message}")
    ok = all(r.status in ("pulled", "current", "paused") for r in report.results)
    return EXIT_OK if ok else EXIT_VERDICT


def _pull_through_daemon(
    socket: Path, config: Path | None, names: tuple[str, ...]
) -> ViewsPullReport | None:
    """The running daemon's pull verdicts, or None when no daemon serving `config` answers."""
    from memsync.daemon.client import DaemonUnavailable, call_serving  # noqa: PLC0415
    from memsync.wire import ViewsPullReport  # noqa: PLC0415
    from memsync.wire.requests import PullRequest  # noqa: PLC0415

    try:
        answer = call_serving(
            socket, config, "POST", "/v1/views/pull", PullRequest(views=list(names)).document()
        )
    except DaemonUnavailable:
        return None
    return ViewsPullReport.model_validate(answer)


@views.command("verify")
@click.argument("source", metavar="DIR_OR_URL")
@click.option(
    "--key",
    "keys_",
    multiple=True,
    metavar="PUBKEY",
    help="A pinned public key `ed25519:…` (repeat for several).",
)
@click.option("--threshold", default=1, show_default=True, help="Distinct keys that must sign.")
@click.option("--view-id", help="The view id the manifest must name (default: its own).")
@click.option("--heading", help="Local heading to parse the package under (default: view id).")
@click.option("--allow-unsigned", is_flag=True, help="Skip the signature checks.")
@_max_file_size_option("checked")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def views_verify(
    source: str,
    keys_: tuple[str, ...],
    threshold: int,
    view_id: str | None,
    heading: str | None,
    allow_unsigned: bool,
    max_file_size: str,
    as_json: bool,
) -> int:
    """Check a published view exactly as a consumer would, without importing it.

    DIR_OR_URL is a view's directory in the static layout (holding `manifest` and
    `package`) or its URL (`https://hub/v1/views/ID`).
    """
    from memsync.tlstrust import no_trust_store  # noqa: PLC0415

    with no_trust_store():  # (aiohttp's context for ssl=False: see tlstrust.py)
        from memsync.views.verify import verify_view  # noqa: PLC0415

    if not keys_ and not allow_unsigned:
        raise UsageError("give at least one --key (or --allow-unsigned)")
    if not source.startswith(("http://", "https://")):
        base = Path(source)
        if not (base / "manifest").is_file() or not (base / "package").is_file():
            raise UsageError(
                f"{source} holds no `manifest` and `package`",
                hint="point at DIR/v1/views/<VIEW_ID> of a static export",
            )
    check = verify_view(
        source,
        keys=keys_,
        threshold=threshold,
        view_id=view_id,
        heading=heading,
        allow_unsigned=allow_unsigned,
        limits=_file_cap(max_file_size),
    )
    _render_verify(check, as_json)
    return EXIT_OK if check.valid else EXIT_VERDICT


def _render_verify(check: ViewCheck, as_json: bool) -> None:
    """The report (CONTRACT §2): the JSON document, or the lines a person reads."""
    from memsync.wire import ProblemModel, ViewVerifyReport  # noqa: PLC0415

    report = ViewVerifyReport(
        valid=check.valid,
        source=check.source,
        view_id=check.view_id,
        revision=check.revision,
        expires=check.expires,
        files=check.files,
        items=check.items,
        signed_by=list(check.signed_by),
        problems=[ProblemModel.of(p) for p in check.problems],
    )
    if as_json:
        emit(report)
        return
    verdict = "valid" if report.valid else f"{len(report.problems)} problem(s)"
    click.echo(
        f"{check.source}: {verdict} (view {report.view_id}, revision {report.revision}, "
        f"expires {report.expires}, {report.items} items)"
    )
    for p in report.problems:
        click.echo(f"  {p.code:<22} {p.path or '-'}: {p.message}")


@views.command("build")
@click.argument("root_path", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.argument("view_id")
@click.option(
    "--out",
    "out",
    required=True,
    type=click.Path(path_type=Path),
    help="Output directory; the view lands in OUT/v1/views/VIEW_ID/.",
)
@click.option(
    "--key",
    "key_files",
    multiple=True,
    type=click.Path(path_type=Path),
    help="Private key to sign with (repeat for several; none: unsigned).",
)
@click.option(
    "--revision",
    type=int,
    default=None,
    help="Sign exactly this revision (it must be above the one OUT holds). "
    "Default: OUT's current revision plus one, or 1.",
)
@click.option(
    "--expires",
    default="30d",
    show_default=True,
    metavar="DURATION",
    help="How long consumers may trust this manifest.",
)
@_max_file_size_option("built")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def views_build(
    root_path: Path,
    view_id: str,
    out: Path,
    key_files: tuple[Path, ...],
    revision: int | None,
    expires: str,
    max_file_size: str,
    as_json: bool,
) -> int:
    """Render shared_views/VIEW_ID/recipe.toml of a root into a signed static package.

    The revision is the one OUT already holds plus one (1 for a new OUT); unchanged
    content builds nothing. Any static HTTP server (or a CDN) can then serve OUT;
    consumers point `views.<name>.source.url` at `https://HOST/v1/views/VIEW_ID`.
    """
    from memsync.views.build import build_static  # noqa: PLC0415
    from memsync.views.keys import load_private_key  # noqa: PLC0415

    if revision is not None and revision < 1:
        raise UsageError("--revision must be 1 or more")
    lifetime = parse_duration(expires)
    limits = _file_cap(max_file_size)
    keys_ = [load_private_key(k) for k in key_files]
    done = build_static(
        root_path,
        view_id,
        out,
        keys=keys_,
        expires=lifetime,
        limits=limits,
        revision=revision,
        now=timefmt.now(),
    )
    _render_build(done, view_id, signed=bool(keys_), as_json=as_json)
    return EXIT_OK


def _render_build(done: StaticBuild, view_id: str, *, signed: bool, as_json: bool) -> None:
    """The report (CONTRACT §2): the JSON document, or the line a person reads."""
    from memsync.wire import ViewBuildReport  # noqa: PLC0415

    built, decided, target = done.built, done.decided, done.target
    report = ViewBuildReport(
        view_id=view_id,
        status="unchanged" if decided.unchanged else "built",
        revision=decided.revision,
        out=str(target),
        package_sha256=built.sha256,
        package_length=len(built.archive),
        files=sorted(built.files),
        signed=signed,
    )
    if as_json:
        emit(report)
    elif decided.unchanged:
        click.echo(
            f"{target}: view {view_id} content unchanged; revision {decided.revision} stays "
            "current (nothing built)"
        )
    else:
        renewed = " (same content, expiry renewed)" if decided.renews else ""
        click.echo(
            f"{target}: view {view_id} revision {decided.revision}{renewed}, "
            f"{len(built.files)} files, {built.items} items, sha256 {built.sha256[:16]}…, "
            f"{'signed' if signed else 'UNSIGNED'}"
        )


@views.command("publish")
@click.argument("view_id")
@click.option(
    "--root",
    "root_path",
    required=True,
    type=click.Path(path_type=Path, exists=True, file_okay=False),
    help="The memory root holding shared_views/VIEW_ID/.",
)
@click.option("--hub", "hub_url", required=True, metavar="URL", help="The hub's base URL.")
@click.option(
    "--token",
    "token_ref",
    required=True,
    metavar="SECRETREF",
    help="env:NAME, file:PATH or credential:NAME holding a publish token.",
)
@click.option(
    "--key",
    "key_files",
    multiple=True,
    required=True,
    type=click.Path(path_type=Path),
    help="Private key to sign with (repeatable).",
)
@click.option("--expires", default="30d", show_default=True, metavar="DURATION")
@click.option(
    "--allow-http",
    is_flag=True,
    help="Accepted for compatibility: the publish token never goes over plain http to a "
    "non-loopback hub (use https, or http to loopback).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def views_publish(
    view_id: str,
    root_path: Path,
    hub_url: str,
    token_ref: str,
    key_files: tuple[Path, ...],
    expires: str,
    allow_http: bool,
    as_json: bool,
) -> int:
    """Build, sign and upload the next revision (nothing when the content is unchanged)."""
    from memsync.secrets import resolve_header  # noqa: PLC0415
    from memsync.tlstrust import no_trust_store  # noqa: PLC0415
    from memsync.views.keys import load_private_key  # noqa: PLC0415

    with no_trust_store():  # (aiohttp's context for ssl=False: see tlstrust.py)
        from memsync.views.publish import PublishRefused, publish_view, secret_ref  # noqa: PLC0415
    from memsync.wire import ProblemModel, ViewPublishReport  # noqa: PLC0415

    token = resolve_header(secret_ref(token_ref), where="--token")
    keys_ = [load_private_key(k) for k in key_files]
    try:
        done = asyncio.run(
            publish_view(
                root_path,
                view_id,
                hub_url,
                token,
                keys_,
                allow_http=allow_http,
                expires=parse_duration(expires),
            )
        )
    except PublishRefused as exc:
        if not as_json:
            raise
        emit(
            ViewPublishReport(
                view_id=view_id,
                status="refused",
                revision=0,
                package_sha256="",
                message=exc.message,
                problems=[ProblemModel.of(p) for p in exc.problems],
            )
        )
        return EXIT_VERDICT
    report = ViewPublishReport(
        view_id=view_id,
        status=done.status,
        revision=done.revision,
        package_sha256=done.sha256,
        message=done.message,
    )
    if as_json:
        emit(report)
    else:
        click.echo(f"{view_id}: {done.message}")
    return EXIT_OK
