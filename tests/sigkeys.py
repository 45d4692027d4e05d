"""Real SSH keys and SSH-signed commits for tests, made the way users make them.

`ssh-keygen` makes the keys and `git -c gpg.format=ssh -c user.signingkey=… commit -S`
signs; only tests run either (memsync verifies in process and never runs a signer).
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

from tests.helpers import git, stage


@dataclass(frozen=True)
class Key:
    private: Path
    public: str  # the .pub file's one line, "ssh-ed25519 AAAA… comment"

    @property
    def pub_path(self) -> Path:
        return self.private.with_name(self.private.name + ".pub")


def make_key(directory: Path, name: str, key_type: str = "ed25519") -> Key:
    directory.mkdir(parents=True, exist_ok=True)
    private = directory / name
    args = ["-t", key_type, *(["-b", "2048"] if key_type == "rsa" else [])]
    subprocess.run(
        ["ssh-keygen", "-q", *args, "-N", "", "-C", f"{name}@test", "-f", str(private)],
        check=True,
        capture_output=True,
    )
    return Key(private, private.with_name(name + ".pub").read_text().strip())


def sign_flags(key: Key | None) -> list[str]:
    """git's own options for signing a commit with `key` (none: unsigned)."""
    if key is None:
        return ["-c", "commit.gpgsign=false"]
    return [
        "-c",
        "gpg.format=ssh",
        "-c",
        f"user.signingkey={key.private}",
        "-c",
        "commit.gpgsign=true",
    ]


def signed_commit(
    root: Path, files: dict[str, bytes | str | None], key: Key | None, message: str = "edit"
) -> str:
    """Write, stage and commit `files` in `root`, signed by `key` (None: unsigned)."""
    stage(root, files)
    git(root, *sign_flags(key), "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD")


def raw_commit(root: Path, rev: str = "HEAD") -> bytes:
    done = subprocess.run(
        ["git", "cat-file", "commit", rev], cwd=root, capture_output=True, check=True
    )
    return done.stdout
