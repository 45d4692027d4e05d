"""`memsync validate PATH`: check a root's work tree or one commit (loaded lazily)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click

from memsync.cli import text
from memsync.cli.kit import EXIT_OK, EXIT_VERDICT, emit
from memsync.errors import UsageError


@click.command()
@click.argument("path", type=click.Path(path_type=Path, exists=True, file_okay=False))
@click.option("--rev", metavar="REV", help="Validate this commit instead of the work tree.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document.")
def validate(path: Path, rev: str | None, as_json: bool) -> int:
    """Check a root's paths, modes, names and memory graph (work tree, or one commit)."""
    from memsync.config.schema import default_state_dir  # noqa: PLC0415
    from memsync.roots.disktree import disk_tree_view  # noqa: PLC0415
    from memsync.transports.git import Git  # noqa: PLC0415
    from memsync.transports.repoconfig import refusing_problems, repo_config_problems  # noqa: PLC0415
    from memsync.validators.cache import STATE_CACHE_DIR, open_persistent  # noqa: PLC0415
    from memsync.validators.gate import validate_tree  # noqa: PLC0415
    from memsync.validators.policy import SyncPolicy  # noqa: PLC0415
    from memsync.validators.rightmemory import default_graph_validator  # noqa: PLC0415
    from memsync.wire.cli import ProblemModel, ValidateReport  # noqa: PLC0415

    policy = SyncPolicy()
    if Git(path).git_dir() is not None and refusing_problems(Git(path)):
        # git does not run on this root: say why (every key), and read nothing through it.
        refused = repo_config_problems(path)
        out = ValidateReport(
            valid=False,
            root=str(path.absolute()),
            rev=rev,
            files=0,
            items=0,
            problems=[ProblemModel.of(p) for p in refused],
            tracked=0,
            memory_files=0,
        )
        if as_json:
            emit(out)
        else:
            text.print_validation(f"{path} at {rev}" if rev else str(path), out)
        return EXIT_VERDICT
    if rev is not None:
        git = Git(path)
        commit = git.rev_parse(rev)
        if commit is None:
            raise UsageError(
                f"{rev!r} is not a commit in {path}",
                hint="give a branch, tag or commit id that exists",
            )
        tree = git.tree_view(commit)
    else:
        tree = disk_tree_view(path)
    # Files parsed by an earlier run (same bytes) are not parsed again; the store is only a
    # cache: damaged or foreign entries are ignored, and it may be deleted at any time.
    state_dir = default_state_dir()
    with contextlib.suppress(OSError):  # no usable state dir: the cache stays in memory
        state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    cache = open_persistent(state_dir / STATE_CACHE_DIR)
    try:
        graph = default_graph_validator(enforce_capacity=True, cache=cache)
        report = validate_tree(tree, policy, graph)
    finally:
        cache.close()
    # The repository's own config is the root's too, whichever commit is checked.
    problems = [*report.problems, *repo_config_problems(path)]
    out = ValidateReport(
        valid=not problems,
        root=str(path.absolute()),
        rev=rev,
        files=report.files,
        items=report.items,
        problems=[ProblemModel.of(p) for p in problems],
        tracked=len(tree.entries),
        memory_files=report.files,
    )
    if as_json:
        emit(out)
    else:
        text.print_validation(f"{path} at {rev}" if rev else str(path), out)
    return EXIT_VERDICT if problems else EXIT_OK
