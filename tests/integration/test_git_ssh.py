"""A real `sshd` on loopback: what the real `ssh` says when the upstream's host key changed
or the key is refused, and what memsync makes of it (`host-key-changed` with the offered
fingerprint, `auth-failed`), in process and in the daemon (a changed host key is not tried
again until known_hosts changes).

Skips when the machine has no `sshd` (Debian: `openssh-server`).
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from memsync.roots.create import init_root
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.roots.result import SyncResult
from memsync.secrets import SecretRef
from memsync.transports.rootkeys import GitCredentials
from memsync.wire.cli import DoctorReport
from tests.e2e.daemons import launcher, write_config
from tests.e2e.test_cli import memsync
from tests.helpers import commit, git, wait_for
from tests.kit import settings_for

SSHD = shutil.which("sshd", path=f"/usr/sbin:/usr/local/sbin:{os.environ.get('PATH', '')}")


def keygen(path: Path) -> Path:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path


def fingerprint(public: Path) -> str:
    out = subprocess.run(
        ["ssh-keygen", "-l", "-E", "sha256", "-f", str(public)],
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()[1]


@dataclass
class Sshd:
    port: int
    host_key: Path
    client_key: Path
    log: Path
    dir: Path

    def known_hosts(self, key: Path) -> Path:
        """A known_hosts file pinning `key` (a host key) for this server."""
        path = self.dir / f"known_hosts-{key.name}"
        kind, body = key.with_suffix(".pub").read_text().split()[:2]
        path.write_text(f"[127.0.0.1]:{self.port} {kind} {body}\n")
        return path

    def connections(self) -> int:
        return self.log.read_text().count("Connection from 127.0.0.1")

    def url(self, repo: Path) -> str:
        return f"ssh://{getpass.getuser()}@127.0.0.1:{self.port}{repo}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[Sshd]:
    if SSHD is None:
        pytest.skip("no sshd on this machine (Debian: apt-get install openssh-server)")
    privsep = Path("/run/sshd")  # sshd's privilege separation directory
    if os.geteuid() == 0:
        privsep.mkdir(mode=0o755, exist_ok=True)
    elif not privsep.is_dir():
        pytest.skip("sshd needs /run/sshd, which only root can create")
    home = tmp_path / "sshd"
    home.mkdir()
    host_key, client_key = keygen(home / "host"), keygen(home / "client")
    (home / "authorized_keys").write_text(client_key.with_suffix(".pub").read_text())
    port = _free_port()
    config = home / "sshd_config"
    config.write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\n"
        f"AuthorizedKeysFile {home / 'authorized_keys'}\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nStrictModes no\nUsePAM no\nPidFile none\n"
        "PermitRootLogin prohibit-password\nLogLevel VERBOSE\n"
    )
    log = home / "sshd.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(config)], stdout=out, stderr=subprocess.STDOUT
        )
    try:

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
            except OSError:
                return proc.poll() is not None  # died: the assertion below says so
            return True

        wait_for(listening, 10, "sshd to listen")
        assert proc.poll() is None, log.read_text()
        yield Sshd(port, host_key, client_key, log, home)
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _creds(key: Path, known_hosts: Path) -> GitCredentials:
    return GitCredentials(
        where="roots.bob.sync",
        ssh=True,
        ssh_key=SecretRef("file", str(key)),
        known_hosts=known_hosts,
    )


def _bob(tmp_path: Path, sshd: Sshd) -> Path:
    """A bare upstream with alice's baseline, and bob's root joined to it over ssh."""
    upstream = tmp_path / "team.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(upstream))
    init_root(tmp_path / "alice", upstream=str(upstream))
    bob = tmp_path / "bob"
    init_root(bob, upstream=str(upstream))
    git(bob, "remote", "set-url", "origin", sshd.url(upstream))
    return bob


def _sync(root: Path, state: Path, creds: GitCredentials) -> SyncResult:
    return sync_root(settings_for("bob", root, git_credentials=creds), state, SyncOptions())


def test_the_right_host_key_and_client_key_sync(tmp_path: Path, sshd: Sshd) -> None:
    bob = _bob(tmp_path, sshd)
    done = _sync(bob, tmp_path / "state", _creds(sshd.client_key, sshd.known_hosts(sshd.host_key)))
    assert done.status in ("current", "synced"), done.message


def test_a_changed_host_key_is_host_key_changed_with_the_offered_fingerprint(
    tmp_path: Path, sshd: Sshd
) -> None:
    bob = _bob(tmp_path, sshd)
    pinned = sshd.known_hosts(keygen(tmp_path / "the-key-we-pinned"))
    commit(bob, {"MEMORY_b.md": "# B\n"})  # a push too would fail the same way
    done = _sync(bob, tmp_path / "state", _creds(sshd.client_key, pinned))
    assert done.status == "host-key-changed", done.message
    offered = fingerprint(sshd.host_key.with_suffix(".pub"))
    assert f"it offered ED25519 {offered}" in done.message
    assert "has changed and you have requested strict checking" in done.message


def test_a_refused_client_key_is_auth_failed(tmp_path: Path, sshd: Sshd) -> None:
    bob = _bob(tmp_path, sshd)
    stranger = keygen(tmp_path / "stranger")
    done = _sync(bob, tmp_path / "state", _creds(stranger, sshd.known_hosts(sshd.host_key)))
    assert done.status == "auth-failed", done.message
    assert "Permission denied (publickey)" in done.message


def test_the_daemon_waits_for_known_hosts_to_change_after_a_changed_host_key(
    tmp_path: Path, sshd: Sshd
) -> None:
    bob = _bob(tmp_path, sshd)
    known = sshd.dir / "known_hosts"
    known.write_text(sshd.known_hosts(keygen(tmp_path / "old-host")).read_text())
    config = write_config(tmp_path, {"bob": {"path": bob, "interval": "1s"}})
    text = config.read_text().replace(
        "timeout: 20s}",
        f"timeout: 20s, ssh: {{key: {{file: {sshd.client_key}}}, known_hosts: {known}}}}}",
    )
    config.write_text(text)
    done = memsync("--config", str(config), "doctor", "--json")
    checks = DoctorReport.model_validate_json(done.stdout).checks
    check = next(c for c in checks if c.name == "roots.bob.upstream")
    assert check.status == "fail" and "known_hosts" in (check.hint or ""), check
    assert fingerprint(sshd.host_key.with_suffix(".pub")) in check.message
    with launcher(tmp_path) as start:
        daemon = start(config)

        def bob_status() -> str:
            return next(r.status for r in daemon.status().roots if r.root == "bob")

        wait_for(lambda: bob_status() == "host-key-changed", 30, "host-key-changed")
        tried = sshd.connections()
        ticks: set[str] = set()

        def ticked() -> bool:  # the 1 s timer fired several times since
            entry = next(e for e in daemon.status().daemon.schedule if e.name == "bob")
            assert entry.held, entry
            ticks.add(entry.next_run_at or "")
            return len(ticks) >= 5

        wait_for(ticked, 30, "five timer ticks")
        assert sshd.connections() == tried, "a changed host key was tried again"
        # The operator checks the key and pins it: the next tick syncs, nobody asks.
        known.write_text(sshd.known_hosts(sshd.host_key).read_text())
        wait_for(lambda: bob_status() in ("current", "synced"), 30, "bob to sync again")
        assert sshd.connections() > tried
        assert not next(e for e in daemon.status().daemon.schedule if e.name == "bob").held
