"""`memsync provenance`: where an item came from; which items one key introduced (lazy).

Runs in this process (it reads Git history and memsync's journal; `--revert` takes the
root lock like any memsync write, so a running daemon waits for it, never races it).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

import click

from memsync.cli.kit import EXIT_OK, EXIT_VERDICT, App, emit
from memsync.errors import ProblemError, UsageError, require
from memsync.validators.problems import Problem

if TYPE_CHECKING:
    from memsync.config.model import RootSettings
    from memsync.roots.provenance import OpenRoot
    from memsync.wire.provenance import CommitModel

# What `--signer` and `--since` accept (allowlists: nothing else reaches git).
FINGERPRINT_RE = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")
SINCE_RE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?(?:Z|[+-]\d{2}:?\d{2})?)?")


class UnknownRoot(ProblemError):
    """ROOT names no configured root."""

    exit_code = 2
    error_code: ClassVar[str] = "unknown-root"


class UnknownItem(ProblemError):
    """ITEM_ID names no item of the root's graph at HEAD."""

    exit_code = 2
    error_code: ClassVar[str] = "unknown-item"


@click.command()
@click.argument("root")
@click.argument("item_id", required=False)
@click.option("--signer", metavar="FINGERPRINT", help="List the live items this key introduced.")
@click.option("--since", metavar="DATE", help="With --signer: commits since DATE (YYYY-MM-DD).")
@click.option(
    "--revert",
    is_flag=True,
    help="With --signer: remove those items (and their edges) in one commit, through the gate.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
@click.pass_obj
def provenance(
    app: App,
    root: str,
    item_id: str | None,
    signer: str | None,
    since: str | None,
    revert: bool,
    as_json: bool,
) -> int:
    """Where an item came from; what one key added.

    With ITEM_ID: its file and line, the commits that introduced it and last changed it,
    their author, signer key and memsync's admission record. With --signer: every live
    item whose introducing commit that key signed; --revert removes them in one commit.
    """
    if (item_id is None) == (signer is None):
        raise UsageError("give either ITEM_ID or --signer FINGERPRINT", hint="see --help")
    if signer is None and (since is not None or revert):
        raise UsageError("--since and --revert go with --signer")
    if signer is not None and not FINGERPRINT_RE.fullmatch(signer):
        raise UsageError(
            f"--signer {signer!r} is not a key fingerprint",
            hint="give it as `ssh-keygen -lf KEY.pub` prints it: SHA256: and 43 characters",
        )
    if since is not None and not SINCE_RE.fullmatch(since):
        raise UsageError(f"--since {since!r} is not a date", hint="use YYYY-MM-DD")
    settings = app.settings()
    settings_root = settings.root(root)
    if settings_root is None:
        known = ", ".join(r.name for r in settings.roots) or "none"
        raise UnknownRoot(
            f"unknown root {root!r}",
            [Problem("unknown-root", None, None, f"no root named {root!r} is configured")],
            hint=f"configured roots: {known}",
        )
    from memsync.roots.provenance import open_root  # noqa: PLC0415 - git and the graph load here

    opened = open_root(
        root,
        settings_root.path,
        settings.state_dir,
        timeout=settings_root.timeout.total_seconds(),
    )
    if item_id is not None:
        return _one_item(opened, item_id, as_json)
    target = (settings_root, settings.state_dir) if revert else None
    return _one_signer(opened, require(signer, "--signer"), since, target, as_json)


def _one_item(opened: OpenRoot, item_id: str, json: bool) -> int:
    from memsync.roots import provenance as core  # noqa: PLC0415
    from memsync.wire.provenance import ItemProvenanceReport  # noqa: PLC0415

    root, head = opened.name, opened.head
    try:
        found = core.item_provenance(opened.git, opened.layout, head, item_id)
    except core.UnknownItem as exc:
        raise UnknownItem(
            f"no item `{item_id}` in root {root}",
            [Problem("unknown-item", None, None, str(exc))],
            hint="item ids are the `{#id}` of a heading or the `id` of a node bullet",
        ) from None
    model = found.model()
    if json:
        emit(ItemProvenanceReport(root=root, head=head, item=model))
        return EXIT_OK
    click.echo(
        f"{model.item}  {model.kind}{' ' + model.anchor if model.anchor else ''}  "
        f"{model.file}:{model.line}"
    )
    for label, record in (("introduced", model.introduced), ("last changed", model.last_changed)):
        click.echo(f"  {label:<13}{_commit_line(record)}")
    return EXIT_OK


def _commit_line(record: CommitModel) -> str:
    text = (
        f"{record.commit[:12]}  {record.authored_at}  {record.author} <{record.author_email}>  "
        f"signer {record.signer}"
    )
    admission = record.admission
    if admission is not None:
        who = f", role {admission.role} on {admission.executor}" if admission.role else ""
        text += f"  memsync {admission.kind} {admission.relation} ({admission.operation_id}{who})"
    return f"{text}\n  {'':<13}{record.subject}"


def _one_signer(
    opened: OpenRoot,
    signer: str,
    since: str | None,
    revert: tuple[RootSettings, Path] | None,
    json: bool,
) -> int:
    from memsync.roots.revocation import signer_revocation  # noqa: PLC0415
    from memsync.wire.provenance import SignerReport  # noqa: PLC0415

    root, head = opened.name, opened.head
    done = signer_revocation(opened, signer, since, revert=revert)
    found = done.found
    items = [p.model() for p in found.items]
    reverted = done.reverted.model() if done.reverted is not None else None
    report = SignerReport(
        root=root,
        head=head,
        signer=signer,
        since=since,
        signed_commits=len(found.commits),
        items=items,
        revert=reverted,
    )
    if json:
        emit(report)
    else:
        scope = f" since {since}" if since else ""
        click.echo(
            f"{len(items)} live item(s) of {root} introduced by {signer}{scope} "
            f"({len(found.commits)} signed commit(s))"
        )
        for item in items:
            click.echo(
                f"  {item.item:<24} {item.file}:{item.line}  {item.introduced.commit[:12]}  "
                f"{item.introduced.authored_at}  {item.introduced.subject}"
            )
        if reverted is not None:
            click.echo(f"revert: {reverted.status}: {reverted.message}")
            for p in reverted.problems:
                click.echo(f"  {p.code:<20} {p.path or '-'}: {p.message}")
        elif items:
            click.echo("nothing was removed; --revert removes them in one commit")
    if reverted is not None and reverted.status not in ("landed", "noop"):
        return EXIT_VERDICT
    return EXIT_OK
