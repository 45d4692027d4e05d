"""What a person reads when the upstream is unreachable: the real cause, and no credential.

Through the CLI as a subprocess: `sync-now` (text and `--json`), the state file and
`status --json` all carry the message, so each is checked.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.wire import StatusReport, SyncReport
from tests.conftest import Team
from tests.e2e.test_cli import memsync, write_config
from tests.helpers import git

SECRET = "s3cr3t-T0KEN-value"


@pytest.mark.parametrize(
    "url",
    [
        f"http://127.0.0.1:9/team.git?access_token={SECRET}",
        f"https://bob:{SECRET}@127.0.0.1:9/team.git",
        f"http://127.0.0.1:9/team.git#{SECRET}",
        f"ssh://git:{SECRET}@127.0.0.1:9/team.git",
    ],
    ids=["query", "password", "fragment", "ssh-password"],
)
def test_credentials_in_a_remote_url_never_reach_any_output(
    team: Team, tmp_path: Path, url: str
) -> None:
    config = write_config(team, tmp_path, ("bob",))
    git(team.bob.path, "config", "remote.origin.url", url)
    outputs: list[str] = []
    done = memsync("--config", str(config), "sync-now", "--json")
    assert done.returncode == 1
    outputs += [done.stdout, done.stderr]
    result = SyncReport.model_validate_json(done.stdout).results[0]
    assert result.status == "offline"
    # The cause, not git's boilerplate ("...and the repository exists.").
    assert "connect" in result.message.lower() or "resolve" in result.message.lower()
    plain = memsync("--config", str(config), "--debug", "sync-now")
    outputs += [plain.stdout, plain.stderr]
    status = memsync("--config", str(config), "status", "--json")
    outputs += [status.stdout, status.stderr]
    StatusReport.model_validate_json(status.stdout)
    outputs += [p.read_text() for p in (tmp_path / "state").rglob("*") if p.is_file()]
    for text in outputs:
        assert SECRET not in text


@pytest.mark.parametrize(
    ("url", "cause"),
    [
        ("ssh://nobody@127.0.0.1:9/team.git", "connection refused"),
        ("git://127.0.0.1:9/team.git", "connection refused"),
        ("ssh://nobody@host.invalid/team.git", "could not resolve hostname"),
        ("git://host.invalid/team.git", "unable to look up"),
    ],
    ids=["ssh-refused", "git-refused", "ssh-unknown-host", "git-unknown-host"],
)
def test_offline_messages_keep_the_cause(team: Team, tmp_path: Path, url: str, cause: str) -> None:
    config = write_config(team, tmp_path, ("bob",))
    git(team.bob.path, "config", "remote.origin.url", url)
    done = memsync("--config", str(config), "sync-now", "--json")
    result = SyncReport.model_validate_json(done.stdout).results[0]
    assert result.status == "offline"
    assert cause in result.message.lower(), result.message
    assert "repository exists" not in result.message
