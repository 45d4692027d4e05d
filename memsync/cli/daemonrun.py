"""`memsync run` as a command, without click: the daemon in the foreground. The click
command (`cli.run`) and the plain form `__main__` runs without click (`cli.plain`: `memsync
[--config PATH] run`, what systemd's unit and the tests start) both run `serve` here.
"""

from __future__ import annotations

import gc
import sys

from memsync.cli.app import App


def serve(app: App) -> int:
    """Load the daemon, then run it until SIGTERM: its exit code."""
    # Loading the daemon makes tens of thousands of objects (modules, functions, classes)
    # and no garbage cycles worth collecting: the collector stays off while they load, then
    # they are frozen, so that neither the start nor any collection at rest walks them again.
    gc.disable()
    import logging  # noqa: PLC0415 - with the daemon only

    from memsync.daemon.app import run_daemon  # noqa: PLC0415 - the daemon stack loads here only
    from memsync.daemon.configcheck import daemon_settings  # noqa: PLC0415
    from memsync.logsetup import use_format  # noqa: PLC0415

    gc.freeze()
    gc.enable()
    settings = daemon_settings(app)  # the schema in a child: no pydantic held at rest
    # A reload reads the configuration in its own thread, which click's context (the main
    # thread's) never named as `run`: it checks no state dir, whichever path started us.
    app.command = None
    use_format(app.log_format or settings.log_format, daemon=True)
    if not app.debug:
        logging.getLogger("memsync").setLevel(logging.INFO)
    sys.stdout.flush()
    return run_daemon(settings, lambda: daemon_settings(app))
