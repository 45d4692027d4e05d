"""`memsync validate PATH`: check a root's work tree or one commit (loaded lazily)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from memsync.cli import text
from memsync.cli.kit import EXIT_OK, EXIT_VERDICT, emit

if TYPE_CHECKING:
    from memsync.roots.check import RootCheck


@click.command()
@click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--rev", metavar="REV", help="Validate this commit instead of the work tree.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def validate(path: Path, rev: str | None, as_json: bool) -> int:
    """Check a root's paths, modes, names and memory graph (work tree, or one commit)."""
    from memsync.roots.check import check_root  # noqa: PLC0415 - git, validators

    result = check_root(path, rev)
    render(path, result, as_json)
    return EXIT_OK if result.valid else EXIT_VERDICT


def render(path: Path, result: RootCheck, as_json: bool) -> None:
    """The report (CONTRACT §2): the JSON document (the wire model's text, written without
    pydantic: `wire.documents`), or the lines a person reads."""
    if not as_json:
        text.print_validation(f"{path} at {result.rev}" if result.rev else str(path), result)
        return
    from memsync.wire.documents import validate_report  # noqa: PLC0415 - the model's text

    problems = [p.document() for p in result.problems]
    emit(
        validate_report(
            {
                "valid": result.valid,
                "root": str(result.root),
                "rev": result.rev,
                "files": result.files,
                "items": result.items,
                "problems": problems,
                "tracked": result.tracked,
                "memory_files": result.memory_files,
            }
        )
    )
