"""How the git box authenticates a root to its upstream, without the secret leaving memory.

A root names its credentials by reference (`rootkeys.GitCredentials`): an HTTPS username and token,
an SSH key file and a `known_hosts` file. The box reads them at each network call (a rotated
token file or systemd credential is picked up on the next fetch) and hands them to git so
that the token is never on a command line (`/proc/*/cmdline` is world-readable), never in a
file (a socket holds no data), and never in any process's environment (inherited by every
child, dumped by crash reporters and `env`):

- **HTTPS.** For the length of one git call the box serves the username and token on a unix
  socket in a fresh 0700 directory (`CredentialServer`), and tells git, after resetting
  every other helper, to use memsync's own credential helper: `credhelper.py`, run as a
  script by the same Python in isolated mode (`-I`: no current directory, no `PYTHON*`
  variables, no user site on its path; it imports only `_socket` and `sys`). Git starts the
  helper for `get`; the helper relays git's request (protocol, host) over the socket and
  prints the answer. The server answers only this helper as git itself starts it for the one call
  the server was made for: the peer (SO_PEERCRED: this user) runs this helper with this
  socket, its parent is git's HTTP remote helper (through git's `sh -c` at most), whose
  parent is `git remote-http(s)`, whose parent is exactly the git process the box started
  and registered (`expect`); and only the first remote helper that asks. Any other
  descendant of that git (a program a config or an upstream made it run, or a git that
  program started) gets nothing. It answers only for the upstream's own scheme, host and
  port: a redirect to another origin gets nothing; plain `http://` gets the token only on
  loopback, and the box forces TLS verification on and proxies off for every call. `store`
  and `erase` are ignored (nothing is ever written anywhere).
- **SSH.** `core.sshCommand` becomes `ssh -o BatchMode=yes -o IdentitiesOnly=yes -i KEY -o
  UserKnownHostsFile=FILE -o StrictHostKeyChecking=yes` (each part as configured). The key
  stays a file (`{file: PATH}` or `{credential: NAME}`: systemd's `LoadCredential`); ssh
  reads it, memsync never does. Without a key, ssh-agent works as usual (`SSH_AUTH_SOCK`
  is kept by the box). Paths are limited to characters that neither the shell git runs the
  command with nor ssh's own `%`, `$`, `~` and whitespace expansion can read differently.
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import shlex
import socket
import struct
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from memsync.transports import credhelper

if TYPE_CHECKING:
    from collections.abc import Mapping

    from memsync.secrets import SecretRef

HELPER_SCRIPT = Path(credhelper.__file__).resolve()
DEFAULT_USERNAME = "x-access-token"  # GitHub's word for "the token says who"; others accept any

_PEER_TIMEOUT = credhelper.PEER_TIMEOUT  # seconds one helper connection may take
_REMOTE_HELPERS = frozenset({"git-remote-http", "git-remote-https"})
_SAFE_PATH = re.compile(r"/[A-Za-z0-9._/+,:@-]*")
_LOOPBACK = frozenset({"127.0.0.1", "::1", "localhost"})
_DEFAULT_PORTS = {"http": 80, "https": 443}


# -- what a root authenticates with (`rootkeys.GitCredentials` names it) -----------------------


def check_ssh_path(path: str) -> str:
    """`path` when ssh and the shell read it as written; else ValueError saying why."""
    if not _SAFE_PATH.fullmatch(path):
        raise ValueError(
            "an SSH key or known_hosts path must be absolute and hold only letters, digits "
            "and ._/+,:@- (ssh expands %, $ and ~ and splits on spaces); "
            "move or link the file to such a path"
        )
    return path


def key_path(ref: SecretRef, environ: Mapping[str, str]) -> Path:
    """The file an SSH key reference names ({file: PATH} or {credential: NAME}).

    Raises ValueError naming the reference (a key is a file; its bytes are never read here).
    """
    if ref.kind == "file":
        return Path(check_ssh_path(ref.ref))
    if ref.kind == "credential":
        directory = environ.get("CREDENTIALS_DIRECTORY", "")
        if not directory:
            raise ValueError(
                f"systemd credential {ref.ref}: $CREDENTIALS_DIRECTORY is not set "
                f"(add LoadCredential={ref.ref}:PATH to the unit, or use {{file: PATH}})"
            )
        return Path(check_ssh_path(str(Path(directory) / ref.ref)))
    raise ValueError("an SSH key is a file: use {file: PATH} or {credential: NAME}")


def ssh_command(key: Path | None, known_hosts: Path | None) -> str:
    """The `core.sshCommand` for strict host checking with an optional key and hosts file."""
    parts = ["ssh", "-o", "BatchMode=yes"]
    if key is not None:
        parts += ["-o", "IdentitiesOnly=yes", "-i", check_ssh_path(str(key))]
    if known_hosts is not None:
        parts += ["-o", f"UserKnownHostsFile={check_ssh_path(str(known_hosts))}"]
    parts += ["-o", "StrictHostKeyChecking=yes"]
    return " ".join(shlex.quote(part) for part in parts)


# -- origins -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Origin:
    """Scheme, host and port: what a token is bound to."""

    scheme: str
    host: str
    port: int

    @classmethod
    def of_url(cls, url: str) -> Origin | None:
        """The origin of an http(s) URL; None for any other kind of location."""
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError:
            return None
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname:
            return None
        return cls(scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme])

    @classmethod
    def of_request(cls, fields: Mapping[str, str]) -> Origin | None:
        """The origin git asks a credential for (`protocol=` and `host=host[:port]`)."""
        protocol, host = fields.get("protocol", ""), fields.get("host", "")
        if not protocol or not host or "/" in host or "@" in host:
            return None
        return cls.of_url(f"{protocol}://{host}/")

    @property
    def plain_remote(self) -> bool:
        """Plain http:// to a host that is not this machine: a token would cross in clear."""
        return self.scheme == "http" and self.host not in _LOOPBACK

    def __str__(self) -> str:
        return f"{self.scheme}://{self.host}:{self.port}"


# -- the server: memsync's side of the helper --------------------------------------------------


class CredentialServer:
    """Serves one username and token to memsync's credential helper during one git call.

    `with CredentialServer(origins, username, token) as server:` binds a socket in a new
    0700 directory and answers on a thread until the block ends; then the socket and its
    directory are gone. `server.helper` is the `credential.helper` value naming it.
    """

    def __init__(self, origins: frozenset[Origin], username: str, token: str) -> None:
        self._origins = origins
        self._answer = f"username={username}\npassword={token}\n".encode()
        self._directory: Path | None = None
        self._listener: socket.socket | None = None
        self._wake_r, self._wake_w = -1, -1
        self._thread: threading.Thread | None = None
        self._git: int | None = None  # the git process this call started (`expect`)
        self._registered = threading.Event()
        self._remote_helper: int | None = None  # the first remote helper that asked
        self.served = 0  # answers given (for tests and debugging; never the answer)

    def __repr__(self) -> str:
        return f"CredentialServer(origins={sorted(map(str, self._origins))})"

    @property
    def path(self) -> Path:
        if self._directory is None:
            raise RuntimeError("the credential server is not running")
        return self._directory / "s"

    @property
    def helper_argv(self) -> list[str]:
        return [sys.executable, "-I", str(HELPER_SCRIPT), str(self.path)]

    @property
    def helper(self) -> str:
        """`!python -I helper.py SOCKET`: git appends the operation (get, store, erase)."""
        return "!" + shlex.join(self.helper_argv)

    def expect(self, pid: int) -> None:
        """The git process this call started: only its own HTTP helper gets an answer."""
        self._git = pid
        self._registered.set()

    def __enter__(self) -> CredentialServer:
        self._directory = Path(tempfile.mkdtemp(prefix="memsync-cred-", dir=_socket_parent()))
        try:
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._listener = listener
            listener.bind(str(self.path))
            self.path.chmod(0o600)
            listener.listen(4)
            self._wake_r, self._wake_w = os.pipe()
            self._thread = threading.Thread(
                target=self._serve,
                args=(listener, self._wake_r),
                name="git-credentials",
                daemon=True,
            )
            self._thread.start()
        except BaseException:
            self._close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._close()

    def _close(self) -> None:
        self._registered.set()  # a connection still waiting for `expect` gives up now
        if self._wake_w >= 0:
            os.write(self._wake_w, b"x")
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        for fd in (self._wake_r, self._wake_w):
            if fd >= 0:
                os.close(fd)
        self._wake_r = self._wake_w = -1
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._directory is not None:
            self.path.unlink(missing_ok=True)
            self._directory.rmdir()
            self._directory = None

    def _serve(self, listener: socket.socket, wake: int) -> None:
        poller = select.poll()  # not select(): a daemon may hold more than 1024 descriptors
        poller.register(listener, select.POLLIN)
        poller.register(wake, select.POLLIN)
        while True:
            if any(fd == wake for fd, _ in poller.poll()):
                return
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn, contextlib.suppress(OSError):  # a helper gone: git says what it missed
                self._answer_one(conn)

    def _answer_one(self, conn: socket.socket) -> None:
        conn.settimeout(_PEER_TIMEOUT)
        if not self._registered.wait(_PEER_TIMEOUT) or self._git is None:
            return
        remote_helper = _gits_own_helper(conn, self._git, self.helper_argv)
        if remote_helper is None:
            return
        if self._remote_helper is None:
            self._remote_helper = remote_helper  # one git call talks through one helper
        elif remote_helper != self._remote_helper:
            return
        request = credhelper.read_all(conn)
        fields = parse_request(request)
        origin = Origin.of_request(fields)
        if origin is None or origin not in self._origins:
            return
        conn.sendall(self._answer)
        self.served += 1


def _socket_parent() -> str:
    """Where the socket's 0700 directory goes: short (socket paths are limited to ~107
    bytes) and private to this user when possible."""
    runtime = Path(os.environ.get("XDG_RUNTIME_DIR") or "relative")
    if runtime.is_absolute() and len(str(runtime)) < 60 and runtime.is_dir():
        return str(runtime)
    temp = tempfile.gettempdir()
    return temp if len(temp) < 60 else "/tmp"  # noqa: S108 - mkdtemp makes a 0700 directory


def _gits_own_helper(conn: socket.socket, git: int, helper: list[str]) -> int | None:
    """The pid of git's HTTP remote helper when the peer is this credential helper as git
    itself runs it for the git process `git`; None for anyone else.

    git runs `git remote-http(s)` (the git binary), which runs `git-remote-http(s)`, which
    runs the helper (through `sh -c 'HELPER get' 'HELPER get'` unless the shell execs it).
    A program any of them starts, or a git that program starts, has another chain.
    """
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    pid, uid, _gid = struct.unpack("3i", creds)
    if uid != os.geteuid() or pid <= 0 or _cmdline(pid) != [*helper, "get"]:
        return None
    parent = _parent_of(pid)
    line = f"{shlex.join(helper)} get"
    if parent is not None and _is_shell_running(parent, line):
        parent = _parent_of(parent)
    if parent is None or _exe_name(parent) not in _REMOTE_HELPERS:
        return None
    dispatcher = _parent_of(parent)
    if dispatcher is None or _exe_name(dispatcher) != "git":
        return None
    argv = _cmdline(dispatcher)
    if len(argv) < 2 or argv[1] not in ("remote-http", "remote-https"):
        return None
    return parent if _parent_of(dispatcher) == git else None


def _is_shell_running(pid: int, line: str) -> bool:
    argv = _cmdline(pid)
    return len(argv) == 4 and Path(argv[0]).name == "sh" and argv[1:] == ["-c", line, line]


def _cmdline(pid: int) -> list[str]:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0")[:-1]]


def _exe_name(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/exe").readlink().name
    except OSError:
        return None


def _parent_of(pid: int) -> int | None:
    try:
        with Path(f"/proc/{pid}/status").open(encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("PPid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def parse_request(raw: bytes) -> dict[str, str]:
    """git's credential request: `key=value` lines up to a blank line (last value wins)."""
    fields: dict[str, str] = {}
    for line in raw.decode("utf-8", "replace").split("\n"):
        if not line:
            break
        key, sep, value = line.partition("=")
        if sep:
            fields[key] = value
    return fields
