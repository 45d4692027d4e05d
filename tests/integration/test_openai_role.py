"""Cycles through an OpenAI-compatible endpoint: a loopback fake provider with scripted
answers; the model proposes, code applies, the gate decides."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from memsync.config.sections import OpenAIRoleSettings
from memsync.cycles.roles import OpenAIRole
from memsync.cycles.turn import CycleSettings, run_cycle
from memsync.secrets import SecretRef
from tests.conftest import Team
from tests.helpers import commit, git, snapshot

KEY = "sk-test-never-shown-0123456789"


class Provider(http.server.BaseHTTPRequestHandler):
    answers: ClassVar[list[tuple[int, str]]] = []
    requests: ClassVar[list[dict[str, Any]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
        status, content = self.answers.pop(0)
        payload = json.dumps(
            {
                "choices": [{"message": {"role": "assistant", "content": content}}],
                "usage": {"total_tokens": 42},
            }
        ).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[str]:
    Provider.answers, Provider.requests = [], []
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Provider)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def role(url: str) -> OpenAIRole:
    return OpenAIRole(
        OpenAIRoleSettings(
            "insight", url, "test-model", SecretRef.parse({"value": KEY}), timedelta(seconds=20)
        )
    )


INSIGHT = CycleSettings("insight", True, threshold=1)
PRUNE = CycleSettings("prune", True, threshold=1)


def test_a_written_insight_lands_and_the_key_is_sent_but_never_logged(
    team: Team, provider: str
) -> None:
    Provider.answers = [
        (
            200,
            json.dumps(
                {
                    "action": "write",
                    "title": "Deploy rules",
                    "content": "# Deploy rules\n\nThey cluster.\n",
                }
            ),
        )
    ]
    the_role = role(provider)
    result = run_cycle(team.bob.settings, INSIGHT, the_role, team.bob.state_dir, force=True)
    assert result.status == "landed", result.message
    assert len(result.files) == 1 and result.files[0].startswith("insight_logs/")
    assert git(team.bob.path, "log", "-1", "--format=%s") == "insight: Deploy rules"
    request = Provider.requests[0]
    assert (
        request["auth"] == f"Bearer {KEY}" and request["response_format"]["type"] == "json_object"
    )
    assert KEY not in result.message


def test_a_malformed_answer_is_retried_once_with_the_error_then_fails(
    team: Team, provider: str
) -> None:
    Provider.answers = [(200, "not json at all"), (200, '{"action": "write"}')]
    before = snapshot(team.bob.path)
    result = run_cycle(team.bob.settings, INSIGHT, role(provider), team.bob.state_dir, force=True)
    assert result.status == "failed"
    assert len(Provider.requests) == 2  # one retry, then the turn fails
    retry = Provider.requests[1]["messages"][-1]["content"]
    assert retry != Provider.requests[0]["messages"][-1]["content"]
    assert snapshot(team.bob.path) == before


def test_a_server_error_fails_the_turn_and_a_noop_lands_nothing(team: Team, provider: str) -> None:
    Provider.answers = [(500, "{}")]
    failed = run_cycle(team.bob.settings, INSIGHT, role(provider), team.bob.state_dir, force=True)
    assert failed.status == "failed" and "500" in failed.message
    Provider.answers = [(200, '{"action": "noop", "reason": "nothing new"}')]
    noop = run_cycle(team.bob.settings, INSIGHT, role(provider), team.bob.state_dir, force=True)
    assert noop.status == "noop"


def test_prune_removes_items_and_their_edges_and_the_root_stays_valid(
    team: Team, provider: str
) -> None:
    memory = (
        "# User Context\n\n# Auth {#auth}\n\n- `login` short tokens → []\n"
        "- `refresh` rotating tokens → [dep:login]\n"
    )
    commit(team.bob.path, {"MEMORY.md": memory})
    Provider.answers = [
        (
            200,
            json.dumps(
                {
                    "action": "remove",
                    "remove": ["login"],
                    "ledger": "Removed:\n- login\nRevival grace:\n",
                }
            ),
        )
    ]
    prune_role = role(provider)
    prune_role.role = replace(prune_role.role, name="pruner")
    result = run_cycle(team.bob.settings, PRUNE, prune_role, team.bob.state_dir, force=True)
    assert result.status == "landed", (result.message, result.problems)
    text = (team.bob.path / "MEMORY.md").read_text()
    assert "`login`" not in text and "dep:login" not in text and "`refresh`" in text
    assert git(team.bob.path, "log", "-1", "--format=%s") == "prune: expired active memory"
    assert "Removed:" in git(team.bob.path, "log", "-1", "--format=%b")


def test_prune_keeps_what_pursuit_names_and_removes_the_rest(team: Team, provider: str) -> None:
    """A pruner may not edit Pursuit: an item a Pursuit edge names stays, and the other
    removals land (the whole batch is not refused)."""
    memory = (
        "# User Context\n\n# Auth {#auth}\n\n- `login` short tokens → []\n"
        "- `refresh` rotating tokens → []\n- `stale` old note → []\n"
    )
    pursuits = "# Pursuits\n\n## Ship {#ship}\n\n- `step` next → [dep:login]\n"
    commit(team.bob.path, {"MEMORY.md": memory, "PURSUITS.md": pursuits})
    remove = {"action": "remove", "remove": ["login", "stale"], "ledger": "Removed:\n"}
    Provider.answers = [(200, json.dumps(remove))]
    prune_role = role(provider)
    prune_role.role = replace(prune_role.role, name="pruner")
    result = run_cycle(team.bob.settings, PRUNE, prune_role, team.bob.state_dir, force=True)
    assert result.status == "landed", (result.message, result.problems)
    text = (team.bob.path / "MEMORY.md").read_text()
    assert "`login`" in text and "`refresh`" in text and "`stale`" not in text
    assert (team.bob.path / "PURSUITS.md").read_text() == pursuits
    assert len(Provider.requests) == 1


def test_a_written_insight_never_goes_through_a_symlink_the_root_holds(
    team: Team, provider: str, tmp_path: Path
) -> None:
    """A local commit (not validated until it is pushed) made `insight_logs` a symlink:
    the model's text must not be written where it points."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (team.bob.path / "insight_logs").symlink_to(outside)
    git(team.bob.path, "add", "-f", "insight_logs")
    git(team.bob.path, "commit", "-qm", "a link")
    write = {"action": "write", "title": "t", "content": "# T\n\nText.\n"}
    Provider.answers = [(200, json.dumps(write))]
    result = run_cycle(team.bob.settings, INSIGHT, role(provider), team.bob.state_dir, force=True)
    assert result.status == "failed" and "symlink" in result.message, result.message
    assert list(outside.iterdir()) == []
