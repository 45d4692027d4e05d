"""`memsync cycle prune|insight ROOT` as a command, without click: one maintenance turn
now, through the running daemon when it serves this configuration, else in this process.
The click command (`cli.cycle`) and the plain form `__main__` runs without click
(`cli.plain`) both run `turn` here.
"""

from __future__ import annotations

from memsync.cli.app import EXIT_OK, EXIT_VERDICT, App, echo, emit, emit_document
from memsync.errors import UsageError


def turn(app: App, kind: str, root: str, force: bool, as_json: bool) -> int:
    """Run one `kind` turn (prune or insight) for `root`; print its report."""
    from memsync.cycles.report import Report  # noqa: PLC0415
    from memsync.daemon.client import DaemonUnavailable, call_serving  # noqa: PLC0415

    settings = app.settings()
    if settings.root(root) is None:
        known = ", ".join(r.name for r in settings.roots) or "none"
        raise UsageError(f"unknown root {root!r}", hint=f"configured roots: {known}")

    def body() -> dict[str, object]:  # made when a daemon may answer
        from memsync.wire.requests import CycleRequest  # noqa: PLC0415

        return CycleRequest(root=root, force=force).document()

    try:
        answer = call_serving(
            settings.control_socket, settings.config_path, "POST", f"/v1/cycles/{kind}", body
        )
    except DaemonUnavailable:
        # A one-shot process: the role stack for the configured executor loads here, and
        # git answers what GitPython would (`resident=False`: not worth its import).
        import gc  # noqa: PLC0415 - built in

        # Loading makes thousands of objects and no garbage cycles: the collector waits,
        # and what is loaded by then is frozen (never walked again by the turn's collections).
        gc.disable()
        try:
            from memsync.cycles.runner import cycle_now  # noqa: PLC0415
        finally:
            gc.freeze()
            gc.enable()

        answer = cycle_now(settings, root, kind, force=force, resident=False).document()
    # The model's document without pydantic (`cycles.report`; an odd value: the model).
    report = Report.of(answer)
    shown = report.values
    if as_json and report.model is not None:
        emit(report.model)
    elif as_json:
        emit_document(shown)
    else:
        echo(f"{shown['root']:<16} {shown['cycle']:<8} {shown['status']:<8} {shown['message']}")
        for p in shown["problems"]:
            echo(f"{'':<16}   {p['code']:<20} {p['path'] or '-'}: {p['message']}")
    return EXIT_OK if shown["status"] in ("landed", "noop", "not-due") else EXIT_VERDICT
