"""Upstream authentication through the git box, with the real git and ssh binaries.

HTTPS: a real smart-HTTP server on loopback (`git http-backend` behind Basic auth) takes
fetches and pushes only with the token, which reaches git through memsync's own credential
helper: while git holds an authenticated request open, no process's command line or
environment holds the token, no file under the roots, the state dir or the socket's
directory does, and no message or log line does. SSH: a recording `ssh` on PATH shows the
strict command the box forces, the real `ssh -G` shows ssh reads it that way whatever the
ssh config says, and ssh-agent stays reachable when no key is configured.
"""

from __future__ import annotations

import base64
import itertools
import logging
import os
import secrets
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http import server as http_server
from pathlib import Path

import pytest

from memsync.roots.create import init_root
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.roots.result import SyncResult
from memsync.secrets import SecretRef
from memsync.transports.credentials import CredentialServer, Origin
from memsync.transports.gitenv import clean_env
from memsync.transports.repoconfig import repo_config_problems
from memsync.transports.rootkeys import GitCredentials
from memsync.wire import SyncReport
from tests.conftest import copy_built
from tests.e2e.daemons import launcher, write_config
from tests.e2e.test_cli import memsync
from tests.helpers import commit, git, wait_for
from tests.kit import settings_for

USER = "memsync-bot"
REAL_SSH = shutil.which("ssh") or "ssh"
REAL_GIT = shutil.which("git") or "git"


# -- a smart-HTTP git server behind Basic auth -------------------------------------------------


@dataclass
class Seen:
    path: str
    authorization: str | None
    at: float = field(default_factory=time.monotonic)


@dataclass
class GitHttp:
    """`git http-backend` for the bare repositories under `root`, behind Basic auth."""

    root: Path
    token: str
    seen: list[Seen] = field(default_factory=list)
    on_authorized: Callable[[], None] | None = None  # runs while git waits for the answer
    redirect_to: str | None = None  # answer every request with a 302 to this origin
    forbidden: bool = False  # the token is right but grants no access: 403
    echo_token: bool = False  # hand the token to the upstream's hooks
    url: str = ""


def _handler(state: GitHttp) -> type[http_server.BaseHTTPRequestHandler]:
    class Handler(http_server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self._serve("GET")

        def do_POST(self) -> None:
            self._serve("POST")

        def log_message(self, *args: object) -> None:
            pass

        def _body(self) -> bytes:
            if self.headers.get("Transfer-Encoding", "").lower() != "chunked":
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))
            out = b""
            while True:
                size = int(self.rfile.readline().strip(), 16)
                if size == 0:
                    self.rfile.readline()
                    return out
                out += self.rfile.read(size)
                self.rfile.readline()

        def _answer(self, status: int, headers: dict[str, str], body: bytes = b"") -> None:
            self.send_response(status)
            for key, value in {**headers, "Content-Length": str(len(body))}.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(body)

        def _serve(self, method: str) -> None:
            body = self._body() if method == "POST" else b""
            given = self.headers.get("Authorization")
            state.seen.append(Seen(self.path, given))
            if state.redirect_to is not None:
                self._answer(302, {"Location": state.redirect_to + self.path})
                return
            basic = base64.b64encode(f"{USER}:{state.token}".encode()).decode()
            if given != f"Basic {basic}":
                self._answer(401, {"WWW-Authenticate": 'Basic realm="git"'})
                return
            if state.forbidden:
                self._answer(403, {})
                return
            if state.on_authorized is not None:
                state.on_authorized()
            path, _, query = self.path.partition("?")
            env = {
                "PATH": os.environ["PATH"],
                "GIT_PROJECT_ROOT": str(state.root),
                "GIT_HTTP_EXPORT_ALL": "1",
                "GIT_CONFIG_NOSYSTEM": "1",
                "GIT_CONFIG_GLOBAL": os.devnull,
                "PATH_INFO": path,
                "QUERY_STRING": query,
                "REQUEST_METHOD": method,
                "REMOTE_USER": USER,  # lets http-backend accept pushes
                "REMOTE_ADDR": "127.0.0.1",
                "CONTENT_TYPE": self.headers.get("Content-Type", ""),
                "CONTENT_LENGTH": str(len(body)),
            }
            if state.echo_token:  # a hook of the upstream prints it back
                env["SERVER_KNOWS_TOKEN"] = state.token
            if self.headers.get("Content-Encoding"):
                env["HTTP_CONTENT_ENCODING"] = self.headers["Content-Encoding"]
            done = subprocess.run(
                [REAL_GIT, "http-backend"], input=body, env=env, capture_output=True, check=False
            )
            head, _, payload = done.stdout.partition(b"\r\n\r\n")
            status, headers = 200, {}
            for line in head.decode("latin-1").split("\r\n"):
                key, _, value = line.partition(": ")
                if key.lower() == "status":
                    status = int(value.split()[0])
                elif key:
                    headers[key] = value
            self._answer(status, headers, payload)

    return Handler


def serve(state: GitHttp) -> Iterator[GitHttp]:
    httpd = http_server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}"
    try:
        yield state
    finally:
        httpd.shutdown()
        httpd.server_close()


@pytest.fixture
def token() -> str:
    return f"tok-{secrets.token_hex(16)}"


@pytest.fixture
def gitserver(tmp_path: Path, token: str) -> Iterator[GitHttp]:
    served = tmp_path / "served"
    served.mkdir()
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(served / "team.git"))
    yield from serve(GitHttp(served, token))


@pytest.fixture
def private_dirs(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """TMPDIR and XDG_RUNTIME_DIR of their own, to see what the box leaves in them."""
    runtime = Path(tempfile.mkdtemp(prefix="ms-run-"))  # short: socket paths are limited
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    monkeypatch.setenv("TMPDIR", str(runtime))
    yield runtime
    shutil.rmtree(runtime, ignore_errors=True)


def https_credentials(name: str, ref: SecretRef, username: str = USER) -> GitCredentials:
    return GitCredentials(where=f"roots.{name}.sync", username=username, token=ref)


@dataclass
class Pair:
    alice: Path
    bob: Path
    state: Path

    def sync(self, who: str, creds: GitCredentials | None) -> SyncResult:
        path = self.alice if who == "alice" else self.bob
        settings = settings_for(who, path, git_credentials=creds)
        return sync_root(settings, self.state / who, SyncOptions())


def make_pair(tmp_path: Path, url: str, creds: GitCredentials | None) -> Pair:
    """alice's `init` pushes the baseline over HTTPS, bob's joins it: both with the token."""
    for name in ("alice", "bob"):
        init_root(tmp_path / name, upstream=url, credentials=creds)
        git(tmp_path / name, "config", "user.name", name.title())
        git(tmp_path / name, "config", "user.email", f"{name}@example.invalid")
    return Pair(tmp_path / "alice", tmp_path / "bob", tmp_path / "state")


@pytest.fixture(scope="session")
def built_pair(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `make_pair` leaves, made once over a local upstream (`served/team.git`): each
    init over HTTPS costs about half a second of git and credential-helper processes."""
    base = tmp_path_factory.mktemp("pair")
    upstream = base / "served" / "team.git"
    git(base, "init", "-q", "--bare", "-b", "main", str(upstream))  # as `gitserver` makes it
    make_pair(base, str(upstream), None)
    return base


def copied_pair(built: Path, tmp_path: Path, server: GitHttp) -> Pair:
    """`make_pair`'s alice and bob on the server's upstream, copied from `built_pair`: the
    same repositories and refs, their origin the server's URL. For tests whose assertions
    are about the syncs after init (the inits over HTTPS are `make_pair`'s, tested above)."""
    shutil.rmtree(server.root / "team.git")
    copy_built(built / "served", server.root, ("team.git",))
    copy_built(built, tmp_path, ("alice", "bob"))
    for name in ("alice", "bob"):
        git(tmp_path / name, "remote", "set-url", "origin", f"{server.url}/team.git")
    return Pair(tmp_path / "alice", tmp_path / "bob", tmp_path / "state")


# -- HTTPS -------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["env", "file", "credential"])
def test_fetch_and_push_with_the_token(
    kind: str,
    tmp_path: Path,
    gitserver: GitHttp,
    token: str,
    private_dirs: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if kind == "env":
        monkeypatch.setenv("MEMSYNC_TEST_GIT_TOKEN", token)
        ref = SecretRef("env", "MEMSYNC_TEST_GIT_TOKEN")
    elif kind == "file":
        (tmp_path / "token").write_text(token + "\n")
        ref = SecretRef("file", str(tmp_path / "token"))
    else:  # systemd LoadCredential=git-token:...
        credentials = tmp_path / "credentials"
        credentials.mkdir()
        (credentials / "git-token").write_text(token)
        monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(credentials))
        ref = SecretRef("credential", "git-token")
    creds = https_credentials("alice", ref)
    pair = make_pair(tmp_path, f"{gitserver.url}/team.git", creds)

    commit(pair.alice, {"MEMORY_auth.md": "# Auth\n"})
    pushed = pair.sync("alice", creds)
    assert pushed.status == "pushed", pushed.message
    synced = pair.sync("bob", creds)
    assert synced.status == "synced", synced.message
    assert (pair.bob / "MEMORY_auth.md").read_text() == "# Auth\n"
    assert any(s.authorization for s in gitserver.seen if "git-receive-pack" in s.path)
    assert list(private_dirs.iterdir()) == []  # every socket directory is gone


def _scan(secret: bytes) -> tuple[list[str], list[bytes]]:
    """Every other process's command line and environment: where `secret` shows up."""
    found: list[str] = []
    commands: list[bytes] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        for part in ("cmdline", "environ"):
            try:
                data = (entry / part).read_bytes()
            except OSError:
                continue
            if secret in data:
                found.append(f"/proc/{entry.name}/{part}")
            if part == "cmdline":
                commands.append(data.replace(b"\0", b" "))
    return found, commands


def _files_holding(secret: bytes, *roots: Path) -> list[Path]:
    holding = []
    for root in roots:
        for path in root.rglob("*"):
            if path.is_file() and not path.is_symlink() and secret in path.read_bytes():
                holding.append(path)
    return holding


def test_the_token_is_on_no_command_line_in_no_environment_file_or_message(
    tmp_path: Path,
    gitserver: GitHttp,
    token: str,
    private_dirs: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.setenv("MEMSYNC_TEST_GIT_TOKEN", token)  # the daemon's own environment
    creds = https_credentials("alice", SecretRef("env", "MEMSYNC_TEST_GIT_TOKEN"))
    pair = make_pair(tmp_path, f"{gitserver.url}/team.git", creds)
    commit(pair.alice, {"MEMORY_a.md": "# A\n"})

    # Every git the box starts goes through a recorder first: its argv and environment.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "git-calls.log"
    wrapper = bin_dir / "git"
    wrapper.write_text(
        f'#!/bin/sh\nprintf \'%s\\n\' "$*" >> {record}\nenv >> {record}\nexec {REAL_GIT} "$@"\n'
    )
    wrapper.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")

    # While git waits for an authenticated answer, look at every process on the machine.
    scans: list[tuple[list[str], list[bytes]]] = []
    gitserver.on_authorized = lambda: scans.append(_scan(token.encode()))

    caplog.set_level(logging.DEBUG)
    pushed = pair.sync("alice", creds)
    synced = pair.sync("bob", creds)
    assert (pushed.status, synced.status) == ("pushed", "synced"), (pushed, synced)

    assert scans, "no authenticated request was seen"
    for found, commands in scans:
        assert found == [], f"the token is readable in {found}"
        # The scan saw the git that was authenticating: with memsync's helper on its
        # command line (the socket's path, never the token).
        helper = [c for c in commands if b"credential.helper=!" in c and b"credhelper.py" in c]
        assert helper, "the authenticating git was not among the processes scanned"
    calls = record.read_text()
    assert "fetch" in calls and "push" in calls and "MEMSYNC_TEST_GIT_TOKEN" not in calls
    assert token not in calls
    state = tmp_path / "state"
    assert _files_holding(token.encode(), pair.alice, pair.bob, state, private_dirs) == []
    assert list(private_dirs.iterdir()) == []
    for result in (pushed, synced):
        assert token not in repr(result)
    assert token not in caplog.text


def test_a_wrong_token_is_auth_failed_and_says_authentication_failed(
    tmp_path: Path, built_pair: Path, gitserver: GitHttp, token: str, private_dirs: Path
) -> None:
    right = https_credentials("alice", SecretRef("value", token))
    pair = copied_pair(built_pair, tmp_path, gitserver)
    wrong_token = f"tok-{secrets.token_hex(16)}"
    wrong = https_credentials("bob", SecretRef("value", wrong_token))

    result = pair.sync("bob", wrong)
    assert result.status == "auth-failed", result.message
    assert "authentication failed" in result.message.lower()
    assert wrong_token not in repr(result) and token not in repr(result)

    anonymous = pair.sync("bob", None)  # no credentials: git asks no one and says so
    assert anonymous.status == "auth-failed", anonymous.message
    assert "could not read username" in anonymous.message.lower()

    commit(pair.alice, {"MEMORY_a.md": "# A\n"})
    gitserver.forbidden = True  # the right token, no access (fetch, then the push: 403)
    refused = pair.sync("alice", right)
    assert refused.status == "auth-failed", refused.message
    assert "403" in refused.message


def test_sync_now_says_auth_failed_and_exits_1_and_the_daemon_backs_off(
    tmp_path: Path, built_pair: Path, gitserver: GitHttp, private_dirs: Path
) -> None:
    pair = copied_pair(built_pair, tmp_path, gitserver)
    config = write_config(tmp_path, {"bob": {"path": pair.bob, "interval": "1s"}})
    config.write_text(
        config.read_text().replace(
            "timeout: 20s}", "timeout: 20s, https: {token: {env: MEMSYNC_TEST_WRONG}}}"
        )
    )
    env = {"MEMSYNC_TEST_WRONG": f"tok-{secrets.token_hex(16)}"}
    done = memsync("--config", str(config), "sync-now", "--json", env=env)
    assert done.returncode == 1, done.stderr
    (result,) = SyncReport.model_validate_json(done.stdout).results
    assert result.status == "auth-failed", result.message

    before = len(gitserver.seen)
    with launcher(tmp_path) as start:
        daemon = start(config, env=env)

        def backs_off() -> bool:
            report = daemon.status()
            entry = next(e for e in report.daemon.schedule if e.name == "bob")
            (root,) = report.roots
            return root.status == "auth-failed" and entry.failures >= 2

        wait_for(backs_off, 30, "bob to back off after refused credentials")
        tries = [s.at for s in gitserver.seen[before:] if s.authorization and "info/refs" in s.path]
        gaps = [b - a for a, b in itertools.pairwise(tries)]
        # Each automatic try waits out the back-off (2 s, then 4 s, times [0.5, 1)), not the
        # 1 s interval: two tries with credentials are never closer than half a second.
        assert gaps and min(gaps) >= 0.5, gaps


def test_a_token_the_server_echoes_back_is_scrubbed(
    tmp_path: Path, built_pair: Path, gitserver: GitHttp, token: str
) -> None:
    """A server that prints the token back (here a hook of the upstream) finds it replaced
    in every message memsync writes, and in the journal."""
    creds = https_credentials("alice", SecretRef("value", token))
    pair = copied_pair(built_pair, tmp_path, gitserver)
    hook = gitserver.root / "team.git" / "hooks" / "pre-receive"
    hook.write_text('#!/bin/sh\necho "token was $SERVER_KNOWS_TOKEN" >&2\nexit 1\n')
    hook.chmod(0o755)
    gitserver.echo_token = True
    commit(pair.alice, {"MEMORY_a.md": "# A\n"})
    result = pair.sync("alice", creds)
    assert result.status == "offline", result.message
    assert "token was ********" in result.message
    assert token not in repr(result)
    assert _files_holding(token.encode(), pair.alice, tmp_path / "state") == []


def test_a_missing_secret_is_an_error_naming_the_reference(
    tmp_path: Path, built_pair: Path, gitserver: GitHttp, monkeypatch: pytest.MonkeyPatch
) -> None:
    pair = copied_pair(built_pair, tmp_path, gitserver)
    monkeypatch.delenv("MEMSYNC_TEST_UNSET", raising=False)
    creds = https_credentials("bob", SecretRef("env", "MEMSYNC_TEST_UNSET"))
    result = pair.sync("bob", creds)
    assert result.status == "error", result.message
    assert "roots.bob.sync.https.token" in result.message
    assert "MEMSYNC_TEST_UNSET is not set" in result.message


def test_credentials_are_read_only_when_git_talks_http(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root whose remote is a path never reads its token (it may not even exist)."""
    upstream = tmp_path / "team.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(upstream))
    monkeypatch.delenv("MEMSYNC_TEST_UNSET", raising=False)
    creds = https_credentials("alice", SecretRef("env", "MEMSYNC_TEST_UNSET"))
    init_root(tmp_path / "alice", upstream=str(upstream), credentials=creds)
    git(tmp_path / "alice", "config", "user.name", "Alice")
    git(tmp_path / "alice", "config", "user.email", "alice@example.invalid")
    commit(tmp_path / "alice", {"MEMORY_a.md": "# A\n"})
    settings = settings_for("alice", tmp_path / "alice", git_credentials=creds)
    result = sync_root(settings, tmp_path / "state", SyncOptions())
    assert result.status == "pushed", result.message


def test_the_token_never_goes_to_another_origin(
    tmp_path: Path, built_pair: Path, gitserver: GitHttp, token: str, private_dirs: Path
) -> None:
    """The upstream redirects to another origin (git follows the first redirect): that
    origin asks for credentials and memsync's helper gives it nothing."""
    creds = https_credentials("alice", SecretRef("value", token))
    pair = copied_pair(built_pair, tmp_path, gitserver)
    front = serve(GitHttp(tmp_path, token, redirect_to=gitserver.url))  # another port
    redirecting = next(front)
    try:
        git(pair.bob, "remote", "set-url", "origin", f"{redirecting.url}/team.git")
        before = len(gitserver.seen)
        result = pair.sync("bob", creds)
        assert result.status == "auth-failed", result.message  # the other origin got none
        after = gitserver.seen[before:]
        assert after, "git did not follow the redirect"
        assert all(s.authorization is None for s in after), after
        assert all(s.authorization is None for s in redirecting.seen)
        assert token not in repr(result)
    finally:
        front.close()


def test_the_roots_own_credential_helpers_never_run_beside_memsyncs(
    tmp_path: Path, built_pair: Path, gitserver: GitHttp, token: str
) -> None:
    creds = https_credentials("alice", SecretRef("value", token))
    pair = copied_pair(built_pair, tmp_path, gitserver)
    marker = tmp_path / "helper-ran"
    program = tmp_path / "their-helper"
    program.write_text(f"#!/bin/sh\necho ran >> {marker}\necho username=x\necho password=y\n")
    program.chmod(0o755)
    git(pair.bob, "config", "credential.helper", str(program))
    git(pair.bob, "config", "credential.http://127.0.0.1.helper", str(program))
    commit(pair.alice, {"MEMORY_a.md": "# A\n"})
    assert pair.sync("alice", creds).status == "pushed"
    result = pair.sync("bob", creds)
    assert result.status == "synced", result.message
    assert not marker.exists()


def test_a_token_is_never_sent_in_clear_text_to_another_host(tmp_path: Path) -> None:
    upstream = tmp_path / "team.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(upstream))
    init_root(tmp_path / "bob", upstream=str(upstream))
    git(tmp_path / "bob", "remote", "set-url", "origin", "http://git.example.invalid/team.git")
    creds = https_credentials("bob", SecretRef("value", "tok-never-sent"))
    settings = settings_for("bob", tmp_path / "bob", git_credentials=creds)
    result = sync_root(settings, tmp_path / "state", SyncOptions())
    assert result.status == "error", result.message
    assert "refusing to send the token in clear text" in result.message
    assert "tok-never-sent" not in repr(result)


# -- the credential server: who gets an answer ---------------------------------------------------

# A program git runs (an alias here; a hook, a proxy command or an alternateRefsCommand in the
# wild) inherits GIT_CONFIG_PARAMETERS, and with it memsync's helper and socket. It tries every
# way to get the token for the upstream's origin: running the helper itself, talking to the
# socket directly, or starting a git of its own that fetches with memsync's helper.
_THIEF = textwrap.dedent(
    """\
    import os, shlex, socket, subprocess, sys
    out, url, host, mode = sys.argv[1:5]
    params = shlex.split(os.environ.get("GIT_CONFIG_PARAMETERS", ""))
    helper = [p.split("=!", 1)[1] for p in params if p.startswith("credential.helper=!")]
    argv = shlex.split(helper[-1])
    request = f"protocol=http\\nhost={host}\\n\\n".encode()
    got = b""
    if mode == "helper":
        got = subprocess.run([*argv, "get"], input=request, capture_output=True).stdout
    elif mode == "socket":
        try:
            with socket.socket(socket.AF_UNIX) as s:
                s.connect(argv[-1])
                s.sendall(request)
                s.shutdown(socket.SHUT_WR)
                while chunk := s.recv(4096):
                    got += chunk
        except (ConnectionResetError, BrokenPipeError):
            pass
    else:  # a git of its own, asking memsync's helper through git's own helper chain
        done = subprocess.run(["git", "ls-remote", url], capture_output=True)
        got = done.stdout if done.returncode == 0 else b""
    open(out, "wb").write(got)
    """
)


def _registered_git(server: CredentialServer, cwd: Path, *args: str) -> int:
    """Run `git ARGS` with memsync's helper, registered with `server` as the box does."""
    env = {**clean_env(), "PATH": os.environ["PATH"]}
    argv = ["git", "-c", "credential.helper=", "-c", f"credential.helper={server.helper}", *args]
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        server.expect(proc.pid)
        proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode


def test_the_server_answers_the_registered_gits_own_helper(
    tmp_path: Path, gitserver: GitHttp, private_dirs: Path
) -> None:
    origin = Origin.of_url(gitserver.url)
    assert origin is not None
    with CredentialServer(frozenset({origin}), USER, gitserver.token) as server:
        assert oct(server.path.parent.stat().st_mode & 0o777) == "0o700"
        assert oct(server.path.stat().st_mode & 0o777) == "0o600"
        assert _registered_git(server, tmp_path, "ls-remote", f"{gitserver.url}/team.git") == 0
        assert server.served == 1
        # This process itself (not one of git's): nothing.
        with socket.socket(socket.AF_UNIX) as conn:
            conn.connect(str(server.path))
            try:
                conn.sendall(f"protocol=http\nhost={origin.host}:{origin.port}\n\n".encode())
                conn.shutdown(socket.SHUT_WR)
                assert conn.recv(4096) == b""
            except (ConnectionResetError, BrokenPipeError):
                pass  # refused before the request was read
        assert server.served == 1
        assert gitserver.token not in repr(server)
    assert list(private_dirs.iterdir()) == []


def _imports(argv: list[str]) -> set[str]:
    """The modules a Python process running `argv` (`python -I ...`) imports, as
    `-X importtime` lists them."""
    done = subprocess.run(
        [argv[0], "-X", "importtime", *argv[1:]],
        input=b"protocol=https\nhost=example.com\n\n",
        capture_output=True,
        timeout=60,
        check=False,
    )
    lines = done.stderr.decode().splitlines()
    assert done.returncode in (0, 1), lines[-3:]  # 1: the server refused this helper
    return {line.rsplit("|", 1)[1].strip() for line in lines if line.startswith("import time:")}


def test_the_helper_git_runs_per_request_imports_only_the_socket_it_needs(
    tmp_path: Path,
) -> None:
    """Git starts memsync's helper for every HTTPS request that needs the token: past a bare
    interpreter's start it imports `_socket` and nothing else (`credentials.py` as the
    helper imported ~40 ms of CPU more: threading, tempfile, dataclasses, socket...)."""
    origin = Origin.of_url("https://example.com/team.git")
    assert origin is not None
    with CredentialServer(frozenset({origin}), USER, "t0ken") as server:
        server.expect(os.getpid())  # so the server refuses the helper at once
        helper = [*server.helper_argv, "get"]
        assert helper[:2] == [sys.executable, "-I"]
        extra = _imports(helper) - _imports([sys.executable, "-I", "-c", "pass"])
        assert server.served == 0  # this process is not a git's remote helper
    assert extra <= {"_socket"}, sorted(extra)


@pytest.mark.parametrize("mode", ["helper", "socket", "git"])
def test_a_descendant_of_the_registered_git_gets_nothing(
    mode: str, tmp_path: Path, gitserver: GitHttp, private_dirs: Path
) -> None:
    origin = Origin.of_url(gitserver.url)
    assert origin is not None
    thief, out = tmp_path / "thief.py", tmp_path / "stolen"
    thief.write_text(_THIEF)
    url, host = f"{gitserver.url}/team.git", f"{origin.host}:{origin.port}"
    alias = "!" + shlex.join([sys.executable, str(thief), str(out), url, host, mode])
    with CredentialServer(frozenset({origin}), USER, gitserver.token) as server:
        _registered_git(server, tmp_path, "-c", f"alias.steal={alias}", "steal")
        assert out.exists(), "the descendant did not run"
        assert out.read_bytes() == b""
        assert server.served == 0
    assert all(seen.authorization is None for seen in gitserver.seen)


# -- a root's own config cannot redirect the token or run a thief --------------------------------


@dataclass(frozen=True)
class Hostile:
    """Config (and files) an attacker with write access to the root's `.git` adds. Values
    may name {listener} (a server that asks for credentials and records them), {upstream}
    (the real upstream's origin), {thief} (a program that tries to get the token from
    memsync's helper) and {elsewhere} (another repository). `refused` is the key (or file)
    the refusal must name; None when memsync forces the setting off and syncs."""

    config: tuple[tuple[str, str], ...]
    refused: str | None
    alternates: bool = False
    include: str | None = None  # the text of a file `include.path` names


HOSTILE = {
    "alternate-refs-command": Hostile(
        (("core.alternateRefsCommand", "{thief}"),), "core.alternaterefscommand", alternates=True
    ),
    "alternates": Hostile((), "objects/info/alternates", alternates=True),
    "proxy-and-no-tls-check": Hostile(
        (("http.proxy", "{listener}"), ("http.sslVerify", "false")), None
    ),
    "proxy-for-the-upstream": Hostile((("http.{upstream}/.proxy", "{listener}"),), ".proxy"),
    "remote-proxy": Hostile((("remote.origin.proxy", "{listener}"),), "remote.origin.proxy"),
    "tls-check-off-for-the-upstream": Hostile(
        (("http.{upstream}/.sslVerify", "false"),), ".sslverify"
    ),
    "extra-header": Hostile((("http.extraHeader", "X-Leak: 1"),), "http.extraheader"),
    "instead-of": Hostile((("url.{listener}/.insteadOf", "{upstream}/"),), ".insteadof"),
    "push-url": Hostile(
        (("remote.origin.pushurl", "{listener}/team.git"),), "remote.origin.pushurl"
    ),
    "upload-pack": Hostile((("remote.origin.uploadpack", "{thief}"),), "remote.origin.uploadpack"),
    "ssh-command": Hostile((("core.sshCommand", "{thief}"),), None),
    "include": Hostile(
        (("include.path", "{include}"),),
        "include.path",
        include='[http "{upstream}/"]\n\tproxy = {listener}\n',
    ),
    "worktree": Hostile((("core.worktree", "{elsewhere}"),), "core.worktree"),
    "credential-username": Hostile((("credential.username", "someone"),), "credential.username"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_a_roots_config_never_sends_the_token_elsewhere_or_runs_a_program(
    name: str, tmp_path: Path, built_pair: Path, gitserver: GitHttp, token: str, private_dirs: Path
) -> None:
    hostile = HOSTILE[name]
    creds = https_credentials("alice", SecretRef("value", token))
    pair = copied_pair(built_pair, tmp_path, gitserver)
    commit(pair.alice, {"MEMORY_a.md": "# A\n"})
    assert pair.sync("alice", creds).status == "pushed"
    commit(pair.bob, {"MEMORY_b.md": "# B\n"})  # bob fetches, then pushes

    front = serve(GitHttp(tmp_path / "nothing-here", token))  # asks for credentials
    listener = next(front)
    try:
        origin = Origin.of_url(gitserver.url)
        assert origin is not None
        thief, stolen = tmp_path / "thief.py", tmp_path / "stolen"
        thief.write_text(_THIEF)
        upstream_url = f"{gitserver.url}/team.git"
        host = f"{origin.host}:{origin.port}"
        words = {
            "listener": listener.url,
            "upstream": gitserver.url,
            "thief": shlex.join(
                [sys.executable, str(thief), str(stolen), upstream_url, host, "helper"]
            ),
            "elsewhere": str(pair.alice),
            "include": str(tmp_path / "included.config"),
        }
        if hostile.include is not None:
            (tmp_path / "included.config").write_text(hostile.include.format(**words))
        if hostile.alternates:
            alternates = pair.bob / ".git" / "objects" / "info" / "alternates"
            alternates.write_text(f"{pair.alice / '.git' / 'objects'}\n")
        for key, value in hostile.config:
            git(pair.bob, "config", key.format(**words), value.format(**words))

        result = pair.sync("bob", creds)

        assert all(seen.authorization is None for seen in listener.seen), listener.seen
        assert not stolen.exists(), "a program the root's config names ran"
        assert token not in repr(result)
        if hostile.refused is None:  # forced off: the root syncs as if it were not there
            assert result.status == "pushed", result.message
            assert listener.seen == []
            return
        assert result.status == "error", result.message
        assert hostile.refused in result.message, result.message
        assert {p.code for p in result.problems} == {"unsafe-repo-config"}
        assert any(hostile.refused in p.message for p in result.problems)
        assert listener.url not in result.message.replace(f"url.{listener.url}", "")
        assert "git" in result.message and (
            "--unset-all" in result.message or "rm" in result.message
        )
        assert listener.seen == []
        assert "MEMORY_b.md" not in git(
            gitserver.root / "team.git", "ls-tree", "--name-only", "main"
        )
        reported = repo_config_problems(pair.bob)
        assert any(hostile.refused in p.message for p in reported)
    finally:
        front.close()


# -- SSH ---------------------------------------------------------------------------------------


@pytest.fixture
def ssh_recorder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An `ssh` on PATH that records its argv (one per line), SSH_AUTH_SOCK and what the
    agent holds, then fails like an unreachable host."""
    bin_dir = tmp_path / "ssh-bin"
    bin_dir.mkdir()
    log = tmp_path / "ssh.log"
    program = bin_dir / "ssh"
    program.write_text(
        "#!/bin/sh\n"
        f'for arg in "$@"; do printf \'arg %s\\n\' "$arg"; done >> {log}\n'
        f"printf 'agent %s\\n' \"${{SSH_AUTH_SOCK:-none}}\" >> {log}\n"
        f"ssh-add -l 2>&1 | sed 's/^/holds /' >> {log}\n"
        "echo 'ssh: connect to host 127.0.0.1 port 9: Connection refused' >&2\n"
        "exit 255\n"
    )
    program.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    return log


def _ssh_root(tmp_path: Path) -> Path:
    upstream = tmp_path / "team.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(upstream))
    init_root(tmp_path / "bob", upstream=str(upstream))
    git(tmp_path / "bob", "remote", "set-url", "origin", "ssh://git@127.0.0.1:9/team.git")
    return tmp_path / "bob"


def _recorded(log: Path, prefix: str) -> list[str]:
    return [line[len(prefix) :] for line in log.read_text().splitlines() if line.startswith(prefix)]


def _sync_over_ssh(root: Path, state: Path, creds: GitCredentials | None) -> SyncResult:
    settings = settings_for("bob", root, git_credentials=creds)
    return sync_root(settings, state, SyncOptions())


@pytest.mark.parametrize("kind", ["file", "credential"])
def test_ssh_with_a_key_is_strict_whatever_the_ssh_config_says(
    kind: str, tmp_path: Path, ssh_recorder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _ssh_root(tmp_path)
    keys = tmp_path / "keys"
    keys.mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(keys / "deploy-key")], check=True
    )
    known_hosts = tmp_path / "known_hosts"
    known_hosts.write_text("")  # no entry for the upstream: strict checking must refuse it
    if kind == "file":
        ref = SecretRef("file", str(keys / "deploy-key"))
    else:
        monkeypatch.setenv("CREDENTIALS_DIRECTORY", str(keys))
        ref = SecretRef("credential", "deploy-key")
    creds = GitCredentials("roots.bob.sync", ssh=True, ssh_key=ref, known_hosts=known_hosts)

    result = _sync_over_ssh(root, tmp_path / "state", creds)
    assert result.status == "offline", result.message
    assert "Connection refused" in result.message
    argv = _recorded(ssh_recorder, "arg ")
    ours = [
        "-o", "BatchMode=yes",
        "-o", "IdentitiesOnly=yes",
        "-i", str(keys / "deploy-key"),
        "-o", f"UserKnownHostsFile={known_hosts}",
        "-o", "StrictHostKeyChecking=yes",
    ]  # fmt: skip
    assert argv[: len(ours)] == ours
    assert "git@127.0.0.1" in argv[len(ours) :]

    # The real ssh reads those options as meant, even under a config that says otherwise.
    hostile = tmp_path / "ssh_config"
    hostile.write_text(
        "Host *\n  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n"
        "  IdentitiesOnly no\n  BatchMode no\n"
    )
    shown = subprocess.run(
        [REAL_SSH, "-G", "-F", str(hostile), *ours, "-p", "9", "git@127.0.0.1"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert "stricthostkeychecking true" in shown
    assert f"userknownhostsfile {known_hosts}" in shown
    assert "identitiesonly yes" in shown
    assert "batchmode yes" in shown
    assert f"identityfile {keys / 'deploy-key'}" in shown


def test_ssh_agent_still_works_when_no_key_is_configured(
    tmp_path: Path, ssh_recorder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _ssh_root(tmp_path)
    short = Path(tempfile.mkdtemp(prefix="ms-agent-"))
    sock = short / "agent.sock"
    agent = subprocess.Popen(
        ["ssh-agent", "-D", "-a", str(sock)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(sock.exists, what="ssh-agent's socket")
        subprocess.run(
            [
                "ssh-keygen",
                "-q",
                "-t",
                "ed25519",
                "-N",
                "",
                "-C",
                "laptop-key",
                "-f",
                str(short / "k"),
            ],
            check=True,
        )
        env = {**os.environ, "SSH_AUTH_SOCK": str(sock)}
        subprocess.run(
            ["ssh-add", "-q", str(short / "k")], env=env, check=True, capture_output=True
        )
        monkeypatch.setenv("SSH_AUTH_SOCK", str(sock))
        known_hosts = tmp_path / "known_hosts"
        known_hosts.write_text("")
        creds = GitCredentials("roots.bob.sync", ssh=True, known_hosts=known_hosts)

        result = _sync_over_ssh(root, tmp_path / "state", creds)
        assert result.status == "offline", result.message
        argv = _recorded(ssh_recorder, "arg ")
        assert "-i" not in argv and "IdentitiesOnly=yes" not in argv
        assert argv[:6] == [
            "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={known_hosts}",
            "-o", "StrictHostKeyChecking=yes",
        ]  # fmt: skip
        assert _recorded(ssh_recorder, "agent ") == [str(sock)]
        assert any("laptop-key" in line for line in _recorded(ssh_recorder, "holds "))
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=10)
        shutil.rmtree(short, ignore_errors=True)


def test_without_ssh_settings_the_command_is_unchanged(tmp_path: Path, ssh_recorder: Path) -> None:
    root = _ssh_root(tmp_path)
    result = _sync_over_ssh(root, tmp_path / "state", None)
    assert result.status == "offline", result.message
    argv = _recorded(ssh_recorder, "arg ")
    assert argv[:2] == ["-o", "BatchMode=yes"]
    assert "StrictHostKeyChecking=yes" not in argv and "-i" not in argv


def test_a_missing_key_or_known_hosts_file_is_an_error_naming_it(
    tmp_path: Path, ssh_recorder: Path
) -> None:
    root = _ssh_root(tmp_path)
    missing_key = GitCredentials(
        "roots.bob.sync", ssh=True, ssh_key=SecretRef("file", str(tmp_path / "no-key"))
    )
    result = _sync_over_ssh(root, tmp_path / "state", missing_key)
    assert result.status == "error", result.message
    assert "roots.bob.sync.ssh.key" in result.message and "no-key" in result.message
    missing_hosts = GitCredentials("roots.bob.sync", ssh=True, known_hosts=tmp_path / "nothing")
    result = _sync_over_ssh(root, tmp_path / "state", missing_hosts)
    assert result.status == "error", result.message
    assert "roots.bob.sync.ssh.known_hosts" in result.message
    assert not ssh_recorder.exists()  # ssh never started
