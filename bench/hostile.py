"""H1 and H2: the hub under 3,000 half-open connections (issue 16, item 13).

One client opens 3,000 connections to `hub serve --workers N` (N the core count, the
default limits) and sends each the start of a request head, never its end; it holds them
while it times `GET /v1/health` on new connections, then waits until the hub has closed
them all (the header timeout, 10 s). It reads the hub's descriptors from /proc and counts
its log lines.

H1: the hub with the descriptor limit of its systemd unit (LimitNOFILE=, or this host's
hard limit if lower): every connection fits under the cap; /v1/health keeps answering.
H2: the same at a descriptor limit of 1024 (a shell's default): each worker holds its cap
(768); a new connection closes the one that waited longest for its request, so no
descriptor runs out and /v1/health still answers.

Before issue 16 (item 13) the hub at 1024 descriptors stopped accepting (EMFILE), answered
no /v1/health, and logged every refused accept with its traceback: 17-29 million lines
(1.2-2.0 GB) in five minutes.

    python -m bench hostile
"""

from __future__ import annotations

import contextlib
import os
import resource
import select
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.kit import hub_process

CONNECTIONS = 3000
HEALTH = b"GET /v1/health HTTP/1.1\r\nHost: bench\r\n\r\n"
HALF_HEADS = (
    b"",
    b"GET /v1/views/bench/manifest HTTP/1.1\r\nHost: bench\r\nAuthoriz",
    b"POST /v1/roots/bench/notify HTTP/1.1\r\nHost: bench\r\nContent-Le",
)
UNIT = Path(__file__).resolve().parents[1] / "systemd" / "memsync-hub.service"


def _unit_nofile() -> int:
    for line in UNIT.read_text().splitlines():
        if line.startswith("LimitNOFILE="):
            return int(line.partition("=")[2])
    return 1024


def _health_ms(port: int) -> float | None:
    """One /v1/health on a new connection, in ms; None if the hub closed it unanswered."""
    started = time.perf_counter()
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
            conn.sendall(HEALTH)
            if not conn.recv(4096).startswith(b"HTTP/1.1 200"):
                return None
    except OSError:
        return None
    return (time.perf_counter() - started) * 1000


def _fds(pids: list[int]) -> list[int]:
    counts = []
    for pid in pids:
        with contextlib.suppress(FileNotFoundError):
            counts.append(len(os.listdir(f"/proc/{pid}/fd")))
    return counts


def _processes(pid: int) -> list[int]:
    with contextlib.suppress(FileNotFoundError):
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return [pid, *map(int, children)]
    return [pid]


def _open(conn: socket.socket) -> bool:
    try:
        while conn.recv(65536):
            pass
    except BlockingIOError:
        return True
    except OSError:
        return False
    return False


def scenario(base: Path, nofile: int) -> dict[str, Any]:
    from memsync.hub.tokens import hub_init

    data = base / f"hub-{nofile}"
    hub_init(data)
    with hub_process(data, nofile=nofile) as hub:
        port, proc = hub.port, hub.proc
        conns: list[socket.socket] = []
        try:
            at_rest = [_health_ms(port) or 0.0 for _ in range(50)]
            fds_at_rest = _fds(_processes(proc.pid))
            started = time.monotonic()
            for n in range(CONNECTIONS):
                conn = socket.socket()
                conn.settimeout(10)
                try:
                    conn.connect(("127.0.0.1", port))
                    conn.sendall(HALF_HEADS[n % len(HALF_HEADS)])
                except OSError:
                    pass  # refused past the cap
                conn.setblocking(False)
                conns.append(conn)
            opened_s = time.monotonic() - started
            select.select(conns[:1000], [], [], 0.5)  # let the hub settle what it refuses
            held = sum(_open(conn) for conn in conns)
            under: list[float | None] = [_health_ms(port) for _ in range(50)]
            fds_under = _fds(_processes(proc.pid))
            answered = [ms for ms in under if ms is not None]
            # until every held connection is closed by the hub (the header timeout)
            while any(_open(conn) for conn in conns) and time.monotonic() - started < 60:
                select.select(conns[:1000], [], [], 0.2)
            closed_s = time.monotonic() - started
            while _health_ms(port) is None and time.monotonic() - started < 90:
                time.sleep(0.05)
            healthy_again_s = time.monotonic() - started
            fds_after = _fds(_processes(proc.pid))
        finally:
            for conn in conns:
                conn.close()
    lines = hub.log()
    return {
        "nofile": nofile,
        "opened_s": opened_s,
        "held": held,
        "health_at_rest_p50_ms": statistics.median(at_rest),
        "health_under_p50_ms": statistics.median(answered) if answered else None,
        "health_under_max_ms": max(answered) if answered else None,
        "health_answered": f"{len(answered)}/{len(under)}",
        "fds_at_rest": fds_at_rest,
        "fds_under": fds_under,
        "fds_after": fds_after,
        "all_closed_after_s": closed_s,
        "healthy_again_after_s": healthy_again_s,
        "log_lines": len(lines),
        "log_emfile": sum("Too many open files" in line for line in lines),
        "log": [line[:160] for line in lines[:12]],
    }


def run() -> list[dict[str, Any]]:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = CONNECTIONS + 256
    if hard != resource.RLIM_INFINITY and hard < want:
        raise RuntimeError(f"this bench needs {want} descriptors; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, want), hard))
    unit = _unit_nofile() if hard == resource.RLIM_INFINITY else min(_unit_nofile(), hard)
    rows = []
    with tempfile.TemporaryDirectory(prefix="memsync-bench-hostile-") as tmp:
        for name, nofile in (("H1", unit), ("H2", 1024)):
            found = scenario(Path(tmp), nofile)
            under = found["health_under_max_ms"]
            rows.append(
                {
                    "name": f"{name} /v1/health under {CONNECTIONS} half-open, "
                    f"LimitNOFILE={nofile} (max ms under attack vs p50 at rest)",
                    "memsync_ms": under if under is not None else float("nan"),
                    "raw_ms": found["health_at_rest_p50_ms"],
                    "ratio": (under or float("nan")) / found["health_at_rest_p50_ms"],
                    "target": "fds < limit, all closed by ~10 s, log lines bounded",
                    **found,
                }
            )
            for key, value in found.items():
                print(f"{name} {key}: {value}", file=sys.stderr)
    return rows
