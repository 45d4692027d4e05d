"""`memsync provenance` as a subprocess: its JSON documents, exit codes and refusals."""

from __future__ import annotations

import json
from pathlib import Path

from memsync.wire.provenance import ItemProvenanceReport, SignerReport
from tests.conftest import Team
from tests.e2e.test_cli import memsync, write_config
from tests.helpers import commit, snapshot

MEMORY = "# User Context {#user}\n\nFacts.\n\n- `tabs` prefers tabs → [dep:user]\n"
FINGERPRINT = "SHA256:" + "A" * 43


def test_item_json_and_text(team: Team, tmp_path: Path) -> None:
    config = write_config(team, tmp_path)
    made = commit(team.alice.path, {"MEMORY.md": MEMORY}, "add tabs")
    done = memsync("--config", str(config), "provenance", "alice", "tabs", "--json")
    assert done.returncode == 0, done.stderr
    report = ItemProvenanceReport.model_validate_json(done.stdout)
    assert (report.item.file, report.item.line, report.item.kind) == ("MEMORY.md", 5, "node")
    assert report.item.introduced.commit == made == report.item.last_changed.commit
    assert report.item.introduced.signer == "unsigned"
    assert report.item.introduced.subject == "add tabs"
    text = memsync("--config", str(config), "provenance", "alice", "tabs")
    assert text.returncode == 0 and made[:12] in text.stdout and "MEMORY.md:5" in text.stdout


def test_unknown_root_and_unknown_item_are_clear_errors(team: Team, tmp_path: Path) -> None:
    config = write_config(team, tmp_path)
    commit(team.alice.path, {"MEMORY.md": MEMORY})
    for args, code in (
        (("nobody", "tabs"), "unknown-root"),
        (("alice", "nope"), "unknown-item"),
        (("alice", "--signer", "not-a-key"), "usage"),
        (("alice", "tabs", "--signer", FINGERPRINT), "usage"),
        (("alice", "tabs", "--revert"), "usage"),
        (("alice", "--signer", FINGERPRINT, "--since", "last tuesday"), "usage"),
    ):
        done = memsync("--config", str(config), "provenance", *args, "--json")
        assert done.returncode == 2, (args, done.stdout, done.stderr)
        assert json.loads(done.stdout)["error"]["code"] == code, args
        plain = memsync("--config", str(config), "provenance", *args)
        assert plain.returncode == 2 and plain.stdout == ""
        assert len(plain.stderr.strip().splitlines()) >= 1


def test_a_signer_listing_removes_nothing(team: Team, tmp_path: Path) -> None:
    config = write_config(team, tmp_path)
    commit(team.alice.path, {"MEMORY.md": MEMORY})
    before = snapshot(team.alice.path)
    done = memsync(
        "--config", str(config), "provenance", "alice", "--signer", FINGERPRINT, "--json"
    )
    assert done.returncode == 0, done.stderr
    report = SignerReport.model_validate_json(done.stdout)
    assert report.items == [] and report.revert is None and report.head == before.head
    assert snapshot(team.alice.path) == before
