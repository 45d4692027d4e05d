"""`memsync init` as a subprocess when it fails: the directory is left as it was found (absent,
or empty), the message keeps git's and ssh's meaningful line, and the same command succeeds
once the upstream is fixed."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from memsync.roots.create import local_upstream
from tests.e2e.test_cli import memsync
from tests.helpers import git


@contextmanager
def banner_server() -> Iterator[int]:
    """A loopback TCP port that answers like an SSH server (a banner), then hangs up: the
    real ssh fails on it with its own words."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(b"SSH-2.0-OpenSSH_9.2\r\n")
                conn.settimeout(5)
                with suppress(OSError):
                    conn.recv(4096)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield int(server.getsockname()[1])
    finally:
        stop.set()
        thread.join(timeout=10)
        server.close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again: nothing listens there


def listing(path: Path) -> tuple[str, ...] | None:
    return tuple(sorted(os.listdir(path))) if path.exists() else None


@pytest.mark.parametrize("found", ["absent", "absent-with-parents", "empty"])
def test_a_failed_init_leaves_the_directory_as_found_and_the_same_init_then_works(
    tmp_path: Path, found: str
) -> None:
    root = tmp_path / "a" / "b" / "mem" if found == "absent-with-parents" else tmp_path / "mem"
    if found == "empty":
        root.mkdir()
    before = root.stat() if root.exists() else None
    upstream = tmp_path / "team.git"  # not there yet: unreachable
    failed = memsync("init", str(root), "--upstream", f"file://{upstream}")
    assert failed.returncode == 2, failed.stderr
    assert "does not appear to be a git repository" in failed.stderr, failed.stderr
    if found == "empty":
        assert listing(root) == ()
        after = root.stat()
        assert before is not None and (after.st_ino, after.st_mode) == (
            before.st_ino,
            before.st_mode,
        )
    else:
        assert not root.exists() and listing(tmp_path) == ()  # no parent left behind either
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(upstream))
    done = memsync("init", str(root), "--upstream", f"file://{upstream}")
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(root)) == [".git", ".gitignore", "MEMORY.md", "PURSUITS.md"]
    assert git(root, "status", "--porcelain") == ""
    assert git(upstream, "rev-parse", "main") == git(root, "rev-parse", "HEAD")


@pytest.mark.parametrize("server", ["nothing-listens", "ssh-banner-then-hangs-up"])
def test_an_ssh_failure_says_what_ssh_said(tmp_path: Path, server: str) -> None:
    root = tmp_path / "mem"
    root.mkdir()

    def attempt(port: int) -> str:
        failed = memsync("init", str(root), "--upstream", f"ssh://git@127.0.0.1:{port}/team.git")
        assert failed.returncode == 2, failed.stderr
        assert listing(root) == ()
        return failed.stderr

    if server == "nothing-listens":
        message = attempt(closed_port())
        assert "Connection refused" in message, message
    else:
        with banner_server() as port:
            message = attempt(port)
        assert f"127.0.0.1 port {port}" in message, message  # ssh's own line names the peer
    assert "the repository exists" not in message and "access rights" not in message
    upstream = tmp_path / "team.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(upstream))
    assert memsync("init", str(root), "--upstream", str(upstream)).returncode == 0


def test_a_refused_baseline_push_leaves_nothing_and_a_retry_joins(tmp_path: Path) -> None:
    upstream = tmp_path / "team.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(upstream))
    git(upstream, "config", "receive.maxInputSize", "16")  # the upstream refuses any pack
    root = tmp_path / "mem"
    failed = memsync("init", str(root), "--upstream", str(upstream))
    assert failed.returncode == 2 and "baseline push" in failed.stderr, failed.stderr
    assert not root.exists()
    git(upstream, "config", "--unset", "receive.maxInputSize")
    assert memsync("init", str(root), "--upstream", str(upstream)).returncode == 0
    assert git(upstream, "rev-parse", "main") == git(root, "rev-parse", "HEAD")


def test_a_relative_upstream_path_is_read_from_the_callers_directory(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(tmp_path / "team.git"))
    done = memsync("init", "mem", "--upstream", "team.git", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert git(tmp_path / "mem", "remote", "get-url", "origin") == str(tmp_path / "team.git")


def test_a_killed_inits_staging_directory_is_named_and_left_alone(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    (root / ".memsync-init-k1ll3d").mkdir(parents=True)
    (root / ".memsync-init-k1ll3d" / "MEMORY.md").write_text("# half made\n")
    done = memsync("init", str(root))
    assert done.returncode == 2 and ".memsync-init-k1ll3d" in done.stderr, done.stderr
    assert (root / ".memsync-init-k1ll3d" / "MEMORY.md").read_text() == "# half made\n"


@pytest.mark.parametrize(
    ("given", "kept"),
    [
        ("ssh://git@host/x.git", True),
        ("git@host:x.git", True),
        ("host:path/x.git", True),
        ("https://host/x.git", True),
        ("/abs/team.git", True),
        ("team.git", False),
        ("../up/team.git", False),
        ("./a:b/team.git", False),
    ],
)
def test_only_a_relative_local_upstream_path_is_made_absolute(given: str, kept: bool) -> None:
    made = local_upstream(given)
    assert made == given if kept else made == str(Path.cwd() / given)
