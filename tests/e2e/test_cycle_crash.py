"""The cycle crash matrix: `memsync cycle insight|prune` as a real process, killed with
SIGKILL at each named point of a turn, then run again without the fault. It converges:
the root is valid and clean, the cycle's write landed exactly once, nothing is left open,
and a model turn that had settled (its commit prepared or published) is never run again
(the agent script counts its starts in a file; the fake provider counts requests)."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from memsync.cli.app import App
from memsync.roots.check import check_root
from memsync.roots.faults import CYCLE_POINTS
from memsync.wire.cli import CycleReport
from tests.conftest import Team
from tests.e2e.test_cli import memsync
from tests.fakes.chat_server import ChatServer, ChatState, answer, chat_server_thread
from tests.helpers import commit, git, kill_while_agent_holds

# Every point a turn passes: its own, then the admission's and the publisher's.
SETTLED = ("after-prepared", "after-worktree-update", "after-ref-update", "after-publish")
POINTS = (*CYCLE_POINTS, "after-merge", "after-validation", *SETTLED)

INSIGHT_AGENT = """\
#!/bin/sh
set -eu
cat > /dev/null
echo run >> '{counter}'
mkdir -p insight_logs
printf '# Shape\\n\\nIt holds.\\n' > insight_logs/crash-test.md
git add -f insight_logs/crash-test.md
git -c user.name=insight -c user.email=insight@localhost commit -q -m 'insight: crash test'
"""
PRUNE_AGENT = """\
#!/bin/sh
set -eu
cat > /dev/null
echo run >> '{counter}'
grep -v '`old`' MEMORY.md > MEMORY.new
mv MEMORY.new MEMORY.md
git add MEMORY.md
git -c user.name=pruner -c user.email=pruner@localhost commit -q -F - <<'EOF'
prune: expired active memory

Removed:
- `old` nobody asked in a generation
EOF
"""
MEMORY = "# User Context\n\n# Notes {#notes}\n\n- `old` stale → []\n- `new` fresh → []\n"


def configure(team: Team, tmp_path: Path, kind: str, role: str, *, push: bool = False) -> Path:
    cycle = (
        "insight: {enabled: true, trigger_points: 1, points_per_commit: 1}"
        if kind == "insight"
        else "prune: {enabled: true, generation_commits: 1}"
    )
    path = tmp_path / "config.yaml"
    path.write_text(
        "\n".join(
            (
                "version: 1",
                f"state_dir: {tmp_path / 'state'}",
                f"control: {{socket: {tmp_path / 'control.sock'}}}",
                "roots:",
                "  bob:",
                f"    path: {team.bob.path}",
                "    watch: false",
                f"    sync: {{push: {'true' if push else 'false'}}}",
                f"    {cycle}",
                "roles:",
                f"  {role}",
                "",
            )
        )
    )
    # Loaded once here, as an earlier command would have: the runs read the settings memo
    # instead of building the schema again (what they test is the turn, not the loading).
    App(config_path=str(path), command="").settings()
    return path


def command_role(tmp_path: Path, kind: str) -> str:
    script = tmp_path / f"{kind}.sh"
    body = INSIGHT_AGENT if kind == "insight" else PRUNE_AGENT
    script.write_text(body.format(counter=tmp_path / "runs"))
    script.chmod(0o755)
    name = "insight" if kind == "insight" else "pruner"
    return f"{name}: {{executor: command, command: [{script}], timeout: 60s}}"


def starts(tmp_path: Path) -> int:
    path = tmp_path / "runs"
    return len(path.read_text().splitlines()) if path.exists() else 0


def run(cfg: Path, kind: str, *extra: str, fault: str | None = None) -> tuple[int, str]:
    """The exit code and stdout (stderr when there is no stdout) of one `memsync cycle`."""
    env = {"MEMSYNC_FAULT": fault} if fault else {}
    done = memsync("--config", str(cfg), "cycle", kind, "bob", "--json", *extra, env=env)
    return done.returncode, done.stdout or done.stderr


def assert_converged(team: Team, tmp_path: Path, kind: str) -> None:
    root = team.bob.path
    checked = check_root(root)  # what `memsync validate` decides, without its process
    assert checked.valid, checked.problems
    assert git(root, "status", "--porcelain") == ""
    subjects = git(root, "log", "--format=%s").splitlines()
    prefix = "insight:" if kind == "insight" else "prune:"
    assert len([s for s in subjects if s.startswith(prefix)]) == 1, subjects
    if kind == "insight":
        assert (root / "insight_logs" / "crash-test.md").read_text() == "# Shape\n\nIt holds.\n"
    else:
        text = (root / "MEMORY.md").read_text()
        assert "`old`" not in text and "`new`" in text
        assert "- `old` nobody asked in a generation" in git(root, "log", "-1", "--format=%b")
    assert git(root, "for-each-ref", "refs/memsync/candidates") == ""
    assert len(git(root, "worktree", "list").splitlines()) == 1
    base = tmp_path / "state" / "roots" / "bob"
    assert not (base / "worktrees").exists() or list((base / "worktrees").iterdir()) == []
    phases = [json.loads(p.read_text())["phase"] for p in (base / "journal").glob("*.json")]
    assert "running" not in phases and "prepared" not in phases
    assert not list((base / "journal" / "open").glob("*.json"))
    if kind == "insight":
        pressure = json.loads((base / "insight.json").read_text())
        assert pressure["active_operation"] is None and pressure["last_result"] == "artifact"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["insight", "prune"])
@pytest.mark.parametrize("point", POINTS)
def test_cycle_crash_matrix(team: Team, tmp_path: Path, kind: str, point: str) -> None:
    cfg = configure(team, tmp_path, kind, command_role(tmp_path, kind))
    commit(team.bob.path, {"MEMORY.md": MEMORY}, "memory: notes")
    code, out = run(cfg, kind, "--force", fault=point)
    assert code == -signal.SIGKILL, out
    assert starts(tmp_path) == 1

    # Without the fault and without --force: the insight claim survived the kill, and a
    # prune whose commit did not land is still due.
    code, out = run(cfg, kind)
    assert code == 0, out
    report = CycleReport.model_validate_json(out)
    settled = point in SETTLED
    assert starts(tmp_path) == (1 if settled else 2), (point, report)
    if settled:  # finished by recovery; the model is not asked again
        assert report.status in ("noop", "not-due"), report
    else:
        assert report.status == "landed", report
    assert_converged(team, tmp_path, kind)

    code, out = run(cfg, kind)  # and once more: nothing new is due, nothing runs
    assert code == 0 and starts(tmp_path) == (1 if settled else 2), out


@pytest.fixture
def provider() -> Iterator[ChatServer]:
    with chat_server_thread(ChatState()) as server:
        yield server


@pytest.mark.slow
@pytest.mark.parametrize("point", ["cycle-during-executor", "after-prepared"])
def test_an_openai_turn_killed_mid_cycle_converges(
    team: Team, tmp_path: Path, provider: ChatServer, point: str
) -> None:
    write = answer({"action": "write", "title": "crash test", "content": "It holds."})
    provider.state.script(write, write)
    role = f"insight: {{executor: openai, base_url: '{provider.base_url}', model: m, timeout: 30s}}"
    cfg = configure(team, tmp_path, "insight", role)
    code, out = run(cfg, "insight", "--force", fault=point)
    assert code == -signal.SIGKILL, out
    assert len(provider.state.requests) == 1
    code, out = run(cfg, "insight")
    assert code == 0, out
    settled = point == "after-prepared"
    assert len(provider.state.requests) == (1 if settled else 2)
    root = team.bob.path
    assert git(root, "status", "--porcelain") == ""
    logs = git(root, "ls-tree", "--name-only", "HEAD", "insight_logs/").split()
    assert len(logs) == 1
    subjects = git(root, "log", "--format=%s").splitlines()
    assert subjects.count("insight: crash test") == 1
    assert check_root(root).valid


HOLDING_AGENT = """\
#!/bin/sh
set -eu
cat > /dev/null
echo run >> '{counter}'
if [ ! -e '{released}' ]; then echo $$ > '{pidfile}'; cat '{fifo}' > /dev/null; fi
mkdir -p insight_logs
printf '# Shape\\n\\nIt holds.\\n' > insight_logs/crash-test.md
git add -f insight_logs/crash-test.md
git -c user.name=insight -c user.email=insight@localhost commit -q -m 'insight: crash test'
"""


def holding_insight(team: Team, tmp_path: Path) -> tuple[Path, Path, Path]:
    """Bob's insight role is HOLDING_AGENT (blocked on a fifo until `released` exists), with
    notes to think about; (the config, the agent's pidfile, the release file)."""
    fifo, pidfile, released = tmp_path / "hold", tmp_path / "agent.pid", tmp_path / "released"
    os.mkfifo(fifo)
    script = tmp_path / "insight.sh"
    script.write_text(
        HOLDING_AGENT.format(
            counter=tmp_path / "runs", released=released, pidfile=pidfile, fifo=fifo
        )
    )
    script.chmod(0o755)
    cfg = configure(
        team, tmp_path, "insight", f"insight: {{executor: command, command: [{script}]}}"
    )
    commit(team.bob.path, {"MEMORY.md": MEMORY}, "memory: notes")
    return cfg, pidfile, released


def test_a_cycle_killed_while_its_agent_runs_converges_on_the_next_run(
    team: Team, tmp_path: Path
) -> None:
    """SIGKILL of `memsync cycle` while the agent itself is still running (blocked on a
    fifo): nothing lands, nothing is left open, and the next run asks the agent again and
    lands exactly one insight."""
    cfg, pidfile, released = holding_insight(team, tmp_path)
    before = git(team.bob.path, "rev-parse", "HEAD")
    kill_while_agent_holds(["--config", str(cfg), "cycle", "insight", "bob", "--force"], pidfile)
    assert git(team.bob.path, "rev-parse", "HEAD") == before
    released.touch()
    code, out = run(cfg, "insight")
    assert code == 0, out
    assert CycleReport.model_validate_json(out).status == "landed"
    assert starts(tmp_path) == 2
    assert_converged(team, tmp_path, "insight")


def test_an_agent_left_running_by_a_killed_cycle_is_ended_by_the_next_one(
    team: Team, tmp_path: Path
) -> None:
    """The killed `memsync cycle` recorded its agent's group; the next run ends that group
    (the agent and the `cat` it is blocked in) before its own turn, then lands."""
    cfg, pidfile, released = holding_insight(team, tmp_path)
    args = ["--config", str(cfg), "cycle", "insight", "bob", "--force"]
    agent = kill_while_agent_holds(args, pidfile, end_agent=False)
    group = os.getpgid(agent)
    assert running(agent)  # the kill left it blocked on the fifo
    released.touch()
    code, out = run(cfg, "insight")
    assert code == 0, out
    assert not running(agent)
    assert not [pid for pid in pids() if running(pid) and group_of(pid) == group]
    assert CycleReport.model_validate_json(out).status == "landed"


def running(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except ProcessLookupError:
        return None


def pids() -> list[int]:
    return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]


# The insight agent, then (on its first run only) it commits in the root itself, as a
# person could meanwhile: the two look the same, so the turn is role-escaped.
ESCAPING_AGENT = (
    INSIGHT_AGENT
    + """\
if [ ! -e '{moved}' ]; then
  touch '{moved}'
  cd '{root}'
  printf '# Pursuits\\n\\nMore.\\n' > PURSUITS.md
  git -c user.name=me -c user.email=me@localhost commit -q -am 'pursuits: more'
fi
"""
)


def test_an_agent_that_commits_in_the_root_is_role_escaped_and_nothing_is_lost(
    team: Team, tmp_path: Path
) -> None:
    script = tmp_path / "insight.sh"
    script.write_text(
        ESCAPING_AGENT.format(
            counter=tmp_path / "runs", moved=tmp_path / "moved", root=team.bob.path
        )
    )
    script.chmod(0o755)
    role = f"insight: {{executor: command, command: [{script}], timeout: 60s}}"
    cfg = configure(team, tmp_path, "insight", role)
    before = git(team.bob.path, "rev-parse", "HEAD")
    code, out = run(cfg, "insight", "--force")
    assert code == 1, out
    report = CycleReport.model_validate_json(out)
    assert report.status == "failed" and "role-escaped" in {p.code for p in report.problems}
    assert git(team.bob.path, "rev-parse", "HEAD") == before  # the branch was put back
    kept = git(team.bob.path, "for-each-ref", "--format=%(objectname)", "refs/memsync/rescue/")
    assert git(team.bob.path, "log", "-1", "--format=%s", kept) == "pursuits: more"
    assert (team.bob.path / "PURSUITS.md").read_text() == "# Pursuits\n\nMore.\n"
    # The person commits what the work tree holds again; the next turn lands once.
    git(team.bob.path, "commit", "-q", "-am", "pursuits: more")
    code, out = run(cfg, "insight")
    assert code == 0, out
    assert CycleReport.model_validate_json(out).status == "landed"
    assert starts(tmp_path) == 2
    assert_converged(team, tmp_path, "insight")
    assert "pursuits: more" in git(team.bob.path, "log", "--format=%s")
