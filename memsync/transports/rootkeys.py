"""What a root authenticates and signs with, by reference (nothing here is a secret).

`GitCredentials`: the HTTPS username and token, SSH key and `known_hosts` its upstream is
reached with (served to git by `credentials`, put into git's config by `gitenv`).
`CommitKey`: the key every commit memsync makes in it is signed with (`commitsign`).
Records only, so that the settings (`config.model`, the settings memo) carry them without
loading the credential server or the signer: a command that neither reaches an upstream
with credentials nor signs never loads either.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from memsync.values import value

if TYPE_CHECKING:
    from memsync.secrets import SecretRef


@value
class GitCredentials:
    """A root's upstream credentials, by reference (nothing here is a secret).

    `where` names the config location for messages (`roots.personal.sync`). `ssh` is true
    when the root configures SSH at all: then host keys are checked strictly.
    """

    where: str
    username: str | None = None
    token: SecretRef | None = None
    ssh: bool = False
    ssh_key: SecretRef | None = None  # {file: PATH} or {credential: NAME}
    known_hosts: Path | None = None


@value
class CommitKey:
    """A root's commit-signing key: `where` it is configured (`roots.<name>.signing.key`)
    and the reference to the private key (resolved at each signature)."""

    where: str
    key: SecretRef

    def describe(self) -> str:
        return f"{self.where} ({self.key.describe()})"
