"""`memsync sync-now` as a command, without click: one sync cycle per root, through the
running daemon when it serves this configuration, else in this process. The click command
(`cli.sync`) and the plain forms `__main__` runs without click (`cli.plain`) both run
`sync_now` here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from memsync.cli.app import EXIT_OK, EXIT_VERDICT, App, emit
from memsync.errors import ConfigError, UsageError

TYPE_CHECKING = False  # `typing` loads after the cycle's first git processes start (issue 18)
if TYPE_CHECKING:
    from pathlib import Path

    from memsync.config.model import RootSettings, Settings
    from memsync.roots.cycle import SyncOptions
    from memsync.roots.layout import RootLayout
    from memsync.roots.repairing import Settler
    from memsync.roots.result import SyncResult
    from memsync.validators.cache import ParseCache
    from memsync.validators.graph import GraphValidator
    from memsync.validators.policy import SyncPolicy


def sync_now(
    app: App,
    roots: Sequence[str],
    as_json: bool,
    accept_rewrite: bool,
    no_push: bool,
    dry_run: bool,
) -> int:
    """Run one sync cycle for each named root (all configured roots when none is named)."""
    import gc  # noqa: PLC0415

    from memsync.progress import for_terminal  # noqa: PLC0415
    from memsync.roots.cycle import SyncOptions, sync_root  # noqa: PLC0415
    from memsync.roots.result import HELD  # noqa: PLC0415
    from memsync.values import replace  # noqa: PLC0415

    # The plain form loads the code with the collector off (`__main__`): it stays off while
    # the first cycle loads the gate beside its first git processes (`_Graph`).
    thaw = not gc.isenabled()

    settings = app.settings()
    chosen = _choose(settings, roots)
    options = SyncOptions(
        accept_rewrite=accept_rewrite, no_push=no_push, dry_run=dry_run, wait=None
    )
    # This process exits after its cycles: the pack fold runs behind it (`packs.fold_behind`),
    # unless a service manager runs the command (a timer's oneshot unit): systemd sets
    # INVOCATION_ID for a unit's processes and stops the unit, killing what is left in it,
    # once the command exits, so a fold behind it would never finish. There it waits.
    in_process = replace(options, upkeep_behind="INVOCATION_ID" not in os.environ)
    results = _sync_through_daemon(settings, roots, options)
    if results is None:  # no daemon: run the cycles in this process (progress on a terminal)
        graph = _Graph(settings.state_dir, thaw=thaw)
        try:
            with for_terminal(as_json) as progress:
                shown = replace(in_process, progress=progress, repair=_make_repairer)
                results = [sync_root(r, settings.state_dir, shown, graph) for r in chosen]
        finally:
            graph.close()
    if as_json:
        # The model's text without pydantic (`wire.documents`; an odd value: the model).
        from memsync.wire.documents import sync_report  # noqa: PLC0415

        emit(sync_report(r.document() for r in results))
    else:
        from memsync.cli import text  # noqa: PLC0415 - the words, once the cycles answered

        for r in results:
            text.print_result(r)
    # A paused root is held because the operator asked for it: not a failure (exit 0).
    return EXIT_OK if all(r.ok or r.status in HELD for r in results) else EXIT_VERDICT


class _Graph:
    """The process's graph validator, made when the first cycle asks for it (after its first
    git processes started: the validators load while they run), over the lineage and shape
    records of each root's last validated tree: a fresh process joins and checks only the
    files that changed since (a cache: damaged or foreign records are ignored).
    With `thaw` (the collector is off: the plain form), what is loaded by then is frozen
    (never walked again) and the collector turned on: a cycle's validation runs with it."""

    def __init__(self, state_dir: Path, *, thaw: bool = False) -> None:
        self.state_dir = state_dir
        self.thaw = thaw
        self.made: tuple[ParseCache, GraphValidator] | None = None

    def __call__(self) -> GraphValidator:
        if self.made is None:
            from memsync.validators.cache import STATE_CACHE_DIR, open_records  # noqa: PLC0415
            from memsync.validators.rightmemory import default_graph_validator  # noqa: PLC0415

            cache = open_records(self.state_dir / STATE_CACHE_DIR)
            self.made = cache, default_graph_validator(cache=cache)
            if self.thaw:
                import gc  # noqa: PLC0415 - built in

                gc.freeze()
                gc.enable()
        return self.made[1]

    def close(self) -> None:
        if self.made is not None:
            self.made[0].close()


def _sync_through_daemon(
    settings: Settings, roots: Sequence[str], options: SyncOptions
) -> list[SyncResult] | None:
    """The running daemon's verdicts for these roots, or None when no daemon answers."""
    from memsync.daemon.client import DaemonUnavailable, call_serving  # noqa: PLC0415

    def body() -> dict[str, object]:  # made when a daemon may answer (issue 18: cold path)
        from memsync.wire.requests import SyncRequest  # noqa: PLC0415

        return SyncRequest(
            roots=list(roots),
            accept_rewrite=options.accept_rewrite,
            dry_run=options.dry_run,
            no_push=options.no_push,
        ).document()

    try:
        answer = call_serving(
            settings.control_socket, settings.config_path, "POST", "/v1/sync", body
        )
    except DaemonUnavailable:
        return None
    from memsync.roots.result import SyncResult  # noqa: PLC0415
    from memsync.wire.shape import SYNC_REPORT, fit  # noqa: PLC0415

    fitted = fit(answer, SYNC_REPORT)  # the model's exact shape: read without pydantic
    if fitted is not None:
        return [SyncResult.from_document(d) for d in fitted["results"]]
    from memsync.wire.cli import SyncReport  # noqa: PLC0415 - pydantic, for an odd answer only

    return [SyncResult.from_model(m) for m in SyncReport.model_validate(answer).results]


def _choose(settings: Settings, names: Sequence[str]) -> list[RootSettings]:
    known = {r.name: r for r in settings.roots}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(
            f"unknown root(s): {', '.join(unknown)}",
            hint=f"configured roots: {', '.join(known) or 'none'}",
        )
    if not known:
        raise ConfigError("the configuration lists no roots", hint="add one under `roots:`")
    return [known[n] for n in names] if names else list(known.values())


def _make_repairer(
    root: RootSettings, layout: RootLayout, policy: SyncPolicy, graph: GraphValidator, branch: str
) -> Settler:
    """The repair role for a root whose merge conflicted: `memsync.cycles` loads only then
    (a cold sync-now that admits cleanly never imports it)."""
    from memsync.cycles.repairer import make_oneshot_repairer  # noqa: PLC0415

    return make_oneshot_repairer(root, layout, policy, graph, branch)
