"""Recovery finishes a publication killed after `prepared` through the live publication's own
fence: `memsync sync-now` as a real process, SIGKILLed at a fault point, then something of
the person's appears in the root before the next run. Whatever it is (a file or directory
where the candidate creates a path or a parent directory, an edit, a staged version), it is
kept byte for byte, nothing is published over it, the record settles `failed`, the verdict
says what stands in the way, and once it is moved away the next sync succeeds. What is
only memsync's own half-written move (the candidate's exact bytes) is finished."""

from __future__ import annotations

import json
import signal
import subprocess
from pathlib import Path

import pytest

from memsync.cli.app import App
from memsync.wire import SyncReport
from memsync.wire.cli import SyncResultModel
from tests.conftest import Team
from tests.e2e.test_cli import memsync, write_config
from tests.helpers import commit, git, snapshot, write
from tests.integration.test_in_the_way import CASES


def _sync_now(cfg: Path, fault: str | None = None) -> subprocess.CompletedProcess[str]:
    return memsync("--config", str(cfg), "sync-now", "--json", env={"MEMSYNC_FAULT": fault or ""})


def _result(done: subprocess.CompletedProcess[str]) -> SyncResultModel:
    assert done.stdout, done.stderr
    return SyncReport.model_validate_json(done.stdout).results[0]


def _crash(
    team: Team, tmp_path: Path, incoming: dict[str, str], diverged: bool, point: str
) -> Path:
    """Alice pushes `incoming`; Bob's sync-now is killed at `point`, its record left open."""
    cfg = write_config(team, tmp_path, ("bob",))
    App(config_path=str(cfg), command="").settings()  # loaded once: the runs read its memo
    commit(team.alice.path, incoming)
    git(team.alice.path, "push", "-q", "origin", "HEAD:main")
    if diverged:
        commit(team.bob.path, {"MEMORY_bob.md": "# Bob\n"})
    crashed = _sync_now(cfg, point)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    assert len(_open_records(tmp_path)) == 1
    return cfg


def _open_records(tmp_path: Path) -> list[Path]:
    return list((tmp_path / "state" / "roots" / "bob" / "journal" / "open").glob("*.json"))


def _settled(tmp_path: Path) -> list[dict[str, str]]:
    journal = tmp_path / "state" / "roots" / "bob" / "journal"
    return [json.loads(p.read_text()) for p in sorted(journal.glob("*.json"))]


def _place(root: Path, local: dict[str, str | None]) -> None:
    for rel, data in local.items():
        target = root / rel
        if data is None:
            target.mkdir(parents=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(data)


@pytest.mark.slow
@pytest.mark.parametrize("diverged", [False, True], ids=["fast-forward", "merge"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_a_file_in_the_way_stops_recovery_and_survives(
    team: Team, tmp_path: Path, case: str, diverged: bool
) -> None:
    local, incoming, blocked = CASES[case]
    cfg = _crash(team, tmp_path, incoming, diverged, "after-prepared")
    start = git(team.bob.path, "rev-parse", "HEAD")
    _place(team.bob.path, local)
    before = snapshot(team.bob.path)

    result = _result(_sync_now(cfg))
    assert result.status == "dirty", result
    assert [p.code for p in result.problems] == ["local-file-in-the-way"], result
    assert result.problems[0].path == blocked
    assert snapshot(team.bob.path) == before  # every byte, the index and HEAD
    assert git(team.bob.path, "rev-parse", "HEAD") == start
    assert not _open_records(tmp_path)
    recovered = [r for r in _settled(tmp_path) if "interrupted" in r["message"]]
    assert [r["phase"] for r in recovered] == ["failed"], recovered
    assert "local files memsync does not own" in recovered[0]["message"]
    assert git(team.bob.path, "for-each-ref", "refs/memsync/candidates") == ""

    (team.bob.path / blocked).rename(tmp_path / "moved-away")
    again = _result(_sync_now(cfg))
    assert again.status in ("synced", "pushed"), again
    for rel, data in incoming.items():
        assert (team.bob.path / rel).read_text() == data


INCOMING = {"MEMORY.md": "# User Context\n\nfrom alice\n", "MEMORY_c.md": "# C\n"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "scene",
    ["untracked-memory-file", "edited-tracked-file", "staged-tracked-file", "staged-new-file"],
)
def test_an_edit_where_the_candidate_writes_stops_recovery_and_survives(
    team: Team, tmp_path: Path, scene: str
) -> None:
    cfg = _crash(team, tmp_path, INCOMING, False, "after-prepared")
    root = team.bob.path
    start = git(root, "rev-parse", "HEAD")
    if scene == "untracked-memory-file":
        write(root, {"MEMORY_c.md": "# C, mine\n"})
    elif scene == "edited-tracked-file":
        write(root, {"MEMORY.md": "# User Context\n\nmine\n"})
    elif scene == "staged-tracked-file":  # the work tree even holds the candidate's bytes
        write(root, {"MEMORY.md": "# User Context\n\nstaged by me\n"})
        git(root, "add", "MEMORY.md")
        write(root, {"MEMORY.md": INCOMING["MEMORY.md"]})
    else:
        write(root, {"MEMORY_c.md": "# C, staged by me\n"})
        git(root, "add", "-f", "MEMORY_c.md")
        write(root, {"MEMORY_c.md": INCOMING["MEMORY_c.md"]})
    before = snapshot(root)
    result = _result(_sync_now(cfg))
    assert result.status == "dirty", result
    assert snapshot(root) == before
    assert git(root, "rev-parse", "HEAD") == start
    recovered = [r for r in _settled(tmp_path) if "interrupted" in r["message"]]
    assert [r["phase"] for r in recovered] == ["failed"], recovered
    assert not _open_records(tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after-prepared", "after-worktree-update"])
def test_recovery_finishes_its_own_move_and_keeps_an_edit_elsewhere(
    team: Team, tmp_path: Path, point: str
) -> None:
    """An edit outside the candidate's paths is not in its way: recovery finishes the move
    (as a live publication would) and the edit is still there, byte for byte."""
    cfg = _crash(team, tmp_path, INCOMING, False, point)
    root = team.bob.path
    write(root, {"PURSUITS.md": "# Pursuits\n\nmy edit\n", "notes.txt": "mine\n"})
    result = _result(_sync_now(cfg))
    assert result.status == "dirty", result  # the edit itself blocks the rest of the cycle
    assert (root / "PURSUITS.md").read_text() == "# Pursuits\n\nmy edit\n"
    assert (root / "notes.txt").read_text() == "mine\n"
    assert git(root, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
    for rel, data in INCOMING.items():
        assert (root / rel).read_text() == data
    recovered = [r for r in _settled(tmp_path) if "interrupted" in r["message"]]
    assert [r["phase"] for r in recovered] == ["committed"], recovered
    assert git(root, "status", "--porcelain") == "M PURSUITS.md"


@pytest.mark.slow
def test_a_half_written_move_of_its_own_is_finished(team: Team, tmp_path: Path) -> None:
    """As after a power cut inside `read-tree -u`: some of the candidate's files are on
    disk (its exact bytes, where nothing stood before), the index is still at the start.
    Those bytes are memsync's own: recovery finishes the publication."""
    incoming = {**INCOMING, "insight_logs/2026-01-01-000000.md": "# Insight\n\nIt holds.\n"}
    cfg = _crash(team, tmp_path, incoming, False, "after-prepared")
    root = team.bob.path
    write(root, {k: incoming[k] for k in ("MEMORY_c.md", "insight_logs/2026-01-01-000000.md")})
    result = _result(_sync_now(cfg))
    assert result.status in ("current", "synced"), result
    assert git(root, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
    assert git(root, "status", "--porcelain", "--untracked-files=all") == ""
    for rel, data in incoming.items():
        assert (root / rel).read_text() == data


def _autocommit_config(team: Team, tmp_path: Path) -> Path:
    cfg = write_config(team, tmp_path, ("bob",))
    cfg.write_text(cfg.read_text() + "    sync: {autocommit: true}\n")
    App(config_path=str(cfg), command="").settings()  # loaded once: the runs read its memo
    return cfg


@pytest.mark.slow
@pytest.mark.parametrize("staged_after", [False, True], ids=["as-it-was", "staged-meanwhile"])
def test_an_autocommit_killed_after_prepared_is_finished_or_kept(
    team: Team, tmp_path: Path, staged_after: bool
) -> None:
    """Autocommit publishes in place (the work tree already holds its commit). Killed after
    `prepared`, recovery finishes it, unless the person staged another version meanwhile:
    then that staged version and the work tree stay exactly as they are."""
    cfg = _autocommit_config(team, tmp_path)
    root = team.bob.path
    start = git(root, "rev-parse", "HEAD")
    edit = "# User Context\n\nedited by an agent\n"
    write(root, {"MEMORY.md": edit})
    crashed = _sync_now(cfg, "after-prepared")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    if staged_after:
        write(root, {"MEMORY.md": "# User Context\n\nstaged by me\n"})
        git(root, "add", "MEMORY.md")
        write(root, {"MEMORY.md": edit})
    before = snapshot(root)
    result = _result(_sync_now(cfg))
    recovered = [r for r in _settled(tmp_path) if "interrupted" in r["message"]]
    assert not _open_records(tmp_path)
    assert (root / "MEMORY.md").read_text() == edit
    if staged_after:
        assert result.status == "dirty", result
        assert "staged" in result.message
        assert snapshot(root) == before
        assert git(root, "show", ":MEMORY.md") == "# User Context\n\nstaged by me"
        assert git(root, "rev-parse", "HEAD") == start
        assert [r["phase"] for r in recovered] == ["failed"], recovered
    else:
        assert result.status == "pushed", result
        assert [r["phase"] for r in recovered] == ["committed"], recovered
        assert git(root, "status", "--porcelain") == ""
        assert git(team.upstream, "show", "main:MEMORY.md") == edit.rstrip("\n")
