"""Where the suite's CPU goes, test by test: a pytest plugin and its summary.

    PYTHONDONTWRITEBYTECODE= MEMSYNC_HYPOTHESIS=ci MEMSYNC_CPUPROF=/tmp/cpu \\
        .venv/bin/pytest -n 3 --dist worksteal -q -p tests.cpuprof
    .venv/bin/python -m tests.cpuprof /tmp/cpu          # by file, then the costliest tests

Each test (set-up, call and tear-down) is written as one JSON line to `$MEMSYNC_CPUPROF.<worker>`:
its wall time, the CPU of the test process itself (`self`) and of the processes it started
and reaped meanwhile (`kids`: memsync commands and daemons, git, servers; a process reaped by
a later test counts there). Session fixtures count in the first test that asks for them.
Without MEMSYNC_CPUPROF the plugin records nothing.

With MEMSYNC_CPUPROF_COMMANDS=1 it also charges each process a test process started (through
`subprocess`, which this then reaps with `os.wait4`) to its command: `memsync run`, `memsync
hub serve`, `git` (memsync's own, from an in-process sync, or a test's) and so on, written
per worker at the end as `{"commands": {command: [processes, cpu seconds]}}`; the summary
lists them. Processes those processes start count in theirs.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import pytest

_OUT: list[IO[str]] = []


def _out() -> IO[str] | None:
    base = os.environ.get("MEMSYNC_CPUPROF")
    if not base:
        return None
    if not _OUT:
        worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
        _OUT.append(open(f"{base}.{worker}", "a", buffering=1, encoding="utf-8"))  # noqa: SIM115
    return _OUT[0]


_COMMANDS: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
_PIDS: dict[int, str] = {}


def _command(args: Any) -> str:
    """What a process is, for the summary: `memsync <command> <subcommand>`, `git`, ..."""
    argv = [str(a) for a in ([args] if isinstance(args, str | bytes | os.PathLike) else args)]
    if "memsync" in argv[:3]:
        rest = argv[argv.index("memsync") + 1 :]
        while rest and rest[0].startswith("--config"):
            rest = rest[1:] if "=" in rest[0] else rest[2:]
        words = [w for w in rest[:2] if not w.startswith("-") and os.sep not in w]
        return " ".join(["memsync", *words])
    return os.path.basename(argv[0]) if argv else "?"


def _count_commands() -> None:
    """Charge each reaped child's CPU (its own and its reaped descendants') to its command."""
    execute = subprocess.Popen._execute_child  # type: ignore[attr-defined]

    def execute_child(self: subprocess.Popen[Any], args: Any, *rest: Any, **kw: Any) -> None:
        execute(self, args, *rest, **kw)
        _PIDS[self.pid] = _command(args)

    def waitpid(pid: int, options: int) -> tuple[int, int]:
        done, status, usage = os.wait4(pid, options)
        if done and done in _PIDS:
            row = _COMMANDS[_PIDS.pop(done)]
            row[0] += 1
            row[1] += usage.ru_utime + usage.ru_stime
        return done, status

    subprocess.Popen._execute_child = execute_child  # type: ignore[attr-defined]
    os.waitpid = waitpid
    poll = subprocess.Popen._internal_poll  # type: ignore[attr-defined]
    defaults = list(poll.__defaults__)
    defaults[1] = waitpid  # `_waitpid=os.waitpid`, bound when subprocess was imported
    poll.__defaults__ = tuple(defaults)


def pytest_configure(config: pytest.Config) -> None:
    controller = getattr(config.option, "numprocesses", None) and not hasattr(
        config, "workerinput"
    )  # xdist's: what it starts is its workers
    wanted = os.environ.get("MEMSYNC_CPUPROF") and os.environ.get("MEMSYNC_CPUPROF_COMMANDS")
    if wanted and not controller:
        _count_commands()


def pytest_unconfigure(config: pytest.Config) -> None:
    out = _out() if _COMMANDS else None
    if out is not None:
        out.write(json.dumps({"commands": _COMMANDS}) + "\n")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Iterator[None]:
    out = _out()
    before, started = os.times(), time.monotonic()
    yield
    if out is None:
        return
    after = os.times()
    record = {
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
        "wall": round(time.monotonic() - started, 4),
        "self": round(after.user - before.user + after.system - before.system, 4),
        "kids": round(
            after.children_user
            - before.children_user
            + after.children_system
            - before.children_system,
            4,
        ),
    }
    out.write(json.dumps(record) + "\n")


def summary(base: str, top: int = 40) -> str:
    """The records of `base.*`: totals, then by file and the costliest tests."""
    records: list[dict[str, Any]] = []
    commands: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for path in sorted(Path(base).parent.glob(Path(base).name + ".*")):
        for line in path.read_text().splitlines():
            if not line:
                continue
            record = json.loads(line)
            if "commands" in record:
                for name, (n, cpu) in record["commands"].items():
                    commands[name][0] += n
                    commands[name][1] += cpu
            else:
                records.append(record)
    files: dict[str, list[float]] = collections.defaultdict(lambda: [0.0, 0.0, 0.0, 0])
    for r in records:
        row = files[r["test"].split("::")[0]]
        row[0] += r["self"]
        row[1] += r["kids"]
        row[2] += r["wall"]
        row[3] += 1
    cpu = sum(r["self"] + r["kids"] for r in records)
    lines = [
        f"{len(records)} tests: {cpu:.1f} s CPU "
        f"({sum(r['self'] for r in records):.1f} in the test processes, "
        f"{sum(r['kids'] for r in records):.1f} in what they started)",
        "",
        f"{'cpu':>7} {'self':>6} {'kids':>6} {'wall':>7} {'tests':>5}  file",
    ]
    for name, (own, kids, wall, n) in sorted(files.items(), key=lambda f: -f[1][0] - f[1][1])[:top]:
        lines.append(f"{own + kids:7.1f} {own:6.1f} {kids:6.1f} {wall:7.1f} {n:5d}  {name}")
    lines += ["", f"{'cpu':>7} {'wall':>7}  test"]
    for r in sorted(records, key=lambda r: -r["self"] - r["kids"])[:top]:
        lines.append(f"{r['self'] + r['kids']:7.2f} {r['wall']:7.2f}  {r['test']}")
    if commands:
        lines += [
            "",
            f"{'cpu':>7} {'procs':>6} {'each':>7}  command (started by the test processes)",
        ]
        for name, (n, cpu) in sorted(commands.items(), key=lambda c: -c[1][1])[:top]:
            lines.append(f"{cpu:7.1f} {int(n):6d} {cpu / n * 1000:5.0f}ms  {name}")
    return "\n".join(lines)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python -m tests.cpuprof BASE  (the MEMSYNC_CPUPROF of the run)")
    print(summary(sys.argv[1]))
