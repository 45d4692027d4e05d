"""Progress on a terminal (issue 17, item 9): `memsync init` joining an upstream, a first
`sync-now` and a `views pull` show their phases (git's own, the validation counts, the
package's bytes and files) when run on a pseudo-terminal; piped, or with `--json`, they
show none and print exactly the same result. Real subprocesses of the CLI, a real pty,
real git, a real bare upstream and a real hub."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

from bench.sync import make_upstream
from tests.e2e.test_cli import memsync
from tests.e2e.test_views import (  # noqa: F401 - the view scene's fixtures
    MEMORY,
    Scene,
    built,
    copied,
    hub,
    provider,
    scene,
)
from tests.helpers import GIT_ENV, commit, git

ANSI = re.compile(rb"\x1b\[[0-9;?]*[A-Za-z]")
DEADLINE = 120.0


def on_terminal(*args: str, cwd: Path, env: dict[str, str] | None = None) -> tuple[int, str]:
    """Run the CLI with stdin, stdout and stderr on a pseudo-terminal; (exit code, what the
    terminal received, escape sequences taken out, `\\r` read as a line end)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    full_env = {**os.environ, **GIT_ENV, "TERM": "xterm-256color", **(env or {})}
    full_env.pop("NO_COLOR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsync", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        cwd=cwd,
        env=full_env,
        start_new_session=True,
    )
    os.close(follower)
    received = bytearray()
    end = time.monotonic() + DEADLINE
    try:
        while True:
            ready, _, _ = select.select([leader], [], [], max(end - time.monotonic(), 0))
            if not ready:
                raise AssertionError(f"memsync {args} did not finish on the terminal in time")
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # EIO: every holder of the terminal's other side is gone
                break
            if not chunk:
                break
            received += chunk
        code = proc.wait(timeout=max(end - time.monotonic(), 1))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(leader)
    text = ANSI.sub(b"", bytes(received)).decode("utf-8", "replace")
    return code, text.replace("\r\n", "\n").replace("\r", "\n")


def final_lines(text: str) -> list[str]:
    """What stays once the (transient) progress display cleared itself: the lines after
    its last line."""
    lines = [line.rstrip() for line in text.split("\n") if line.strip()]
    last = max((i for i, line in enumerate(lines) if re.search(r"\d+/\d+ \w+", line)), default=-1)
    return lines[last + 1 :]


def test_init_shows_progress_on_a_terminal_and_nothing_when_piped(tmp_path: Path) -> None:
    upstream = make_upstream(tmp_path, 400)
    (tmp_path / "tty").mkdir()
    (tmp_path / "pipe").mkdir()

    code, shown = on_terminal("init", "mem", "--upstream", str(upstream), cwd=tmp_path / "tty")
    assert code == 0, shown
    # git's own phases (the upstream's, read from git's stderr) and memsync's validation.
    assert re.search(r"upstream: (Enumerating|Counting) objects", shown), shown
    assert re.search(r"Validating files .*400/400 files .*memory files, 0 items", shown), shown
    assert "Validating history" in shown

    piped = memsync("init", "mem", "--upstream", str(upstream), cwd=tmp_path / "pipe")
    assert piped.returncode == 0, piped.stderr
    assert piped.stderr == ""
    assert "Validating" not in piped.stdout and "objects" not in piped.stdout
    # The same result, word for word, once the display is gone.
    same = [line.replace(str(tmp_path / "tty"), "DIR") for line in final_lines(shown)]
    assert same == [piped.stdout.strip().replace(str(tmp_path / "pipe"), "DIR")]


def test_init_with_json_shows_no_progress_on_a_terminal(tmp_path: Path) -> None:
    upstream = make_upstream(tmp_path, 400)
    code, shown = on_terminal("init", "mem", "--upstream", str(upstream), "--json", cwd=tmp_path)
    assert code == 0, shown
    assert "Validating" not in shown and "objects" not in shown
    assert json.loads(shown)["joined"] is True


def test_a_first_sync_shows_progress_on_a_terminal_and_nothing_when_piped(
    tmp_path: Path,
) -> None:
    upstream = make_upstream(tmp_path, 3)
    roots = {}
    for name in ("ontty", "piped"):
        roots[name] = tmp_path / name
        assert memsync("init", str(roots[name]), "--upstream", str(upstream)).returncode == 0
    config = tmp_path / "config.yaml"
    config.write_text(
        f"version: 1\nstate_dir: {tmp_path / 'state'}\nroots:\n"
        + "".join(f"  {n}:\n    path: {p}\n    watch: false\n" for n, p in roots.items())
    )
    # Someone else adds many files upstream: the next sync fetches and checks them all.
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(upstream), str(other))
    logs = other / "insight_logs"
    logs.mkdir()
    for i in range(300):
        (logs / f"2026-12-01-{i:06d}.md").write_text(f"# Log {i}\n\nwhat was learned {i}\n")
    git(other, "add", "-f", "insight_logs")
    git(other, "commit", "-q", "-m", "insight: logs")
    git(other, "push", "-q", "origin", "HEAD:main")

    code, shown = on_terminal("--config", str(config), "sync-now", "ontty", cwd=tmp_path)
    assert code == 0, shown
    assert re.search(r"upstream: (Enumerating|Counting) objects", shown), shown
    assert re.search(r"Validating incoming changes .*300/300 changes", shown), shown

    piped = memsync("--config", str(config), "sync-now", "piped", cwd=tmp_path)
    assert piped.returncode == 0, piped.stderr
    assert "Validating" not in piped.stdout + piped.stderr

    # The same result but for the root's name and the time the cycle took.
    def plain(lines: list[str], name: str) -> list[str]:
        return [re.sub(r"\[\d+ ms\]", "[ms]", line.replace(name, "ROOT")) for line in lines]

    assert plain(final_lines(shown), "ontty") == plain(piped.stdout.strip().splitlines(), "piped")


def test_a_view_pull_shows_bytes_and_files_on_a_terminal(scene: Scene) -> None:  # noqa: F811
    assert scene.publish().status == "published"
    args = ("--config", str(scene.config), "views", "pull")

    code, shown = on_terminal(*args, "--json", cwd=scene.bob, env=scene.env)
    assert code == 0, shown
    assert "Downloading" not in shown
    assert json.loads(shown)["results"][0]["status"] == "pulled"

    commit(scene.provider, {"MEMORY.md": MEMORY.replace("short-lived", "5-minute")}, "shorter")
    assert scene.publish().revision == 2
    code, shown = on_terminal(*args, cwd=scene.bob, env=scene.env)
    assert code == 0, shown
    # The package's bytes as they arrived (with the rate), then the files checked.
    assert re.search(r"team-auth: Downloading package .*\d+ B of \d+ B .*B/s", shown), shown
    assert re.search(r"team-auth: Extracting and checking files .*\d+/\d+ files", shown), shown
    assert re.fullmatch(r"team-auth +pulled +rev 2 .*", final_lines(shown)[-1])

    piped = memsync(*args, env=scene.env)
    assert piped.returncode == 0 and piped.stderr == ""
    assert "Downloading" not in piped.stdout and "team-auth" in piped.stdout
