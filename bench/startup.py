"""Start-up (issue 11, item 6): the CLI as a whole process, against the same interpreter
starting and doing nothing (`python -c pass`) in the same run.

`memsync --version`, `memsync --help`, and `memsync status` answered by a running daemon
(`memsync run` against a small config in a temp dir). Targets: --version <= 100 ms and
status <= 150 ms, absolute; the ratios to the bare interpreter are reported alongside.
"""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memsync.daemon.client import DaemonUnavailable, call
from tests.kit import GIT_ENV

RUNS = 30
WARMUP = 3
ENV = {**os.environ, **GIT_ENV}


def memsync_command() -> list[str]:
    """The console script people type, next to this interpreter (else `python -m memsync`)."""
    script = Path(sys.executable).parent / "memsync"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "memsync"]


def median_ms(argv: Sequence[str], env: dict[str, str], runs: int = RUNS) -> tuple[float, float]:
    """Median wall-clock and median CPU (user + system) milliseconds of a whole process.
    CPU time is what a loaded machine inflates least: both are reported."""
    walls, cpus = [], []
    for i in range(WARMUP + runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        elapsed = (time.perf_counter() - started) * 1000
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise RuntimeError(f"{argv} failed: {done.stderr.decode()}")
        if i >= WARMUP:
            walls.append(elapsed)
            used = after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
            cpus.append(used * 1000)
    return statistics.median(walls), statistics.median(cpus)


@contextmanager
def daemon(base: Path, env: dict[str, str]) -> Iterator[Path]:
    """`memsync run` on one small root; yields its config once the socket answers."""
    root = base / "root"
    subprocess.run(
        [*memsync_command(), "init", str(root)], env=env, check=True, capture_output=True
    )
    sock = base / "run" / "memsync.sock"
    config = base / "config.yaml"
    config.write_text(
        "version: 1\n"
        f"state_dir: {base / 'state'}\n"
        f"control: {{socket: {sock}}}\n"
        "roots:\n"
        f"  bench:\n    path: {root}\n    watch: false\n    sync: {{interval: 1h}}\n"
    )
    log = (base / "daemon.log").open("w")
    proc = subprocess.Popen(
        [*memsync_command(), "--config", str(config), "run"],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                call(sock, "GET", "/v1/status", timeout=5)
                break
            except DaemonUnavailable:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError(f"daemon did not answer: {log.name}") from None
                time.sleep(0.02)
        yield config
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()


def row(
    name: str, mine: tuple[float, float], raw: tuple[float, float], target: str
) -> dict[str, Any]:
    return {
        "name": name,
        "memsync_ms": mine[0],
        "raw_ms": raw[0],
        "ratio": mine[0] / raw[0],
        "target": target,
        "runs": RUNS,
        "memsync_cpu_ms": mine[1],
        "raw_cpu_ms": raw[1],
    }


def run() -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="memsync-startup-") as tmp:
        base = Path(tmp)
        env = {**ENV, "XDG_CACHE_HOME": str(base / "cache")}
        bare = median_ms([sys.executable, "-c", "pass"], env)
        cli = memsync_command()
        version = median_ms([*cli, "--version"], env)
        helped = median_ms([*cli, "--help"], env)
        with daemon(base, env) as config:
            status = median_ms([*cli, "--config", str(config), "status"], env)
        bare = min(bare, median_ms([sys.executable, "-c", "pass"], env))
    vs = "(vs python -c pass)"
    return [
        row(f"startup: memsync --version {vs}", version, bare, "-"),
        row(f"startup: memsync --help {vs}", helped, bare, "-"),
        row(f"startup: memsync status via daemon {vs}", status, bare, "-"),
        row("startup: memsync --version absolute (target 100 ms)", version, (100.0, 0), "<= 1"),
        row("startup: memsync status absolute (target 150 ms)", status, (150.0, 0), "<= 1"),
    ]


if __name__ == "__main__":
    for r in run():
        print(
            f"{r['name']:<52} {r['memsync_ms']:6.1f} ms (cpu {r['memsync_cpu_ms']:5.1f}) "
            f"vs {r['raw_ms']:6.1f} ms (cpu {r['raw_cpu_ms']:5.1f})  ratio {r['ratio']:5.2f}"
        )
