"""Local files that memsync does not own are never deleted or overwritten by a sync.

The allowlist `.gitignore` makes every non-memory file "ignored", and git treats ignored
files as disposable when it checks out a tree. The fence must find every untracked file
or directory standing where the candidate creates a path (or one of its parent
directories) and refuse the publication: status `dirty`, code `local-file-in-the-way`,
root untouched, the cycle can succeed once the file is moved.
"""

from __future__ import annotations

import pytest

from tests.conftest import Team
from tests.helpers import commit, git, snapshot


def _arrange(team: Team, local: dict[str, str | None], incoming: dict[str, str]) -> None:
    for rel, data in local.items():
        target = team.bob.path / rel
        if data is None:
            target.mkdir(parents=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(data)
    commit(team.alice.path, incoming)
    assert team.alice.sync().status == "pushed"


CASES = {
    "file-where-a-directory-comes": (
        {"insight_logs": "my notes\n"},
        {"insight_logs/2026-01-01-000000.md": "# Insight\n"},
        "insight_logs",
    ),
    "directory-where-a-file-comes": (
        {"MEMORY_x.md/notes.txt": "keep me\n"},
        {"MEMORY_x.md": "# X\n"},
        "MEMORY_x.md",
    ),
    "file-where-a-parent-directory-comes": (
        {"shared_views": "a file, not a directory\n"},
        {"shared_views/team/view.md": "# View\n"},
        "shared_views",
    ),
    "nested-file-in-a-new-directory": (
        {"shared_views/team/view.md/deep.txt": "deep\n"},
        {"shared_views/team/view.md": "# View\n"},
        "shared_views/team/view.md",
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("diverged", [False, True], ids=["fast-forward", "merge"])
def test_a_local_file_in_the_way_stops_the_sync_and_survives(
    team: Team, case: str, diverged: bool
) -> None:
    local, incoming, blocked = CASES[case]
    _arrange(team, local, incoming)
    if diverged:
        commit(team.bob.path, {"MEMORY_bob.md": "# Bob\n"})
    before = snapshot(team.bob.path)
    result = team.bob.sync()
    assert result.status == "dirty", result.message
    assert [p.code for p in result.problems] == ["local-file-in-the-way"]
    assert result.problems[0].path == blocked
    assert blocked in result.files and blocked in result.message
    assert snapshot(team.bob.path) == before
    # Once the person moves the file away, the same upstream syncs.
    git(team.bob.path, "status")  # plain git sees nothing to do with ignored files
    target = team.bob.path / blocked
    target.rename(team.bob.path.parent / "moved-away")
    again = team.bob.sync()
    assert again.status in ("synced", "pushed"), again.message


def test_an_empty_directory_holds_no_bytes_and_is_not_in_the_way(team: Team) -> None:
    _arrange(team, {"MEMORY_y.md": None}, {"MEMORY_y.md": "# Y\n"})
    assert team.bob.sync().status == "synced"
    assert (team.bob.path / "MEMORY_y.md").read_text() == "# Y\n"


def test_a_tracked_file_replaced_by_a_directory_upstream_is_not_in_the_way(team: Team) -> None:
    commit(team.alice.path, {"insight_logs/a.md": "# A\n"})
    assert team.alice.sync().status == "pushed"
    assert team.bob.sync().status == "synced"
    commit(team.alice.path, {"insight_logs/a.md": None, "insight_logs/b.md": "# B\n"})
    assert team.alice.sync().status == "pushed"
    (team.bob.path / "insight_logs" / "local.txt").write_text("mine\n")
    assert team.bob.sync().status == "synced"
    assert (team.bob.path / "insight_logs" / "local.txt").read_text() == "mine\n"
    assert (team.bob.path / "insight_logs" / "b.md").is_file()
