"""Fresh CLI processes (no daemon) record the cross-file state of the tree they validated and
the next one starts from it, never trusting it over the bytes: an incoming commit that
breaks the graph is refused by a fresh `sync-now` whatever record lies in the state dir,
and `memsync validate` answers the same with its records, damaged records or none.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from memsync.wire import SyncReport, ValidateReport
from tests.conftest import Team
from tests.e2e.test_cli import memsync, write_config
from tests.helpers import commit, git, push

TOPIC = "## Topic {F#topic}\n"


def test_a_fresh_sync_now_refuses_a_breaking_commit_whatever_the_record(
    team: Team, tmp_path: Path
) -> None:
    cfg = write_config(team, tmp_path, members=("bob",))
    alice = team.alice.path
    memory = (alice / "MEMORY.md").read_text()
    commit(alice, {"MEMORY.md": memory + TOPIC, "MEMORY_topic.md": "- `t1` a fact → []\n"})
    push(alice)
    done = memsync("--config", str(cfg), "sync-now", "--json")
    assert done.returncode == 0, done.stderr
    records = tmp_path / "state" / "cache" / "lineages"
    (good,) = records.glob("*.rec")
    assert good.stat().st_mode & 0o777 == 0o600 and records.stat().st_mode & 0o777 == 0o700
    head = git(team.bob.path, "rev-parse", "HEAD")
    bad = commit(alice, {"MEMORY_topic.md": "- `t1` a fact → [dep:nowhere]\n"})
    push(alice)
    tree = git(alice, "rev-parse", f"{bad}^{{tree}}")
    # The good tree's record, also under the bad tree's id: still judged by content.
    shutil.copy(good, records / good.name.replace(good.name.split("-", 1)[1], f"{tree}.rec"))
    for _ in range(2):
        done = memsync("--config", str(cfg), "sync-now", "--json")
        assert done.returncode == 1, done.stderr
        (result,) = SyncReport.model_validate_json(done.stdout).results
        assert result.status not in ("synced", "current")
        assert "dangling-edge" in done.stdout
        assert git(team.bob.path, "rev-parse", "HEAD") == head


def test_validate_answers_the_same_with_records_damaged_records_or_none(tmp_path: Path) -> None:
    root, state = tmp_path / "mem", tmp_path / "state"
    env = {"XDG_STATE_HOME": str(state)}
    assert memsync("init", str(root), env=env).returncode == 0
    memory = (root / "MEMORY.md").read_text()
    (root / "MEMORY.md").write_text(memory + TOPIC)
    (root / "MEMORY_topic.md").write_text("- `t1` a fact → []\n- `t2` another → [dep:t1]\n")
    first = memsync("validate", str(root), "--json", env=env)
    assert first.returncode == 0, first.stdout
    records = state / "memsync" / "cache" / "lineages"
    assert len(list(records.glob("*.rec"))) == 1
    (root / "MEMORY_topic.md").write_text("- `t1` a fact → [dep:gone]\n- `t2` another → []\n")
    answers = [memsync("validate", str(root), "--json", env=env)]  # from the record
    for record in records.glob("*.rec"):
        record.write_bytes(record.read_bytes()[:-7])  # truncated
    answers.append(memsync("validate", str(root), "--json", env=env))
    shutil.rmtree(state)
    answers.append(memsync("validate", str(root), "--json", env=env))  # none at all
    assert [a.returncode for a in answers] == [1, 1, 1]
    assert answers[0].stdout == answers[1].stdout == answers[2].stdout
    codes = {p.code for p in ValidateReport.model_validate_json(answers[0].stdout).problems}
    assert codes == {"dangling-edge"}


def test_fresh_sync_nows_record_each_next_tree_as_a_delta_of_a_full_shape_record(
    team: Team, tmp_path: Path
) -> None:
    """A cold `sync-now` admitting a fast-forward records the new tree's shape as a delta
    (what it costs is the change, not the tree); the next cold one starts from that delta,
    and one whose delta or full record is gone or damaged answers the same."""
    cfg = write_config(team, tmp_path, members=("bob",))
    alice, bob = team.alice.path, team.bob.path
    shapes = tmp_path / "state" / "cache" / "shapes"

    def incoming(n: int) -> None:
        commit(alice, {f"MEMORY_note{n}.md": f"# Note {n}\n"})
        push(alice)
        done = memsync("--config", str(cfg), "sync-now", "--json")
        assert done.returncode == 0, done.stderr
        (result,) = SyncReport.model_validate_json(done.stdout).results
        assert result.status == "synced"
        assert git(bob, "rev-parse", "HEAD") == git(alice, "rev-parse", "HEAD")

    def bodies() -> dict[str, dict[str, object]]:
        return {
            path.name: json.loads(path.read_bytes().split(b"\n", 2)[1])  # header, body, columns
            for path in shapes.glob("*.shape")
        }

    incoming(1)
    incoming(2)
    tree = git(bob, "rev-parse", "HEAD^{tree}")
    (delta,) = [body for body in bodies().values() if body["tree"] == tree]
    full = {body["tree"]: body for body in bodies().values() if "base" not in body}
    assert delta["base"] in full
    assert sorted(row[0] for row in delta["delta"]) == ["MEMORY_note1.md", "MEMORY_note2.md"]
    incoming(3)  # from the delta: the next one names the same full record, every change
    tree = git(bob, "rev-parse", "HEAD^{tree}")
    (delta,) = [body for body in bodies().values() if body["tree"] == tree]
    assert [row[0] for row in sorted(delta["delta"])] == [f"MEMORY_note{n}.md" for n in (1, 2, 3)]
    assert set(full) == {b["tree"] for b in bodies().values() if "base" not in b}
    for path in shapes.glob("*.shape"):  # every record damaged: the full pass answers
        path.write_bytes(path.read_bytes()[:-2])
    incoming(4)
