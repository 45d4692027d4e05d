"""Running the hub: bind, log where, serve until SIGTERM or SIGINT, stop gracefully.

`memsync hub serve` calls `run_hub`: one worker serves in this process (`serve_hub`),
several are forked and supervised by it (`workers.py`). The application is `app.make_app`.
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
from pathlib import Path

from memsync.config.units import check_listen
from memsync.errors import UsageError
from memsync.hub.app import hub_runner, hub_site, make_app
from memsync.hub.guard import Limits
from memsync.hub.ratelog import LOG_INTERVAL, quiet_repeats
from memsync.hub.workers import STOP_GRACE, bind_sockets, serve_workers

log = logging.getLogger("memsync.hub")


def _split_listen(listen: str) -> tuple[str, int]:
    host, _, port = listen.rpartition(":")
    if port != "0":  # port 0 (any free port) is for tests
        try:
            check_listen(listen)
        except ValueError as exc:
            raise UsageError(f"cannot listen on {listen!r}: {exc}") from exc
    return host.removeprefix("[").removesuffix("]"), int(port)


async def serve_hub(data_dir: Path, listen: str, limits: Limits | None = None) -> None:
    """Serve until SIGTERM or SIGINT, then stop gracefully (streams closed, writes drained)."""
    host, port = _split_listen(listen)
    runner = hub_runner(make_app(data_dir, limits=limits))
    await runner.setup()
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    try:
        for sock in bind_sockets(host, port, 1)[0]:
            await hub_site(runner, sock).start()
        address, bound = runner.addresses[0][:2]
        shown = f"[{address}]" if ":" in address else address
        log.info("memsync hub serving %s on http://%s:%d", data_dir, shown, bound)
        if not ipaddress.ip_address(address).is_loopback:
            log.warning("plain HTTP on a non-loopback address: put a TLS proxy in front of it")
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop.set)
        await stop.wait()
        log.info("memsync hub stopping")
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await runner.cleanup()


def run_hub(
    data_dir: Path,
    listen: str,
    workers: int = 1,
    limits: Limits | None = None,
    log_interval: float = LOG_INTERVAL,
    stop_grace: float = STOP_GRACE,
) -> None:
    """`memsync hub serve`: run the hub until it is told to stop, in this process
    (`workers` 1) or in `workers` processes on one port (`WorkerFailed` if one of them
    ends on its own; a worker still running `stop_grace` seconds after the stop was asked
    for is killed). The same warning is logged at most once per `log_interval`."""
    if workers < 1:
        raise UsageError(f"--workers must be at least 1, not {workers}")
    quiet_repeats(log_interval)
    if workers == 1:
        asyncio.run(serve_hub(data_dir, listen, limits))
        return
    host, port = _split_listen(listen)
    serve_workers(data_dir, host, port, workers, limits, stop_grace)
