"""The units in systemd/, checked three ways.

1. `systemd-analyze verify` runs clean on every unit (no warning at all, not only rc 0).
2. `systemd-analyze security --offline=true` rates the hub and the server daemon at 2.5 or
   lower.
3. Each service runs as its unit says, under the part of the unit's sandbox that does not
   need a service manager: `SystemCallFilter=` (+ `SystemCallErrorNumber=`),
   `RestrictAddressFamilies=`, `MemoryDenyWriteExecute=` (seccomp rules as systemd writes
   them, through libseccomp), `NoNewPrivileges=`, `UMask=` and `LimitNOFILE=`; with the
   unit's `ExecStart=`, `ExecReload=`, `WatchdogSec=`, `Type=notify` protocol and exit
   status. A hardening line
   that breaks the program fails here, not on a user's machine.

No systemd runs in the container: unit files are copied to tmp_path; user units see a
home directory whose `~/.local/bin/memsync` is this checkout's, and system units get
`/usr/local/bin/memsync` replaced by it (the one path a test substitutes).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import json
import os
import re
import resource
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import pytest

from tests.conftest import Team
from tests.helpers import GIT_ENV, commit, git, wait_for

REPO = Path(__file__).resolve().parents[2]
UNITS_DIR = REPO / "systemd"
MEMSYNC = Path(sys.executable).with_name("memsync")
SYSTEM_MEMSYNC = "/usr/local/bin/memsync"  # where the system units expect it
ANALYZE = shutil.which("systemd-analyze")
SECCOMP = ctypes.util.find_library("seccomp")

# Every file in systemd/ and the manager it is for: a new unit is not silently untested.
UNITS = {
    "memsync.service": "user",
    "memsync-sync.service": "user",
    "memsync-sync.timer": "user",
    "memsync-hub.service": "system",
    "memsync-server.service": "system",
}
HUB_MAX_EXPOSURE = 2.5
SERVER_MAX_EXPOSURE = 2.5  # the daemon as a system service sandboxes like the hub
USER_MAX_EXPOSURE = 7.0  # a user unit cannot sandbox its file system; guards what it can do
# The environment the managers give a service (PATH as systemd 252 sets it).
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

pytestmark = pytest.mark.skipif(
    ANALYZE is None,
    reason="systemd-analyze is not installed (`apt-get install systemd`; .ci/run does it)",
)


# -- unit files ---------------------------------------------------------------------------------


Unit = dict[str, dict[str, list[str]]]


def read_unit(path: Path) -> Unit:
    """Sections -> key -> values in order (systemd's syntax, without line continuations)."""
    sections: Unit = {}
    current: dict[str, list[str]] | None = None
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], {})
            continue
        assert current is not None, f"{path}: {line!r} before any section"
        key, sep, value = line.partition("=")
        assert sep, f"{path}: not a key=value line: {line!r}"
        current.setdefault(key.strip(), []).append(value.strip())
    return sections


def one(service: dict[str, list[str]], key: str, default: str | None = None) -> str:
    values = service.get(key)
    if not values:
        assert default is not None, f"the unit sets no {key}="
        return default
    return values[-1]


def seconds(span: str) -> float:
    """A systemd time span such as `30s`, `2min`, `150s` or `1min 30s`."""
    units = {"": 1, "s": 1, "sec": 1, "ms": 0.001, "m": 60, "min": 60, "h": 3600}
    total = 0.0
    for number, unit in re.findall(r"(\d+(?:\.\d+)?)\s*([a-z]*)", span):
        total += float(number) * units[unit]
    return total


@dataclass
class Installed:
    """The units as a user and an administrator would install them, in tmp_path."""

    home: Path
    user: Path  # ~/.config/systemd/user
    system: Path  # /etc/systemd/system
    runtime: Path  # $XDG_RUNTIME_DIR

    def path(self, name: str) -> Path:
        return (self.user if UNITS[name] == "user" else self.system) / name

    def analyze_env(self) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": str(self.home),  # %h in user units
            "XDG_RUNTIME_DIR": str(self.runtime),  # --user needs one
            "SYSTEMD_COLORS": "0",
            "SYSTEMD_PAGER": "",
            "LC_ALL": "C.UTF-8",
        }


@pytest.fixture
def installed(tmp_path: Path) -> Installed:
    assert MEMSYNC.is_file(), f"no memsync entry point beside {sys.executable}"
    home = tmp_path / "home"
    (home / ".local" / "bin").mkdir(parents=True)
    (home / ".local" / "bin" / "memsync").symlink_to(MEMSYNC)
    layout = Installed(home, home / ".config/systemd/user", tmp_path / "etc", tmp_path / "run")
    for directory in (layout.user, layout.system, layout.runtime):
        directory.mkdir(parents=True, mode=0o700)
    for name, manager in UNITS.items():
        text = (UNITS_DIR / name).read_text()
        if manager == "system" and "ExecStart=" in text:
            assert f"ExecStart={SYSTEM_MEMSYNC} " in text, f"{name}: ExecStart= is not memsync"
            text = text.replace(SYSTEM_MEMSYNC, str(MEMSYNC))
        layout.path(name).write_text(text)
    return layout


def test_every_file_in_systemd_is_a_checked_unit() -> None:
    assert sorted(p.name for p in UNITS_DIR.iterdir()) == sorted(UNITS)


# -- systemd-analyze ----------------------------------------------------------------------------


def analyze(layout: Installed, name: str, *args: str) -> subprocess.CompletedProcess[str]:
    assert ANALYZE is not None
    scope = ["--user"] if UNITS[name] == "user" else []
    return subprocess.run(
        [ANALYZE, *args, *scope, str(layout.path(name))],
        env=layout.analyze_env(),
        cwd=layout.path(name).parent,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize("name", sorted(UNITS))
def test_systemd_analyze_verify_is_clean(installed: Installed, name: str) -> None:
    """rc 0 is not enough: an unknown key or a bad value is only a warning to systemd."""
    done = analyze(installed, name, "verify")
    assert (done.returncode, done.stdout + done.stderr) == (0, "")


@pytest.mark.parametrize(
    ("name", "limit"),
    [
        ("memsync-hub.service", HUB_MAX_EXPOSURE),
        ("memsync-server.service", SERVER_MAX_EXPOSURE),
        ("memsync.service", USER_MAX_EXPOSURE),
    ],
)
def test_security_exposure(
    installed: Installed, name: str, limit: float, capsys: pytest.CaptureFixture[str]
) -> None:
    done = analyze(installed, name, "security", "--offline=true", "--no-pager")
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d+)", done.stdout)
    assert found, done.stdout + done.stderr
    score = float(found.group(1))
    with capsys.disabled():
        print(f"\nsystemd-analyze security {name}: {score}")
    assert score <= limit, done.stdout


# -- the unit's sandbox, without a service manager ---------------------------------------------

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_KILL_PROCESS = 0x80000000
SCMP_CMP_GE = 5
SCMP_CMP_EQ = 4
SCMP_CMP_MASKED_EQ = 7
PR_SET_NO_NEW_PRIVS = 38
AF_MAX = 46  # Linux 6.x; systemd denies every family number not allowed, this one and above
SHM_EXEC = 0o100000
PROT_WRITE, PROT_EXEC = 0x2, 0x4
# SystemCallFilter= allow-lists always let these through (systemd.exec(5)).
ALWAYS_ALLOWED = {"execve", "exit", "exit_group", "getrlimit", "rt_sigreturn", "sigreturn"}


def scmp_act_errno(number: int) -> int:
    return 0x00050000 | (number & 0xFFFF)


class ArgCmp(ctypes.Structure):
    _fields_ = (
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    )


def _libseccomp() -> Any:
    assert SECCOMP is not None
    lib: Any = ctypes.CDLL(SECCOMP, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(ArgCmp),
    ]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def _load(
    lib: Any, default: int, rules: list[tuple[int, str, list[tuple[int, int, int, int]]]]
) -> None:
    ctx = lib.seccomp_init(default)
    assert ctx, "seccomp_init failed"
    try:
        for action, name, conditions in rules:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:
                continue  # not a system call of this architecture (or unknown to libseccomp)
            array = (ArgCmp * len(conditions))(*(ArgCmp(*c) for c in conditions))
            rc = lib.seccomp_rule_add_array(ctx, action, number, len(conditions), array)
            assert rc == 0, f"seccomp rule for {name}: {os.strerror(-rc)}"
        rc = lib.seccomp_load(ctx)
        assert rc == 0, f"seccomp_load: {os.strerror(-rc)}"
    finally:
        lib.seccomp_release(ctx)


def confine_and_exec(policy_json: str, argv: list[str]) -> NoReturn:
    """Run in the child (`python -c`): apply the policy, then become `argv`."""
    policy = json.loads(policy_json)
    os.umask(policy["umask"])
    if policy["nofile"] is not None:  # as far as this host's hard limit allows
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        nofile = policy["nofile"] if hard == resource.RLIM_INFINITY else min(policy["nofile"], hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))
    libc: Any = ctypes.CDLL(None, use_errno=True)
    if policy["no_new_privileges"] and libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    lib = _libseccomp()
    # Two filters, as systemd installs them (the strictest verdict wins): deny rules first,
    # since the allow-list does not allow seccomp(2) itself.
    deny: list[tuple[int, str, list[tuple[int, int, int, int]]]] = []
    if policy["families"] is not None:
        refuse = scmp_act_errno(errno.EAFNOSUPPORT)
        deny += [
            (refuse, "socket", [(0, SCMP_CMP_EQ, family, 0)])
            for family in range(AF_MAX)
            if family not in policy["families"]
        ]
        deny.append((refuse, "socket", [(0, SCMP_CMP_GE, AF_MAX, 0)]))
    if policy["memory_deny_write_execute"]:  # what systemd's seccomp-util.c installs
        eperm = scmp_act_errno(errno.EPERM)
        wx = PROT_WRITE | PROT_EXEC
        deny += [
            (eperm, "mmap", [(2, SCMP_CMP_MASKED_EQ, wx, wx)]),
            (eperm, "mprotect", [(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC)]),
            (eperm, "pkey_mprotect", [(2, SCMP_CMP_MASKED_EQ, PROT_EXEC, PROT_EXEC)]),
            (eperm, "shmat", [(2, SCMP_CMP_MASKED_EQ, SHM_EXEC, SHM_EXEC)]),
        ]
    if deny:
        _load(lib, SCMP_ACT_ALLOW, deny)
    if policy["syscalls"] is not None:
        allow = [(SCMP_ACT_ALLOW, name, []) for name in policy["syscalls"]]
        _load(lib, policy["default_action"], allow)
    os.execv(argv[0], argv)  # noqa: S606 - argv is the unit's ExecStart=, no shell


LAUNCHER = (
    "import sys\n"
    "from tests.integration.test_systemd_units import confine_and_exec\n"
    "confine_and_exec(sys.argv[1], sys.argv[2:])\n"
)


def syscall_groups() -> dict[str, set[str]]:
    """`systemd-analyze syscall-filter`: every @group and its members (nested, unexpanded)."""
    assert ANALYZE is not None
    listing = subprocess.run(
        [ANALYZE, "syscall-filter", "--no-pager"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    groups: dict[str, set[str]] = {}
    current: set[str] | None = None
    for line in listing.splitlines():
        if line.startswith("@"):
            current = groups.setdefault(line.strip(), set())
        elif line.startswith((" ", "\t")) and current is not None:
            entry = line.strip()
            if entry and not entry.startswith("#"):
                current.add(entry)
        else:
            current = None
    return groups


def expand(names: list[str], groups: dict[str, set[str]]) -> set[str]:
    calls: set[str] = set()
    for name in names:
        if name.startswith("@"):
            calls |= expand(sorted(groups[name]), groups)
        else:
            calls.add(name.split(":")[0])  # `name:errno` keeps its own errno; deny is deny
    return calls


def sandbox_policy(service: dict[str, list[str]]) -> dict[str, Any]:
    filters = service.get("SystemCallFilter", [])
    syscalls: list[str] | None = None
    if filters:
        groups = syscall_groups()
        allowed: set[str] = set()
        denied: set[str] = set()
        for entry in filters:
            names = entry.removeprefix("~").split()
            (denied if entry.startswith("~") else allowed).update(expand(names, groups))
        assert allowed, "a deny-list only SystemCallFilter= is not emulated here"
        syscalls = sorted((allowed | ALWAYS_ALLOWED) - denied)
    error = one(service, "SystemCallErrorNumber", "kill")
    families = service.get("RestrictAddressFamilies")
    yes = ("yes", "true", "1", "on")
    nofile = one(service, "LimitNOFILE", "")
    return {
        "umask": int(one(service, "UMask", "0022"), 8),
        "nofile": int(nofile) if nofile else None,
        "no_new_privileges": one(service, "NoNewPrivileges", "no") in yes or bool(filters),
        "syscalls": syscalls,
        "default_action": (
            SCMP_ACT_KILL_PROCESS if error == "kill" else scmp_act_errno(getattr(errno, error))
        ),
        "families": (
            None
            if families is None
            else [getattr(socket, f) for entry in families for f in entry.split()]
        ),
        "memory_deny_write_execute": one(service, "MemoryDenyWriteExecute", "no") in yes,
    }


needs_libseccomp = pytest.mark.skipif(SECCOMP is None, reason="libseccomp is not installed")


def confined(
    service: dict[str, list[str]], argv: list[str], env: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    policy = json.dumps(sandbox_policy(service))
    with log.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-c", LAUNCHER, policy, *argv],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


class NotifySocket:
    """A bound NOTIFY_SOCKET, as the service manager holds it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.seen: list[dict[str, str]] = []

    def wait(self, key: str, deadline: float, log: Path) -> dict[str, str]:
        """The next message (after those already returned) that sets `key`."""
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"no {key} in time; saw {self.seen}\n{log.read_text()}")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(4096).decode()
            except TimeoutError:
                continue
            fields = dict(line.split("=", 1) for line in data.split("\n") if line)
            self.seen.append(fields)
            if key in fields:
                return fields


@pytest.fixture
def notify_socket(tmp_path: Path) -> Iterator[NotifySocket]:
    listener = NotifySocket(tmp_path / "notify")
    yield listener
    listener.sock.close()


def within(span: float) -> float:
    return time.monotonic() + span


def with_log(log: Path, check: Callable[[], None]) -> None:
    try:
        check()
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n--- {log.name} ---\n{log.read_text()}") from exc


@needs_libseccomp
def test_the_daemon_runs_as_its_user_unit_says(
    installed: Installed, team: Team, tmp_path: Path, notify_socket: NotifySocket
) -> None:
    """Type=notify (READY=1), WatchdogSec= (WATCHDOG=1 in time), ExecReload= (RELOADING=1,
    then READY=1), SIGTERM (STOPPING=1, exit 0), and a local commit pushed, all sandboxed."""
    service = read_unit(installed.path("memsync.service"))["Service"]
    assert one(service, "Type") == "notify"
    argv = shlex.split(one(service, "ExecStart").replace("%h", str(installed.home)))
    config = installed.home / ".config" / "memsync" / "config.yaml"  # the default location
    config.parent.mkdir(parents=True)
    config.write_text(
        "version: 1\n"
        "roots:\n"
        "  alice:\n"
        f"    path: {team.alice.path}\n"
        "    watch: true\n"
        "    sync: {interval: 60s, timeout: 20s}\n"
    )
    watchdog = seconds(one(service, "WatchdogSec"))
    env = {
        "PATH": SYSTEM_PATH,
        "HOME": str(installed.home),
        "XDG_RUNTIME_DIR": str(installed.runtime),
        "LANG": "C.UTF-8",
        "NOTIFY_SOCKET": str(notify_socket.path),
        "WATCHDOG_USEC": str(int(watchdog * 1_000_000)),
    }
    log = tmp_path / "daemon.log"
    daemon = confined(service, argv, env, log)
    try:
        notify_socket.wait("READY", within(60), log)
        notify_socket.wait("WATCHDOG", within(watchdog), log)

        pushed = commit(team.alice.path, {"MEMORY_unit.md": "# From the unit test\n"})

        def arrived() -> bool:
            assert daemon.poll() is None, log.read_text()
            return git(team.upstream, "rev-parse", "refs/heads/main") == pushed

        with_log(log, lambda: wait_for(arrived, 30, "the daemon to push the local commit"))

        reload = shlex.split(one(service, "ExecReload").replace("$MAINPID", str(daemon.pid)))
        subprocess.run(reload, check=True, timeout=10)
        notify_socket.wait("RELOADING", within(30), log)
        notify_socket.wait("READY", within(30), log)

        daemon.send_signal(signal.Signals[one(service, "KillSignal", "SIGTERM")])
        notify_socket.wait("STOPPING", within(30), log)
        assert daemon.wait(timeout=seconds(one(service, "TimeoutStopSec"))) == 0, log.read_text()
    finally:
        stop(daemon)
    assert "Operation not permitted" not in log.read_text()


@needs_libseccomp
def test_the_timer_service_runs_as_its_unit_says(installed: Installed, team: Team) -> None:
    """The no-daemon alternative: one `sync-now` pushes a local commit, exit status ok."""
    service = read_unit(installed.path("memsync-sync.service"))["Service"]
    argv = shlex.split(one(service, "ExecStart").replace("%h", str(installed.home)))
    config = installed.home / ".config" / "memsync" / "config.yaml"
    config.parent.mkdir(parents=True)
    config.write_text(f"version: 1\nroots:\n  alice:\n    path: {team.alice.path}\n")
    pushed = commit(team.alice.path, {"MEMORY_timer.md": "# From the timer\n"})
    env = {"PATH": SYSTEM_PATH, "HOME": str(installed.home), "LANG": "C.UTF-8", **GIT_ENV}
    log = installed.home / "sync.log"
    proc = confined(service, argv, env, log)
    try:
        status = proc.wait(timeout=min(120, seconds(one(service, "TimeoutStartSec", "90s"))))
    finally:
        stop(proc)
    ok = {0, *(int(s) for s in one(service, "SuccessExitStatus", "0").split())}
    assert status in ok, log.read_text()
    assert git(team.upstream, "rev-parse", "refs/heads/main") == pushed, log.read_text()


def unit_environment(service: dict[str, list[str]], places: dict[str, Path]) -> dict[str, str]:
    """The unit's `Environment=` assignments, its system paths moved to `places`."""
    env: dict[str, str] = {}
    for line in service.get("Environment", []):
        for word in shlex.split(line):
            key, _, value = word.partition("=")
            for system_path, here in places.items():
                value = value.replace(system_path, str(here))
            env[key] = value
    return env


@needs_libseccomp
def test_the_server_daemon_runs_as_its_system_unit_says(
    installed: Installed, team: Team, tmp_path: Path, notify_socket: NotifySocket
) -> None:
    """The team server's daemon: set up as the unit's comment says (`config init` with the
    unit's state and runtime directories, which `doctor` passes), it runs under the unit's
    seccomp sandbox with its Type=notify protocol and watchdog, pushes a local commit,
    answers `status` on its socket in RuntimeDirectory=, reloads and stops cleanly."""
    service = read_unit(installed.path("memsync-server.service"))["Service"]
    assert one(service, "Type") == "notify"
    assert one(service, "User") == "memsync"
    state_name, runtime_name = one(service, "StateDirectory"), one(service, "RuntimeDirectory")
    argv = shlex.split(one(service, "ExecStart"))
    assert argv[1] == "--config" and argv[3:] == ["run"]
    state = tmp_path / "var-lib" / state_name  # /var/lib/memsync as systemd makes it
    runtime = tmp_path / "run-dir" / runtime_name  # /run/memsync
    for directory in (state, runtime):
        directory.mkdir(parents=True, mode=0o700)
    places = {f"/var/lib/{state_name}": state, f"/run/{runtime_name}": runtime}
    env = {
        "PATH": SYSTEM_PATH,
        "LANG": "C.UTF-8",
        **unit_environment(service, places),
    }
    assert env["HOME"] == str(state) and env["XDG_RUNTIME_DIR"] == str(runtime)
    config = tmp_path / "etc-memsync" / "config.yaml"  # /etc/memsync/config.yaml
    setup = {**env, "XDG_STATE_HOME": str(state.parent), **GIT_ENV}
    made = subprocess.run(
        [str(MEMSYNC), "config", "init", "--root", f"team={team.alice.path}", "--out", str(config)],
        env=setup,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert made.returncode == 0, made.stderr
    text = config.read_text()
    assert f"state_dir: {state}\n" in text and f"socket: {runtime}/memsync.sock\n" in text
    doctor = subprocess.run(
        [str(MEMSYNC), "--config", str(config), "doctor", "--json"],
        env=setup,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    failed = [c for c in json.loads(doctor.stdout)["checks"] if c["status"] == "fail"]
    assert doctor.returncode == 0 and not failed, doctor.stdout

    argv[2] = str(config)
    watchdog = seconds(one(service, "WatchdogSec"))
    env |= {"NOTIFY_SOCKET": str(notify_socket.path), "WATCHDOG_USEC": str(int(watchdog * 1e6))}
    log = tmp_path / "server.log"
    daemon = confined(service, argv, env, log)
    try:
        notify_socket.wait("READY", within(60), log)
        notify_socket.wait("WATCHDOG", within(watchdog), log)
        pushed = commit(team.alice.path, {"MEMORY_server.md": "# From the server unit\n"})

        def arrived() -> bool:
            assert daemon.poll() is None, log.read_text()
            return git(team.upstream, "rev-parse", "refs/heads/main") == pushed

        with_log(log, lambda: wait_for(arrived, 30, "the server daemon to push"))
        status = subprocess.run(
            [str(MEMSYNC), "--config", str(config), "status", "--json"],
            env=setup,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert json.loads(status.stdout)["daemon"]["pid"] == daemon.pid, status.stdout

        reload = shlex.split(one(service, "ExecReload").replace("$MAINPID", str(daemon.pid)))
        subprocess.run(reload, check=True, timeout=10)
        notify_socket.wait("RELOADING", within(30), log)
        notify_socket.wait("READY", within(30), log)
        daemon.send_signal(signal.Signals[one(service, "KillSignal", "SIGTERM")])
        notify_socket.wait("STOPPING", within(30), log)
        assert daemon.wait(timeout=seconds(one(service, "TimeoutStopSec"))) == 0, log.read_text()
    finally:
        stop(daemon)
    assert "Operation not permitted" not in log.read_text()
    assert not (runtime / "memsync.sock").exists()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@needs_libseccomp
def test_the_hub_runs_as_its_system_unit_says(installed: Installed, tmp_path: Path) -> None:
    """Its data in its StateDirectory=, on loopback; it serves, authenticates, fans an event
    out and stops cleanly on SIGTERM, under the unit's seccomp sandbox."""
    service = read_unit(installed.path("memsync-hub.service"))["Service"]
    argv = shlex.split(one(service, "ExecStart"))
    options = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert argv[1:3] == ["hub", "serve"]
    assert options["--data"] == f"/var/lib/{one(service, 'StateDirectory')}"
    assert options["--listen"].startswith("127.0.0.1:")

    data = tmp_path / "state" / "memsync-hub"  # as `memsync hub init` leaves it for systemd
    made = subprocess.run(
        [str(MEMSYNC), "hub", "init", str(data), "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    admin = json.loads(made.stdout)["token"]
    url = f"http://127.0.0.1:{_free_port()}"
    options |= {"--data": str(data), "--listen": url.removeprefix("http://")}
    argv = argv[:3] + [word for pair in options.items() for word in pair]
    log = tmp_path / "hub.log"
    hub = confined(service, argv, {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}, log)
    try:

        def up() -> bool:
            assert hub.poll() is None, log.read_text()
            try:
                with urllib.request.urlopen(f"{url}/v1/health", timeout=1) as answer:
                    return bool(answer.status == 200)
            except OSError:
                return False

        with_log(log, lambda: wait_for(up, 30, "the hub to serve"))
        # descriptors for more connections than a default 1024 (the hub caps below it)
        limits = Path(f"/proc/{hub.pid}/limits").read_text()
        nofile = int(one(service, "LimitNOFILE"))
        assert nofile > 1024
        _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        expected = nofile if hard == resource.RLIM_INFINITY else min(nofile, hard)
        assert re.search(rf"Max open files +{expected} +{expected} ", limits), limits

        auth = {"Authorization": f"Bearer {admin}"}
        events = urllib.request.urlopen(
            urllib.request.Request(f"{url}/v1/events?root=team", headers=auth), timeout=10
        )
        try:
            notify = urllib.request.Request(
                f"{url}/v1/roots/team/notify",
                data=json.dumps({"commit": "ab" * 20}).encode(),
                headers={**auth, "Content-Type": "application/json"},
                method="POST",
            )
            with urllib.request.urlopen(notify, timeout=10) as answer:
                assert answer.status in (200, 202, 204)
            lines: list[str] = []
            while "event: upstream" not in lines:  # the socket timeout bounds each read
                lines.append(events.readline().decode().strip())
                assert len(lines) < 50, lines
        finally:
            events.close()

        hub.send_signal(signal.Signals[one(service, "KillSignal", "SIGTERM")])
        assert hub.wait(timeout=seconds(one(service, "TimeoutStopSec"))) == 0, log.read_text()
    finally:
        stop(hub)
    assert "Operation not permitted" not in log.read_text()
    assert data.stat().st_mode & 0o777 == 0o700


PROBE = """
import errno, json, mmap, os, socket
seen = {}
try:
    mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    seen["write+exec mapping"] = "allowed"
except OSError as exc:
    seen["write+exec mapping"] = errno.errorcode[exc.errno]
try:
    socket.socket(socket.AF_NETLINK, socket.SOCK_RAW).close()
    seen["netlink socket"] = "allowed"
except OSError as exc:
    seen["netlink socket"] = errno.errorcode[exc.errno]
try:
    os.setuid(os.getuid())  # in @privileged, which the hub's filter takes out
    seen["setuid"] = "allowed"
except OSError as exc:
    seen["setuid"] = errno.errorcode[exc.errno]
seen["umask"] = oct(os.umask(0))
print(json.dumps(seen))
"""


@needs_libseccomp
def test_the_emulated_sandbox_bites(installed: Installed, tmp_path: Path) -> None:
    """The harness above is only worth its passes if it refuses what the unit forbids."""
    service = read_unit(installed.path("memsync-hub.service"))["Service"]
    log = tmp_path / "probe.log"
    probe = confined(service, [sys.executable, "-c", PROBE], {"PATH": SYSTEM_PATH}, log)
    assert probe.wait(timeout=60) == 0, log.read_text()
    assert json.loads(log.read_text()) == {
        "write+exec mapping": "EPERM",
        "netlink socket": "EAFNOSUPPORT",
        "setuid": "EPERM",
        "umask": "0o77",
    }
    free = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(free.stdout)["write+exec mapping"] == "allowed"
