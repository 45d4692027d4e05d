"""A root whose state directory is gone (no trusted upstream) never undoes a rewind: a local
commit its remote-tracking ref held before the fetch was on the upstream once, so it is not
unpushed work. `memsync sync-now` as a real process on two clones of one bare upstream."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from memsync.wire import SyncReport
from memsync.wire.cli import SyncResultModel
from tests.conftest import Team
from tests.e2e.test_cli import memsync, write_config
from tests.helpers import commit, git, is_ancestor, push


def _sync_now(cfg: Path, *extra: str) -> SyncResultModel:
    done: subprocess.CompletedProcess[str] = memsync(
        "--config", str(cfg), "sync-now", "--json", *extra
    )
    assert done.stdout, done.stderr
    return SyncReport.model_validate_json(done.stdout).results[0]


def _upstream(team: Team) -> str | None:
    return git(team.upstream, "rev-parse", "--verify", "--quiet", "main", check=False) or None


@pytest.mark.parametrize("rewind", ["back-to-the-parent", "rewritten", "branch-deleted"])
def test_a_rewind_is_refused_after_the_state_dir_was_deleted(
    team: Team, tmp_path: Path, rewind: str
) -> None:
    cfg = write_config(team, tmp_path, ("bob",))
    dropped = commit(team.bob.path, {"MEMORY_d.md": "# D\n\npushed, then dropped\n"}, "d")
    assert _sync_now(cfg).status == "pushed"
    # Alice never had d: she force-pushes the upstream back to what she holds.
    if rewind == "rewritten":
        commit(team.alice.path, {"MEMORY_e.md": "# E\n"}, "e")
    if rewind == "branch-deleted":
        git(team.upstream, "update-ref", "-d", "refs/heads/main")
    else:
        push(team.alice.path, force=True)
    upstream = _upstream(team)
    shutil.rmtree(tmp_path / "state")

    result = _sync_now(cfg)
    assert result.status == "rewound", result
    assert "remote-tracking" in result.message
    assert _upstream(team) == upstream  # the dropped commit was not pushed back
    assert git(team.bob.path, "rev-parse", "HEAD") == dropped
    if upstream is not None:
        assert result.rescue_ref is not None
        assert git(team.bob.path, "rev-parse", result.rescue_ref) == upstream

    # The next cycle still refuses (the commit it judged by is now trusted state).
    again = _sync_now(cfg)
    assert again.status == "rewound", again
    assert _upstream(team) == upstream

    if upstream is None:
        return  # accepting a deleted branch creates it from the local head, as with state
    # Accepting the rewrite adopts it; the dropped commit stays dropped (kept locally).
    accepted = _sync_now(cfg, "--accept-rewrite")
    assert accepted.status in ("synced", "pushed"), accepted
    assert not is_ancestor(team.bob.path, dropped, git(team.upstream, "rev-parse", "main"))
    assert not (team.bob.path / "MEMORY_d.md").exists()
    kept = git(team.bob.path, "for-each-ref", "--format=%(objectname)", "refs/memsync/rescue")
    assert dropped in kept.split()


def test_without_state_new_local_work_is_still_pushed(team: Team, tmp_path: Path) -> None:
    """No rewind: a commit the remote-tracking ref never held is this root's own work."""
    cfg = write_config(team, tmp_path, ("bob",))
    assert _sync_now(cfg).status == "current"
    shutil.rmtree(tmp_path / "state")
    mine = commit(team.bob.path, {"MEMORY_new.md": "# New\n"}, "new")
    commit(team.alice.path, {"MEMORY_a.md": "# A\n"}, "a")
    push(team.alice.path)
    result = _sync_now(cfg)
    assert result.status == "pushed", result
    assert is_ancestor(team.upstream, mine, "main")
