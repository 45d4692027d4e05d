"""Revival grace and the ledger on a real root: an item the previous prune removed that
came back is kept for `revival_grace` prunes whatever the role does; the landed commit's
body is the ledger of what actually went and what grace kept; the prompt carries it all."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest

from memsync.config.sections import CommandRoleSettings, OpenAIRoleSettings
from memsync.cycles.ledger import parse_ledger
from memsync.cycles.roles import CommandRole, OpenAIRole
from memsync.cycles.turn import CycleSettings, run_cycle
from tests.conftest import Team
from tests.fakes.chat_server import ChatServer, ChatState, answer, chat_server_thread
from tests.helpers import commit, git, snapshot

PRUNE = CycleSettings("prune", True, threshold=1, revival_grace=2)
MEMORY = (
    "# User Context\n\n# Auth {#auth}\n\n"
    "- `login` short tokens → []\n"
    "- `refresh` rotating tokens → [dep:login]\n"
    "- `keep` still true → []\n"
)
WITHOUT_LOGIN = (
    "# User Context\n\n# Auth {#auth}\n\n"
    "- `refresh` rotating tokens → []\n"
    "- `keep` still true → []\n"
)


def agent(tmp_path: Path, name: str, body: str) -> CommandRole:
    """A pruner that is a small shell script (an agent CLI stand-in); it appends one line
    to `<name>.runs` each time it is started."""
    script = tmp_path / f"{name}.sh"
    counter = tmp_path / f"{name}.runs"
    script.write_text(f"#!/bin/sh\nset -eu\necho run >> '{counter}'\ncat > /dev/null\n{body}\n")
    script.chmod(0o755)
    return CommandRole(CommandRoleSettings("pruner", (str(script),), timedelta(seconds=30)))


def runs(tmp_path: Path, name: str) -> int:
    path = tmp_path / f"{name}.runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


GIT = "git -c user.name=pruner -c user.email=pruner@localhost commit -q"
REMOVE_LOGIN = f"""printf '%s' '{WITHOUT_LOGIN}' > MEMORY.md
git add MEMORY.md
{GIT} -F - <<'EOF'
prune: expired active memory

Removed:
- `login` short tokens expired
- `keep` a lie: this one stays
EOF"""
CHECKPOINT = f"""{GIT} --allow-empty -F - <<'EOF'
prune: checkpoint

Nothing went.
Removed:
- none
Revival grace:
- `login` grace 9/9 the agent's own count is not trusted
EOF"""


def body(root: Path) -> str:
    return git(root, "log", "-1", "--format=%b")


def test_a_revived_item_is_kept_for_two_prunes_then_judged_again(
    team: Team, tmp_path: Path
) -> None:
    root, state = team.bob.path, team.bob.state_dir
    commit(root, {"MEMORY.md": MEMORY})
    remover = agent(tmp_path, "remove", REMOVE_LOGIN)

    first = run_cycle(team.bob.settings, PRUNE, remover, state, force=True)
    assert first.status == "landed", (first.message, first.problems)
    ledger = parse_ledger(body(root))
    # What went, with the role's note; its claim that `keep` went is not recorded.
    assert [(e.item, e.note) for e in ledger.removed] == [("login", "short tokens expired")]
    assert ledger.grace == ()
    assert f"Memsync-Operation: {first.operation_id}" in body(root)

    commit(root, {"MEMORY.md": MEMORY}, "memory: login is back")  # wanted again
    before = snapshot(root)
    refused = run_cycle(team.bob.settings, PRUNE, remover, state, force=True)
    assert refused.status == "refused"
    assert [p.code for p in refused.problems] == ["grant-violation"]
    assert "revival grace (1/2)" in refused.problems[0].message
    assert refused.problems[0].path == "MEMORY.md"
    assert snapshot(root) == before

    checkpoint = agent(tmp_path, "checkpoint", CHECKPOINT)
    for count in (1, 2):
        done = run_cycle(team.bob.settings, PRUNE, checkpoint, state, force=True)
        assert done.status == "landed", (done.message, done.problems)
        assert git(root, "log", "-1", "--format=%s") == "prune: checkpoint"
        text = body(root)
        assert "Nothing went." in text
        assert [(e.item, e.grace) for e in parse_ledger(text).grace] == [("login", (count, 2))]
        assert "9/9" not in text

    # Grace is over: the item is judged like any other and may go.
    last = run_cycle(team.bob.settings, PRUNE, remover, state, force=True)
    assert last.status == "landed", (last.message, last.problems)
    assert "`login`" not in (root / "MEMORY.md").read_text()
    assert runs(tmp_path, "remove") == 3 and runs(tmp_path, "checkpoint") == 2


KEY = "sk-ledger-test-key-0123456789"


@pytest.fixture
def provider() -> Iterator[ChatServer]:
    with chat_server_thread(ChatState()) as server:
        yield server


def test_an_openai_pruner_is_told_the_ledger_and_its_graced_removal_is_dropped(
    team: Team, provider: ChatServer
) -> None:
    root, state = team.bob.path, team.bob.state_dir
    commit(root, {"MEMORY.md": WITHOUT_LOGIN})
    git(
        root,
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "prune: expired active memory\n\nRemoved:\n- MEMORY.md#login short tokens expired\n",
    )
    commit(root, {"MEMORY.md": MEMORY}, "memory: login is back")
    proposal = {
        "action": "remove",
        "remove": ["login", "keep"],
        "ledger": "Removed:\n- `login` again\n- `keep` settled long ago\nRevival grace:\n- none",
    }
    provider.state.script(answer(json.dumps(proposal)))
    role = OpenAIRole(
        OpenAIRoleSettings("pruner", provider.base_url, "m", None, timedelta(seconds=20))
    )
    result = run_cycle(team.bob.settings, PRUNE, role, state, force=True)
    assert result.status == "landed", (result.message, result.problems)

    text = (root / "MEMORY.md").read_text()
    assert "`login`" in text and "dep:login" in text and "`keep`" not in text
    ledger = parse_ledger(body(root))
    assert [(e.item, e.note) for e in ledger.removed] == [("keep", "settled long ago")]
    assert [(e.item, e.grace) for e in ledger.grace] == [("login", (1, 2))]

    user = provider.state.requests[0].messages[1]["content"]
    assert "`login` grace 1/2" in user.split("## Protected", 1)[1]
    assert "removed: login" in user  # the parsed previous ledger
    assert "MEMORY.md#login short tokens expired" in user  # and its raw body
    assert "threshold: 1 memory commits each" in user
    assert "revival grace: 2 prunes" in user
    boundary = git(root, "rev-parse", "HEAD~2")
    assert f"boundary commit: {boundary}" in user
    unchanged = user.split("## Items unchanged since the snapshot", 1)[1].split("##", 1)[0]
    # `refresh` got its edge back and `login` came back: both changed since the boundary.
    assert "`keep` (MEMORY.md)" in unchanged
    assert "`refresh`" not in unchanged and "`login`" not in unchanged
    assert "### MEMORY.md" in user.split("## Boundary snapshot", 1)[1]
