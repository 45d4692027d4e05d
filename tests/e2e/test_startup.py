"""Start-up (issue 11, item 6): `--version`, `--help` and `status` through a running daemon
load nothing heavy, and print exactly what they printed before; the shortcuts behind that
(the config memo, the status document's shape) never decide differently from the full path.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from memsync import __version__
from memsync.cli.group import _Commands
from memsync.config import paths
from memsync.daemon.client import DaemonError, DaemonUnavailable, call
from memsync.wire.cli import StatusReport
from memsync.wire.shape import STATUS_REPORT, Shape, fit
from tests.conftest import Team
from tests.e2e.daemons import Daemon, launcher, write_config
from tests.e2e.test_cli import memsync
from tests.helpers import GIT_ENV, commit, git, push, wait_for

# What `--version`, `--help` and `status` through the daemon must not import.
HEAVY = (
    "pydantic",
    "pydantic_core",
    "aiohttp",
    "git",
    "yaml",
    "memsync.config.schema",
    "memsync.config.load",
    "memsync.config.model",
    "memsync.validators",
    "memsync.wire.cli",
    "memsync.roots",
    "memsync.transports",
    "memsync.status",
)

# What a one-shot `sync-now` (no daemon) that admits cleanly must not import once its
# configuration loaded before (the settings memo): the schema, the repair role, the wire
# models, the daemon's server, GitPython (a one-shot git box asks git). Issue 18: for a root
# without credentials, signing key or other secret, the credential server and those
# records (`rootkeys`, `secrets`); uuid (which imports platform); tempfile and shutil (bz2,
# lzma, random: a state file's temporary file is `atomicfile.private_temp`'s, a worktree to
# remove loads shutil then); the settings of parts this configuration does not have
# (`config.sections`); socket and the peer rules (no daemon: no control socket file to
# connect to); the repair seam's types (`roots.repairing`: a conflict loads them); the
# signed admission checks (`roots.admission`: the trust anchor's record and codes are
# `roots.anchor`'s) and the commit signer (an autocommit loads it), with base64 and struct;
# shlex (it quotes a refusal's fix or a missing config's hint only); a configuration
# problem's record (`configproblem`: made where a configuration is judged); git's progress
# lines (`gitprogress`: a terminal's progress or a failed streamed call parses them); the
# parse cache's SQLite store (`validators.cachestore`, sqlite3: a sync reads the lineage
# records, whose summaries are `summaryframe`'s); OpenSSL's `_hashlib` (the records' BLAKE2b
# and an operation key's SHA-256 are CPython's own, `memodigest`'s); the per-file parser and
# the graph's builder (the lineage record of the tree the root follows holds the summaries
# of its files, and a change to a file outside the graph parses nothing: `filesummary`,
# `profile` and `gcpause` are what the cross-file pass needs of them); the inbox and queue
# rules (a root without those files: `auxpaths` tells); `logging` (with `traceback`), which a
# cycle that writes no log record never needs (`lazylog`).
COLD_SYNC_HEAVY = (
    "logging",
    "traceback",
    "memsync.validators.inbox",
    "memsync.validators.queue",
    "memsync.validators.summary",
    "memsync.validators.document",
    "memsync.validators.blocks",
    "memsync.validators.nodelines",
    "memsync.validators.runedges",
    "memsync.validators.scanwords",
    "memsync.validators.assembly",
    "memsync.validators.edges",
    "memsync.validators.graphmodel",
    "hashlib",
    "_hashlib",
    "memsync.validators.cachestore",
    "sqlite3",
    "_sqlite3",
    "memsync.gitprogress",
    "memsync.configproblem",
    "shlex",
    "memsync.roots.admission",
    "memsync.transports.commitsign",
    "base64",
    "struct",
    "socket",
    "memsync.daemon.peer",
    "memsync.config.sections",
    "memsync.transports.rootkeys",
    "memsync.secrets",
    "memsync.transports.credentials",
    "uuid",
    "platform",
    "tempfile",
    "shutil",
    "click",
    "git",
    "gitdb",
    "memsync.cli.group",
    "memsync.cli.kit",
    "pydantic",
    "pydantic_core",
    "yaml",
    "aiohttp",
    "memsync.config.schema",
    "memsync.config.load",
    "memsync.cycles.repair",
    "memsync.cycles.repairprompt",
    "memsync.roots.repairing",
    "memsync.wire",
    "memsync.daemon.app",
)

# ... and `status` with no daemon: the status document's shape check (`wire.shape`) is
# standard library; the models are not; the plain forms of `status` run without click.
# Issue 18: of the git box it loads the runner and `git status` (`gitstatus`, `workstate`)
# only, not the other parsers; not the publisher, the admission checks (their record is
# `roots.anchor`'s), the maintenance cycles' git reads (their records are
# `cycles.records`), a cycle's result (its status words are `roots.syncstatus`), the path
# rules (no untracked file to check here), the signer, the views (none configured here),
# live progress or base64 (a root with inline signers only); nor `typing` (the modules on
# its path import it for the type checker only: `TYPE_CHECKING = False`); nor `dataclasses`
# with `inspect` (the maintenance cycles' records are `values.value`s).
STATUS_HEAVY = (
    *(h for h in COLD_SYNC_HEAVY if h != "memsync.wire"),
    "typing",
    "dataclasses",
    "inspect",
    "memsync.wire.cli",
    "memsync.wire.hub",
    "memsync.wire.manifest",
    "memsync.transports.git",
    "memsync.transports.gitcommits",
    "memsync.transports.gitfacts",
    "memsync.transports.gitmemo",
    "memsync.transports.gittree",
    "memsync.transports.gitparse",
    "memsync.validators.tree",
    "memsync.roots.publish",
    "memsync.roots.result",
    "memsync.validators.paths",
    "memsync.validators.problems",
    "memsync.cycles.pressure",
    "memsync.progress",
    "memsync.views",
)

# Runs the console script's entry point in a fresh interpreter, then names what it imported.
PROBE = """
import sys
from memsync.__main__ import main
import os
os._exit = sys.exit  # the plain commands end with os._exit: here, SystemExit
watched = sys.argv[1].split(",")
sys.argv[1:] = sys.argv[2:]
try:
    main()
except SystemExit as exc:
    code = exc.code
heavy = sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in watched))
box = sys.modules.get("memsync.transports.process")  # read after the list: loads nothing
print("PROBE " + repr((code, heavy, box.started() if box else 0)), file=sys.stderr)
"""


def probe(
    *args: str, env: dict[str, str], heavy: tuple[str, ...] = HEAVY, cwd: Path | None = None
) -> tuple[int, list[str], str, str]:
    """Exit code, heavy modules imported, stdout and the rest of stderr of `memsync ARGS`."""
    code, found, _started, out, rest = probe_counting(*args, env=env, heavy=heavy, cwd=cwd)
    return code, found, out, rest


def probe_counting(
    *args: str,
    env: dict[str, str],
    heavy: tuple[str, ...] = HEAVY,
    cwd: Path | None = None,
    timeout: float = 60,
) -> tuple[int, list[str], int, str, str]:
    """`probe`, and how many processes the process box started."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(heavy), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV, **env},
        cwd=cwd,
        timeout=timeout,
        check=False,
    )
    rest, _, last = done.stderr.rstrip("\n").rpartition("\n")
    assert last.startswith("PROBE "), done.stderr
    code, found, started = eval(last.removeprefix("PROBE "))  # noqa: S307 - our own repr
    return code, found, started, done.stdout, rest


def no_uptime(text: str) -> str:
    """The daemon's uptime moves between two reads; everything else must not."""
    text = re.sub(r'"uptime_seconds":\d+', '"uptime_seconds":0', text)
    return re.sub(r"\bup \d+[hm]\d+[ms]", "up 0m00s", text)


@pytest.fixture
def running(team: Team, tmp_path: Path) -> Iterator[tuple[Daemon, dict[str, str]]]:
    """bob's daemon, after its first cycle; the environment its memo is found in."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    with launcher(tmp_path) as launch:
        daemon = launch(config, env=env)
        wait_for(
            lambda: call(daemon.socket, "GET", "/v1/status")["roots"][0]["status"] is not None,
            30,
            "the daemon's first cycle",
        )
        yield daemon, env


# -- whole processes -------------------------------------------------------------------------


def test_version_loads_neither_click_nor_the_commands(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    everything = (*HEAVY, "click", "memsync.cli.group", "memsync.cli.kit", "memsync.config")
    code, heavy, out, _ = probe("--version", env=env, heavy=everything)
    assert (code, heavy, out) == (0, [], f"memsync, version {__version__}\n")
    assert memsync("--version").stdout == out  # python -m memsync, the same entry


def test_help_loads_nothing_heavy(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    code, heavy, out, _ = probe("--help", env=env, heavy=(*HEAVY, "tempfile"))
    assert (code, heavy) == (0, [])
    for name in ("status", "sync-now", "views", "hub", "run", "cycle", "keys"):
        assert re.search(rf"^  {name}\s+\S", out, re.MULTILINE), out


def test_status_through_the_daemon_loads_nothing_heavy_and_prints_what_the_model_would(
    running: tuple[Daemon, dict[str, str]], tmp_path: Path
) -> None:
    daemon, env = running
    before = StatusReport.model_validate(call(daemon.socket, "GET", "/v1/status"))
    code, heavy, out, err = probe(
        "--config", str(daemon.config), "status", "--json", env=env, heavy=(*HEAVY, "click")
    )
    assert (code, heavy, err) == (0, [], "")
    assert no_uptime(out) == no_uptime(before.model_dump_json() + "\n")
    # The table: the same as the full path prints (no memo in a fresh cache: full load).
    code, heavy, fast, _ = probe(
        "--config", str(daemon.config), "status", env=env, heavy=(*HEAVY, "click")
    )
    assert (code, heavy) == (0, [])
    fresh = {"XDG_CACHE_HOME": str(tmp_path / "fresh-cache")}
    full = memsync("--config", str(daemon.config), "status", env=fresh)
    assert full.returncode == 0, full.stderr
    assert no_uptime(fast) == no_uptime(full.stdout)
    assert fast.startswith(f"daemon: running, pid {daemon.proc.pid}, up ")


def test_a_broken_config_fails_the_same_with_or_without_the_memo(
    running: tuple[Daemon, dict[str, str]], tmp_path: Path
) -> None:
    daemon, env = running
    config = daemon.config
    config.write_text(config.read_text() + "bogus: 1\n")
    fresh = {"XDG_CACHE_HOME": str(tmp_path / "fresh-cache")}
    for args in (("status",), ("status", "--json")):
        with_memo = memsync("--config", str(config), *args, env=env)
        without = memsync("--config", str(config), *args, env=fresh)
        assert with_memo.returncode == without.returncode == 2
        assert (with_memo.stdout, with_memo.stderr) == (without.stdout, without.stderr)
        assert "bogus: unknown key" in with_memo.stderr


def test_status_without_a_daemon_still_reports_local_facts(team: Team, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    for _ in range(2):  # the second run has the memo, finds no daemon, reads local facts
        done = memsync("--config", str(config), "status", "--json", env=env)
        assert done.returncode == 0, done.stderr
        report = StatusReport.model_validate_json(done.stdout)
        assert not report.daemon.running
        assert [r.root for r in report.roots] == ["bob"]
        assert done.stdout == report.model_dump_json() + "\n"
    # With the memo, neither the schema nor the wire models load; it prints the same.
    for args in (("status", "--json"), ("status",)):
        code, heavy, out, err = probe("--config", str(config), *args, env=env, heavy=STATUS_HEAVY)
        assert (code, heavy) == (0, []), err
        full = memsync("--config", str(config), *args, env={"XDG_CACHE_HOME": str(tmp_path / "x")})
        assert out == full.stdout


def test_sync_now_without_a_daemon_loads_only_what_a_clean_cycle_uses(
    team: Team, tmp_path: Path
) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    for turn in range(3):  # the first loads the schema and writes the memo; the rest do not
        commit(team.alice.path, {"MEMORY_cold.md": f"# Cold\n\nturn {turn}\n"}, "cold")
        push(team.alice.path)
        code, heavy, out, err = probe(
            "--config", str(config), "sync-now", env=env, heavy=COLD_SYNC_HEAVY
        )
        assert code == 0, err
        assert out.split()[:2] == ["bob", "synced"], out
        assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
        if turn:
            assert heavy == [], turn
    # The signature codes named without the checks are the checks' own.
    from memsync.roots.anchor import CODES  # noqa: PLC0415
    from memsync.validators.commitsig import CODES as CHECKED  # noqa: PLC0415

    assert frozenset(CHECKED) == CODES
    # --json still prints the wire model's document (pydantic loads for it, not before).
    commit(team.alice.path, {"MEMORY_cold.md": "# Cold\n\njson\n"}, "cold")
    push(team.alice.path)
    done = memsync("--config", str(config), "sync-now", "--json", env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["results"][0]["status"] == "synced"


def test_a_plain_command_ends_with_everything_it_wrote_written(team: Team, tmp_path: Path) -> None:
    """The plain forms end the process without tearing it down (issue 18): what they print
    on stdout and log on stderr is all there, with the exit code, through pipes."""
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    assert memsync("--config", str(config), "sync-now", env=env).returncode == 0
    (tmp_path / "state" / "roots" / "bob" / "insight.json").write_text("[1, 2]")
    for _ in range(2):  # the first writes the settings memo; the second is the plainest path
        done = memsync("--config", str(config), "status", env=env)
        assert done.returncode == 0, done.stderr
        assert "insight pressure at" in done.stderr and "restarts at 0" in done.stderr
        assert done.stdout.startswith("daemon: not running"), done.stdout
        assert done.stdout.endswith("\n") and "bob" in done.stdout
        code, _, out, err = probe("--config", str(config), "status", "--json", env=env)
        assert code == 0 and json.loads(out)["roots"][0]["insight"]["points"] == 0, err
    refused = memsync("--config", str(config), "sync-now", "nobody", env=env)
    assert refused.returncode == 2 and "unknown root(s): nobody" in refused.stderr


# Runs the console script's entry point, then says whether the garbage collector is on and
# whether what was loaded before the cycle ran was frozen (`gc.freeze`).
GC_PROBE = """
import gc, os, sys
from memsync.__main__ import main
os._exit = sys.exit  # the plain commands end with os._exit: here, SystemExit
try:
    main()
except SystemExit:
    pass
print("GC " + repr((gc.isenabled(), gc.get_freeze_count() > 0)), file=sys.stderr)
"""


def test_a_plain_sync_now_loads_with_the_collector_off_and_cycles_with_it_on(
    team: Team, tmp_path: Path
) -> None:
    """Issue 18: loading the command's code makes no garbage cycles worth collecting (the
    collector is off then); the cycle itself runs with the collector on, over a frozen heap."""
    env = {**os.environ, **GIT_ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    for command in (["sync-now"], ["sync-now", "--dry-run"]):
        done = subprocess.run(
            [sys.executable, "-c", GC_PROBE, "--config", str(config), *command],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
            check=False,
        )
        assert done.stderr.rstrip().rpartition("\n")[2] == "GC (True, True)", done.stderr


# -- the help registry -----------------------------------------------------------------------


def test_lazy_commands_are_listed_with_their_own_help() -> None:
    for name, (module, summary) in _Commands.LAZY.items():
        command = getattr(importlib.import_module(module), name.replace("-", "_"))
        assert isinstance(command, click.Command)
        assert command.name == name
        assert command.help is not None
        for limit in (20, 45, 80, 200):
            listed = click.Command(name, help=summary).get_short_help_str(limit)
            assert listed == command.get_short_help_str(limit), (name, limit)


# -- the config memo -------------------------------------------------------------------------


def test_the_memo_answers_only_for_the_bytes_and_conditions_it_saw(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    config = tmp_path / "config.yaml"
    config.write_text("version: 1\n")
    where = paths.StatePaths(tmp_path / "state", tmp_path / "run.sock")
    assert paths.recall(config) is None
    paths.remember(config, config.read_bytes(), where)
    assert paths.recall(config) == where
    memo = tmp_path / "cache" / "memsync" / paths.MEMO_NAME
    assert memo.stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path / "elsewhere"))  # moves the socket
    assert paths.recall(config) is None
    monkeypatch.delenv("XDG_RUNTIME_DIR")
    config.write_text("version: 1\n\n")
    assert paths.recall(config) is None
    paths.remember(config, config.read_bytes(), where)
    assert paths.recall(config) == where
    for junk in (b"", b"[]", b'{"version": 2, "entries": {}}', b"\xff", b'{"version": 1}'):
        memo.write_bytes(junk)
        assert paths.recall(config) is None
    entries = {str(config.absolute()): {"key": "x", "state_dir": "rel", "control_socket": "/s"}}
    memo.write_text(json.dumps({"version": 1, "entries": entries}))
    assert paths.recall(config) is None


def test_the_memo_keeps_the_most_recent_configs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    where = paths.StatePaths(tmp_path / "state", tmp_path / "run.sock")
    configs = [tmp_path / f"c{i}.yaml" for i in range(paths.MEMO_ENTRIES + 3)]
    for config in configs:
        config.write_text("version: 1\n")
        paths.remember(config, config.read_bytes(), where)
    assert [paths.recall(c) is not None for c in configs] == [False] * 3 + [True] * (
        paths.MEMO_ENTRIES
    )


# -- the status document's shape -------------------------------------------------------------


def shape_of(model: type[BaseModel]) -> Shape:
    """The shape `wire.shape` should hold for a wire model, read from the model itself."""
    names = {str: "str", int: "int", bool: "bool"}
    out: dict[str, Shape] = {}
    for field, info in model.model_fields.items():
        annotation: Any = info.annotation
        args = [a for a in getattr(annotation, "__args__", ()) if a is not type(None)]
        optional = len(args) < len(getattr(annotation, "__args__", ()))
        if optional:
            annotation = args[0]
        if getattr(annotation, "__origin__", None) is list:
            item = annotation.__args__[0]
            out[field] = [names[item] if item in names else shape_of(item)]
        elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out[field] = shape_of(annotation)
        else:
            out[field] = names[annotation] + ("?" if optional else "")
    return out


def test_the_status_shape_is_the_wire_models() -> None:
    assert shape_of(StatusReport) == STATUS_REPORT
    assert json.dumps(shape_of(StatusReport)) == json.dumps(STATUS_REPORT)  # key order too


def documents(shape: Shape) -> st.SearchStrategy[Any]:
    if isinstance(shape, dict):
        return st.fixed_dictionaries({k: documents(v) for k, v in shape.items()})
    if isinstance(shape, list):
        return st.lists(documents(shape[0]), max_size=2)
    base: st.SearchStrategy[Any] = {
        "str": st.text(),
        "int": st.integers(-(2**63), 2**64 - 1),
        "bool": st.booleans(),
    }[shape.rstrip("?")]
    return st.none() | base if shape.endswith("?") else base


def dumps(document: Any) -> str:
    """What `cli.app.emit_document` prints (without the newline)."""
    return json.dumps(document, ensure_ascii=False, separators=(",", ":"))


@given(documents(STATUS_REPORT), st.randoms())
def test_a_fitting_document_prints_as_the_model_would(document: Any, random: Any) -> None:
    shuffled = dict(random.sample(list(document.items()), len(document)))
    fitted = fit(shuffled, STATUS_REPORT)
    assert fitted is not None
    assert dumps(fitted) == StatusReport.model_validate(shuffled).model_dump_json()


@given(documents(STATUS_REPORT), st.data())
def test_a_document_of_another_shape_does_not_fit(document: Any, data: st.DataObject) -> None:
    broken = json.loads(json.dumps(document))
    spoil = data.draw(st.sampled_from(["drop", "extra", "bool", "int", "surrogate"]))
    daemon = broken["daemon"]
    if spoil == "drop":
        del daemon[data.draw(st.sampled_from(sorted(daemon)))]
    elif spoil == "extra":
        daemon["new_field"] = 1
    elif spoil == "bool":
        daemon["running"] = data.draw(st.sampled_from([1, 0, "true", None, 1.0]))
    elif spoil == "int":
        daemon["pid"] = data.draw(st.sampled_from([True, False, 1.0, "1", 2**64]))
    else:
        daemon["version"] = "\ud800"
    assert fit(broken, STATUS_REPORT) is None
    assert fit(None, STATUS_REPORT) is None


# -- the control socket client ----------------------------------------------------------------


def answering(path: Path, reply: bytes) -> threading.Thread:
    """A one-shot server on a unix socket that reads a request and sends `reply` as is."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def serve() -> None:
        with server, server.accept()[0] as conn:
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(4096)
            conn.sendall(reply)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


@pytest.mark.parametrize(
    ("reply", "outcome"),
    [
        (b'HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{"a":1}', {"a": 1}),
        (b'HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\n{"a":1}junk', {"a": 1}),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'3\r\n{"a\r\n4;x=y\r\n":1}\r\n0\r\n\r\n',
            {"a": 1},
        ),
        (b'HTTP/1.1 200 OK\r\n\r\n{"a":1}', {"a": 1}),
        (b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n", None),
        (
            b"HTTP/1.1 409 Conflict\r\nContent-Length: 44\r\n\r\n"
            b'{"error": {"code": "x", "message": "taken"}}',
            "refused GET /v1/status: taken",
        ),
        (b"", "closed the connection"),
        (b'HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n{"a":1}', "closed the connection"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc", "closed the"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nnot", "not JSON"),
    ],
)
def test_the_client_reads_what_an_http_server_may_send(
    tmp_path: Path, reply: bytes, outcome: object
) -> None:
    path = tmp_path / "s.sock"
    thread = answering(path, reply)
    if isinstance(outcome, str):
        with pytest.raises(DaemonError, match=outcome):
            call(path, "GET", "/v1/status", timeout=10)
    else:
        assert call(path, "GET", "/v1/status", timeout=10) == outcome
    thread.join(10)


def test_the_client_tells_no_daemon_from_a_stale_socket(tmp_path: Path) -> None:
    with pytest.raises(DaemonUnavailable, match="no control socket"):
        call(tmp_path / "none.sock", "GET", "/v1/status")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(tmp_path / "stale.sock"))
    stale.close()  # the file stays, nothing listens
    with pytest.raises(DaemonUnavailable, match="no daemon answers"):
        call(tmp_path / "stale.sock", "GET", "/v1/status")


# -- the status document without a daemon ----------------------------------------------------


def test_the_local_status_document_is_the_models(team: Team, tmp_path: Path) -> None:
    from memsync.config.model import Settings  # noqa: PLC0415
    from memsync.roots import pause  # noqa: PLC0415
    from memsync.status import status_document, status_json, status_report  # noqa: PLC0415

    team.bob.sync()
    settings = Settings(
        state_dir=team.bob.state_dir,
        control_socket=tmp_path / "none.sock",
        roots=(team.bob.settings, team.alice.settings),
        config_path=tmp_path / "config.yaml",
    )
    (team.alice.path / "MEMORY_dirty.md").write_text("# Dirty\n")
    for turn in range(2):  # then bob is paused (status, message, until)
        if turn:
            pause.pause(team.bob.state_dir, "root", "bob", None)
        for other in (None, "/etc/other.yaml"):
            model = status_report(settings, other_config=other).model_dump(mode="json")
            document = status_document(settings, other_config=other)
            assert fit(document, STATUS_REPORT) is not None  # the fast path is taken
            assert json.dumps(document) == json.dumps(model)  # keys in the model's order
            assert status_json(settings, other_config=other) == model
        assert status_json(settings)["roots"][0]["status"] == ("paused" if turn else "current")


# -- one command, one module ------------------------------------------------------------------

# Runs the console script's entry point, then names the commands the top-level group holds
# and the command modules that were imported.
COMMANDS_PROBE = """
import sys
from memsync.__main__ import main
import os
os._exit = sys.exit  # the plain commands end with os._exit: here, SystemExit
try:
    main()
except SystemExit as exc:
    code = exc.code
cli = sys.modules.get("memsync.cli.group")
held = sorted(cli.cli.commands) if cli is not None else []
modules = sorted(m for m in sys.modules if m in COMMAND_MODULES)
print("PROBE " + repr((code, held, modules)), file=sys.stderr)
"""
# Every module that defines a command (the group's lazy table names them all).
COMMAND_MODULES = frozenset(module for module, _ in _Commands.LAZY.values())


def commands_loaded(*args: str, env: dict[str, str]) -> tuple[int, list[str], list[str]]:
    """Exit code, the commands defined and the command modules imported by `memsync ARGS`."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"COMMAND_MODULES = {sorted(COMMAND_MODULES)!r}\n{COMMANDS_PROBE}",
            *args,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV, **env},
        timeout=120,
        check=False,
    )
    last = done.stderr.rstrip("\n").rpartition("\n")[2]
    assert last.startswith("PROBE "), done.stderr
    found: tuple[int, list[str], list[str]] = eval(last.removeprefix("PROBE "))  # noqa: S307
    return found


def test_a_command_defines_and_imports_only_itself(team: Team, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    module = {name: module for name, (module, _) in _Commands.LAZY.items()}
    for args in (("sync-now",), ("status",), ("status", "--json"), ("sync-now", "--dry-run")):
        for _ in range(2):  # the full configuration load, then the settings memo
            # Through click (`--log-format text` is the default, but not a plain form):
            code, held, modules = commands_loaded(
                "--log-format", "text", "--config", str(config), *args, env=env
            )
            assert code == 0, args
            assert held == [args[0]], args
            assert modules == [module[args[0]]], args
            # The plain form: no click, no command group, no command module at all.
            code, held, modules = commands_loaded("--config", str(config), *args, env=env)
            assert (code, held, modules) == (0, [], []), args
    code, held, modules = commands_loaded("config", "sample", env=env)
    assert (code, held, modules) == (0, ["config"], ["memsync.cli.config"])


# -- patterns compiled at import --------------------------------------------------------------


# Runs the console script's entry point, counting the patterns memsync's modules compile
# while they load (`re.compile` called from a module's top level), by module.
def probed(probe: str, tag: str, config: Path, command: str, env: dict[str, str]) -> list[str]:
    """What `probe` (a memsync run under a hook) printed last after `tag`, for `command`."""
    done = subprocess.run(
        [sys.executable, "-c", probe, "--config", str(config), command],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    last = done.stderr.rstrip().rpartition("\n")[2]
    assert done.returncode == 0 and last.startswith(tag + " "), done.stderr
    found: list[str] = eval(last.removeprefix(tag + " "))  # noqa: S307 - our own repr
    return found


COMPILE_PROBE = """
import os, re, sys
compiled = []
original = re.compile
def counting(pattern, flags=0):
    caller = sys._getframe(1)
    name = caller.f_globals.get("__name__", "")
    if caller.f_code.co_name == "<module>" and name.startswith("memsync"):
        compiled.append(name)
    return original(pattern, flags)
re.compile = counting
from memsync.__main__ import main
os._exit = sys.exit  # the plain commands end with os._exit: here, SystemExit
try:
    main()
except SystemExit:
    pass
print("COMPILED " + repr(sorted(set(compiled))), file=sys.stderr)
"""
# Patterns compile on first use (`lazypattern.lazy`, issue 18), not as their module loads:
# the redaction of a URL or token, the name rule, an attributes file's drivers, a loose
# ref's name and contents, an object id (a cold status matches none of them), and, not
# pinned here since gitparse compiles the patterns a cycle does match, fsck's findings and
# git's version; the per-file parser's (headings, node lines, edge lists, fields, fences:
# a clean cycle whose changed files the lineage record does not need parses none), hidden
# text in bytes that are not ASCII, and the auxiliary files' (corrections, inbox, update
# queue, grants: a cycle that changes none of them reads none).
LAZY_PATTERNS = (
    "memsync.redaction",
    "memsync.names",
    "memsync.progress",
    "memsync.transports.gitconfig",
    "memsync.transports.gitread",
    "memsync.transports.gitenv",
    "memsync.validators.hiddentext",
    "memsync.validators.edgelists",
    "memsync.validators.headings",
    "memsync.validators.nodelines",
    "memsync.validators.document",
    "memsync.validators.runedges",
    "memsync.validators.corrections",
    "memsync.validators.inbox",
    "memsync.validators.queue",
    "memsync.validators.grants",
)
# The only modules whose patterns a cold `sync-now` compiles as they load (an allowlist: a
# new module-level pattern on the cycle's path fails here until it is lazy or listed): git's
# log and listing lines, the path rules, a content id, the lineage and shape records' names.
SYNC_COMPILES = (
    "memsync.transports.gitparse",
    "memsync.validators.paths",
    "memsync.validators.cache",
    "memsync.validators.lineagestore",
    "memsync.validators.listingstore",
    "memsync.validators.shapestore",
)


def test_a_cold_status_or_sync_now_compiles_only_the_patterns_it_matches(
    team: Team, tmp_path: Path
) -> None:
    env = {**os.environ, **GIT_ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    assert memsync("--config", str(config), "sync-now", env=env).returncode == 0  # the memo
    commit(team.alice.path, {"MEMORY_cold.md": "# Cold\n\nlazy\n"}, "cold")
    push(team.alice.path)
    found = {}
    for command in ("status", "sync-now"):
        found[command] = probed(COMPILE_PROBE, "COMPILED", config, command, env)
    assert found["status"] == []
    assert not set(found["sync-now"]) & set(LAZY_PATTERNS), found["sync-now"]
    assert set(found["sync-now"]) <= set(SYNC_COMPILES), found["sync-now"]
    assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")


# Runs the console script's entry point, naming the classes whose docstring `dataclasses`
# made from their signature (`inspect.signature`, ~0.1 ms a class) as they loaded.
SIGNATURE_PROBE = """
import inspect, os, sys
signed = []
original = inspect.signature
def counting(obj, *args, **kwargs):
    if sys._getframe(1).f_globals.get("__name__") == "dataclasses":
        signed.append(obj.__module__ + "." + obj.__qualname__)
    return original(obj, *args, **kwargs)
inspect.signature = counting
from memsync.__main__ import main
os._exit = sys.exit  # the plain commands end with os._exit: here, SystemExit
try:
    main()
except SystemExit:
    pass
print("SIGNED " + repr(sorted(signed)), file=sys.stderr)
"""


def test_a_cold_sync_now_loads_no_dataclass_without_its_docstring(
    team: Team, tmp_path: Path
) -> None:
    """Issue 18: a dataclass without a docstring gets one made from its signature as its
    module loads; every class a cold `sync-now` loads says what it is instead."""
    env = {**os.environ, **GIT_ENV, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    assert memsync("--config", str(config), "sync-now", env=env).returncode == 0  # the memo
    commit(team.alice.path, {"MEMORY_cold.md": "# Cold\n\nsigned\n"}, "cold")
    push(team.alice.path)
    assert probed(SIGNATURE_PROBE, "SIGNED", config, "sync-now", env) == []
    assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")


def test_no_dataclass_declares_a_class_variable_as_a_field() -> None:
    """A cold status runs without `typing` loaded, and `dataclasses` tells a `ClassVar`
    annotation (a string here) from a field only through it: so no dataclass of memsync's
    may declare one (it would become a field when `typing` is not loaded)."""
    import dataclasses  # noqa: PLC0415
    import pkgutil  # noqa: PLC0415

    import memsync  # noqa: PLC0415

    checked = 0
    for info in pkgutil.walk_packages(memsync.__path__, "memsync."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if isinstance(value, type) and dataclasses.is_dataclass(value):
                checked += 1
                notes = getattr(value, "__annotations__", {})
                assert not any("ClassVar" in str(note) for note in notes.values()), value
    assert checked > 50
