"""The CLI as a subprocess: exit codes, JSON documents, one-line errors, the crash matrix."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.roots.create import init_root
from memsync.roots.faults import SYNC_POINTS
from memsync.wire import InitReport, StatusReport, SyncReport, ValidateReport
from tests.conftest import Team
from tests.helpers import GIT_ENV, commit, git, head_of, is_ancestor, snapshot


def memsync(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **GIT_ENV, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "memsync", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def write_config(team: Team, tmp_path: Path, members: tuple[str, ...] = ("alice", "bob")) -> Path:
    lines = ["version: 1", f"state_dir: {tmp_path / 'state'}", "roots:"]
    for name in members:
        lines += [f"  {name}:", f"    path: {tmp_path / name}", "    watch: false"]
    path = tmp_path / "config.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_init_creates_a_root_that_validates(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    done = memsync("init", str(root), "--json")
    assert done.returncode == 0, done.stderr
    report = InitReport.model_validate_json(done.stdout)
    assert report.created and report.head
    for name in ("MEMORY.md", "PURSUITS.md", ".gitignore"):
        assert (root / name).is_file()
    assert git(root, "status", "--porcelain") == ""
    checked = memsync("validate", str(root), "--json")
    assert checked.returncode == 0, checked.stdout
    assert ValidateReport.model_validate_json(checked.stdout).valid


def test_validate_keeps_a_parse_cache_that_is_never_trusted_over_the_bytes(tmp_path: Path) -> None:
    root, state = tmp_path / "mem", tmp_path / "state"
    env = {"XDG_STATE_HOME": str(state)}
    assert memsync("init", str(root), env=env).returncode == 0
    (root / "MEMORY.md").write_text(
        "# User Context\n\n# Notes {#notes}\n\n- `dup` one → []\n- `dup` two → []\n"
    )
    first = memsync("validate", str(root), "--json", env=env)
    store = state / "memsync" / "cache" / "parse-cache.sqlite3"
    assert store.is_file()
    assert (state / "memsync").stat().st_mode & 0o077 == 0
    warm = memsync("validate", str(root), "--json", env=env)
    store.write_bytes(b"not a database, and not ours to believe")
    spoiled = memsync("validate", str(root), "--json", env=env)
    assert first.returncode == warm.returncode == spoiled.returncode == 1
    assert first.stdout == warm.stdout == spoiled.stdout
    assert "duplicate-id" in first.stdout


def test_init_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "notes.txt").write_text("mine")
    done = memsync("init", str(tmp_path / "x"))
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1
    assert "not empty" in done.stderr
    assert (tmp_path / "x" / "notes.txt").read_text() == "mine"


def test_validate_reports_problems_with_codes(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    init_root(root)  # what `memsync init` runs (test_init_creates_a_root_that_validates)
    (root / "MEMORY_bad.md").write_bytes(b"\xff\n")
    os.chmod(root / "MEMORY.md", 0o755)
    done = memsync("validate", str(root), "--json")
    assert done.returncode == 1
    report = ValidateReport.model_validate_json(done.stdout)
    assert {p.code for p in report.problems} == {"not-utf8", "executable"}
    human = memsync("validate", str(root))
    assert "not-utf8" in human.stdout and human.returncode == 1


def test_validate_rev(team: Team) -> None:
    bad = commit(team.alice.path, {"notes.txt": "x"})
    done = memsync("validate", str(team.alice.path), "--rev", bad, "--json")
    assert done.returncode == 1
    codes = {p.code for p in ValidateReport.model_validate_json(done.stdout).problems}
    assert codes == {"path-not-allowed"}
    assert memsync("validate", str(team.alice.path), "--rev", "HEAD~1").returncode == 0


def test_sync_now_json_and_status(team: Team, tmp_path: Path) -> None:
    cfg = write_config(team, tmp_path)
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    done = memsync("--config", str(cfg), "sync-now", "--json")
    assert done.returncode == 0, done.stderr
    report = SyncReport.model_validate_json(done.stdout)
    assert [r.status for r in report.results] == ["pushed", "synced"]
    assert (team.bob.path / "MEMORY_a.md").exists()

    status = memsync("--config", str(cfg), "status", "--json")
    assert status.returncode == 0, status.stderr
    parsed = StatusReport.model_validate_json(status.stdout)
    assert [r.status for r in parsed.roots] == ["pushed", "synced"]
    assert all(r.last_success_at for r in parsed.roots)
    assert parsed.daemon.running is False
    table = memsync("--config", str(cfg), "status")
    assert "alice" in table.stdout and "bob" in table.stdout


def test_sync_now_verdict_exit_code_and_unknown_root(team: Team, tmp_path: Path) -> None:
    cfg = write_config(team, tmp_path)
    (team.bob.path / "MEMORY.md").write_text("# edited, not committed\n")
    done = memsync("--config", str(cfg), "sync-now", "bob", "--json")
    assert done.returncode == 1
    assert SyncReport.model_validate_json(done.stdout).results[0].status == "dirty"
    unknown = memsync("--config", str(cfg), "sync-now", "carol")
    assert unknown.returncode == 2
    assert "carol" in unknown.stderr


def test_missing_config_is_a_usage_error(tmp_path: Path) -> None:
    done = memsync("sync-now", env={"XDG_CONFIG_HOME": str(tmp_path), "MEMSYNC_CONFIG": ""})
    assert done.returncode == 2
    assert "config" in done.stderr


def test_config_sample_validates(tmp_path: Path) -> None:
    sample = memsync("config", "sample")
    assert sample.returncode == 0
    path = tmp_path / "sample.yaml"
    path.write_text(sample.stdout)
    checked = memsync("config", "validate", str(path))
    assert checked.returncode == 0, checked.stderr


def test_config_validate_reports_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(
        "version: 1\nroots:\n  a:\n    path: /x\n    sync: {interval: 5x}\n    colour: blue\n"
    )
    done = memsync("config", "validate", str(path))
    assert done.returncode == 2
    assert "roots.a.sync.interval" in done.stderr
    assert "colour" in done.stderr


def test_credentials_never_printed(team: Team, tmp_path: Path) -> None:
    cfg = write_config(team, tmp_path, ("bob",))
    git(
        team.bob.path,
        "remote",
        "set-url",
        "origin",
        "https://bob:hunter2-secret@127.0.0.1:9/team.git",
    )
    for args in (
        ("sync-now",),
        ("sync-now", "--json"),
        ("--debug", "sync-now"),
        ("status", "--json"),
        ("status",),
    ):
        done = memsync("--config", str(cfg), *args)
        assert "hunter2-secret" not in done.stdout + done.stderr, args
    for path in (tmp_path / "state").rglob("*"):
        if path.is_file():
            assert b"hunter2-secret" not in path.read_bytes()


# -- the crash matrix -----------------------------------------------------------------------


def _scene(team: Team, diverged: bool) -> None:
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"})
    git(team.alice.path, "push", "-q", "origin", "HEAD:main")
    if diverged:
        commit(team.bob.path, {"MEMORY_b.md": "# B\n"})


@pytest.mark.slow
@pytest.mark.parametrize("diverged", [False, True], ids=["fast-forward", "merge"])
@pytest.mark.parametrize("point", SYNC_POINTS)
def test_crash_matrix(team: Team, tmp_path: Path, point: str, diverged: bool) -> None:
    cfg = write_config(team, tmp_path, ("bob",))
    _scene(team, diverged)
    old = head_of(team.bob.path)
    crashed = memsync("--config", str(cfg), "sync-now", "--json", env={"MEMSYNC_FAULT": point})
    reached = diverged or point not in ("before-push", "after-push")
    assert crashed.returncode == (-signal.SIGKILL if reached else 0), crashed.stderr
    after_crash = head_of(team.bob.path)

    # Whatever happened, the root is at the old or a new commit; then the next cycle settles.
    done = memsync("--config", str(cfg), "sync-now", "--json")
    assert done.returncode == 0, (point, done.stdout, done.stderr)
    result = SyncReport.model_validate_json(done.stdout).results[0]
    assert result.status in ("synced", "pushed", "current"), (point, result)
    head = head_of(team.bob.path)
    assert after_crash in (old, head) or is_ancestor(team.bob.path, after_crash, head)
    snap = snapshot(team.bob.path)
    assert snap.status == ""
    assert (team.bob.path / "MEMORY_a.md").read_text() == "# A\n"
    if diverged:
        assert (team.bob.path / "MEMORY_b.md").read_text() == "# B\n"
    assert git(team.bob.path, "for-each-ref", "refs/memsync/candidates") == ""
    assert len(git(team.bob.path, "worktree", "list").splitlines()) == 1
    wt = tmp_path / "state" / "roots" / "bob" / "worktrees"
    assert not wt.exists() or list(wt.iterdir()) == []
    journal = tmp_path / "state" / "roots" / "bob" / "journal"
    phases = [json.loads(p.read_text())["phase"] for p in journal.glob("*.json")]
    assert "running" not in phases and "prepared" not in phases


def test_validate_reports_a_legacy_reference_file_even_though_git_ignores_it(
    tmp_path: Path,
) -> None:
    root = tmp_path / "mem"
    init_root(root)  # what `memsync init` runs (test_init_creates_a_root_that_validates)
    (root / "PURSUIT_RULES.md").write_text("# old rules\n")
    done = memsync("validate", str(root), "--json")
    assert done.returncode == 1
    codes = {p.code for p in ValidateReport.model_validate_json(done.stdout).problems}
    assert codes == {"legacy-reference"}


def test_validate_enforces_corrections_capacity_and_reports_graph_lines(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    init_root(root)  # what `memsync init` runs (test_init_creates_a_root_that_validates)
    entry = (
        "## Entry {n}\n\n### Candidate\n\nc\n\n### Proposed edit\n\np\n\n### Accepted edit\n\na\n\n"
    )
    (root / "corrections.md").write_text("".join(entry.format(n=n) for n in range(11)))
    (root / "MEMORY.md").write_text("# User Context {#user}\n\n- `tabs` tabs → [dep:nowhere]\n")
    done = memsync("validate", str(root), "--json")
    assert done.returncode == 1
    report = ValidateReport.model_validate_json(done.stdout)
    found = {(p.code, p.path, p.line) for p in report.problems}
    assert ("dangling-edge", "MEMORY.md", 3) in found
    assert "corrections-capacity" in {p.code for p in report.problems}


def test_a_prepared_merge_whose_commit_a_power_cut_lost_settles_and_syncs_again(
    team: Team, tmp_path: Path
) -> None:
    """git writes the candidate merge as a loose object without fsync; the prepared record
    is fsynced. If a power cut keeps the record and loses the object, recovery settles the
    record failed (nothing was published) instead of failing every cycle after."""
    cfg = write_config(team, tmp_path, ("bob",))
    _scene(team, diverged=True)
    crashed = memsync(
        "--config", str(cfg), "sync-now", "--json", env={"MEMSYNC_FAULT": "after-prepared"}
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    open_dir = tmp_path / "state" / "roots" / "bob" / "journal" / "open"
    (record,) = open_dir.glob("*.json")
    candidate = json.loads(record.read_text())["candidate"]
    # (the candidate ref stays, naming an object that is gone)
    loose = team.bob.path / ".git" / "objects" / candidate[:2] / candidate[2:]
    assert loose.exists()
    loose.unlink()
    done = memsync("--config", str(cfg), "sync-now", "--json")
    assert done.returncode == 0, (done.stdout, done.stderr)
    result = SyncReport.model_validate_json(done.stdout).results[0]
    assert result.status == "pushed", result
    assert (team.bob.path / "MEMORY_a.md").read_text() == "# A\n"
    assert (team.bob.path / "MEMORY_b.md").read_text() == "# B\n"
    assert not list(open_dir.glob("*.json"))


def test_validate_says_how_many_tracked_files_memory_files_and_items_it_checked(
    tmp_path: Path,
) -> None:
    root = tmp_path / "mem"
    init_root(root)  # what `memsync init` runs (test_init_creates_a_root_that_validates)
    logs = root / "insight_logs"
    logs.mkdir()
    for n in range(1200):  # synchronized, validated for name, mode and text: not the graph
        (logs / f"2026-01-01-{n:06d}.md").write_text(f"# Insight {n}\n")
    (root / "MEMORY.md").write_text(
        "# User Context\n\n# Notes {#notes}\n\n- `a` one → []\n- `b` two → []\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-qm", "logs")
    done = memsync("validate", str(root))
    assert done.returncode == 0, done.stdout
    assert done.stdout == f"{root}: valid: 1,203 tracked files, 2 memory files, 3 items\n"
    checked = ValidateReport.model_validate_json(memsync("validate", str(root), "--json").stdout)
    assert (checked.tracked, checked.memory_files, checked.files, checked.items) == (1203, 2, 2, 3)
    (logs / "2026-01-01-000000.md").write_bytes(b"not UTF-8: \xff\n")
    bad = memsync("validate", str(root))
    assert bad.returncode == 1
    assert bad.stdout.splitlines()[0] == (
        f"{root}: 1 problem(s) in 1,203 tracked files, 2 memory files, 3 items"
    )
