"""Signed admission through the CLI as a subprocess: the YAML, the settings memo a second
process reads instead of the schema, the verdict, the exit code and `status --json`."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import Team
from tests.e2e.test_cli import memsync
from tests.helpers import git, push
from tests.sigkeys import make_key, signed_commit


def test_sync_now_refuses_an_unsigned_commit_and_status_names_the_anchor(
    team: Team, tmp_path: Path
) -> None:
    alice = make_key(tmp_path / "keys", "alice")
    mallory = make_key(tmp_path / "keys", "mallory")
    listed = tmp_path / "team-signers.pub"
    listed.write_text(f"# the team\n{alice.public}\n")
    config = tmp_path / "config.yaml"
    config.write_text(
        f"version: 1\nstate_dir: {tmp_path / 'state'}\nroots:\n"
        f"  bob:\n    path: {team.bob.path}\n    watch: false\n"
        f'    admission:\n      require: signed\n      signers: ["{mallory.public}", '
        f"{{file: {listed}}}]\n"
    )
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_RUNTIME_DIR": str(tmp_path)}
    tip = signed_commit(team.alice.path, {"MEMORY_a.md": "# A\n"}, alice, "signed")
    push(team.alice.path)
    done = memsync("--config", str(config), "sync-now", "--json", env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["results"][0]["status"] == "synced"
    assert git(team.bob.path, "rev-parse", "HEAD") == tip

    unsigned = signed_commit(team.alice.path, {"MEMORY_b.md": "# B\n"}, None, "unsigned")
    push(team.alice.path)
    for _ in range(2):  # the second process reads the settings memo the first one left
        done = memsync("--config", str(config), "sync-now", "--json", env=env)
        assert done.returncode == 1, done.stdout + done.stderr
        result = json.loads(done.stdout)["results"][0]
        assert result["status"] == "rejected"
        assert [p["code"] for p in result["problems"]] == ["unsigned-commit"]
        assert unsigned in result["problems"][0]["message"]
        assert result["rescue_ref"]
        assert git(team.bob.path, "rev-parse", "HEAD") == tip
    assert list((tmp_path / "cache").rglob("*.json"))

    status = memsync("--config", str(config), "status", "--json", env=env)
    admission = json.loads(status.stdout)["roots"][0]["admission"]
    assert admission["require"] == "signed"
    assert admission["anchor"] == tip
    assert admission["signer_files"] == [f"secret file {listed}"]
    text = memsync("--config", str(config), "status", env=env).stdout
    assert f"commits up to {tip[:12]}" in text
