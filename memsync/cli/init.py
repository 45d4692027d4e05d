"""`memsync init PATH`: create a memory root (loaded lazily)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from memsync.cli.kit import EXIT_OK, App, emit
from memsync.config.paths import find_config_path
from memsync.errors import ConfigError
from memsync.redaction import redact


@click.command()
@click.argument("path", type=click.Path(path_type=Path))
@click.option(
    "--upstream",
    metavar="URL",
    help="Git remote to use as `origin`; an empty "
    "upstream receives the baseline, an existing one is joined.",
)
@click.option("--branch", default="main", show_default=True, help="Branch name.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def init(app: App, path: Path, upstream: str | None, branch: str, as_json: bool) -> int:
    """Create a valid RightMemory-format memory root at PATH.

    When the configuration already names a root at PATH, its `sync.https` or `sync.ssh`
    credentials reach a private upstream and its `signing.key` signs the baseline commit.
    """
    from memsync.progress import for_terminal  # noqa: PLC0415
    from memsync.roots.create import init_root  # noqa: PLC0415

    configured = None
    if find_config_path(app.config_path) is not None:  # optional here: a broken one is unused
        with contextlib.suppress(ConfigError):
            configured = app.settings().root_at(path)
    credentials = configured.git_credentials if configured else None
    signing = configured.signing if configured else None
    with for_terminal(as_json) as progress:
        done = init_root(
            path,
            upstream=upstream,
            branch=branch,
            credentials=credentials,
            progress=progress,
            signing=signing,
        )
    if as_json:  # the wire model (pydantic) loads for the document only
        from memsync.wire.cli import InitReport  # noqa: PLC0415

        emit(
            InitReport(
                path=str(done.path),
                created=done.created,
                joined=done.joined,
                head=done.head,
                branch=done.branch,
                upstream=redact(done.upstream) if done.upstream else None,
                pushed=done.pushed,
                message=done.message,
            )
        )
    else:
        click.echo(f"{done.path}: {done.message} (branch {done.branch}, head {done.head[:12]})")
        if done.upstream is None:
            click.echo(
                "next: add an upstream with `git remote add origin URL`, then list the "
                "root under `roots:` in your memsync config"
            )
    return EXIT_OK
