"""The status of a few paths (the fence's, `work_state(paths=...)`) on a real work tree: the
same answer as the whole tree's status limited to those paths, and as git's own with its
index preload, which it runs without (`gitstatus.NARROW_CONFIG`: the preload's threads cost
a large root's narrow status a third of its wall clock, and find nothing it needs)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from memsync.transports.git import Git
from memsync.transports.gitstatus import NARROW_CONFIG
from memsync.transports.workstate import WorkState, parse_status_v2
from tests.conftest import Team
from tests.helpers import commit, git
from tests.integration.test_git_refs import _spy

ASKED = ["MEMORY_a.md", "MEMORY_b.md", "MEMORY_c.md", "MEMORY_new.md", "MEMORY_dir.md", "d/x.md"]


def _scene(root: Path) -> None:
    """Tracked files modified, deleted, staged; a new file; a file replaced by a directory
    holding one (which the root's ignore rules leave out); and the same kinds of change to
    paths that are not asked about."""
    commit(
        root,
        {
            "MEMORY_a.md": "# A\n",
            "MEMORY_b.md": "# B\n",
            "MEMORY_c.md": "# C\n",
            "MEMORY_dir.md": "# Dir\n",
            "d/x.md": "# X\n",
            "MEMORY_other.md": "# Other\n",
        },
        "scene",
    )
    (root / "MEMORY_a.md").write_text("# A, edited\n")
    (root / "MEMORY_b.md").unlink()
    (root / "MEMORY_c.md").write_text("# C, staged\n")
    git(root, "add", "MEMORY_c.md")
    (root / "MEMORY_new.md").write_text("# New\n")
    (root / "MEMORY_dir.md").unlink()
    (root / "MEMORY_dir.md").mkdir()
    (root / "MEMORY_dir.md" / "MEMORY_inside.md").write_text("# Inside\n")
    (root / "d" / "x.md").write_text("# X, edited\n")
    (root / "MEMORY_other.md").write_text("# Other, edited\n")  # not asked about
    (root / "MEMORY_untracked.md").write_text("# Untracked\n")  # nor this


def _within(state: WorkState, paths: list[str]) -> WorkState:
    """`state` limited to what a status of `paths` covers (each path, and under it)."""
    kept = tuple(
        e for e in state.entries if any(e.path == p or e.path.startswith(p + "/") for p in paths)
    )
    return WorkState(state.branch, state.head, state.upstream, state.ahead, state.behind, kept)


def test_a_narrow_status_is_the_whole_status_limited_to_its_paths(team: Team) -> None:
    _scene(team.bob.path)
    box = Git(team.bob.path)
    narrow = box.work_state(paths=ASKED)
    assert narrow == _within(box.work_state(), ASKED)
    assert {e.path for e in narrow.entries} == {
        "MEMORY_a.md",
        "MEMORY_b.md",
        "MEMORY_c.md",
        "MEMORY_new.md",
        "MEMORY_dir.md",
        "d/x.md",
    }


def test_a_narrow_status_runs_without_the_index_preload_and_answers_as_with_it(
    team: Team, tmp_path: Path
) -> None:
    _scene(team.bob.path)
    folder, log = _spy(tmp_path)
    box = Git(team.bob.path, env={"PATH": f"{folder}:{os.environ['PATH']}"})
    narrow = box.work_state(paths=ASKED)
    whole = box.work_state()
    runs = [line.split("\x1f")[:-1] for line in log.read_text().splitlines()]
    statuses = [args for args in runs if "status" in args]
    assert len(statuses) == 2
    preload = [f"{key}={value}" for key, value in NARROW_CONFIG]
    assert preload == ["core.preloadIndex=false"]
    assert all(item in statuses[0] for item in preload)  # the narrow one
    assert not any(item in statuses[1] for item in preload)  # the whole one: git's default
    # git's own answer with its preload (forced to run on a small index) is the same.
    real_git = shutil.which("git")
    assert real_git is not None
    argv = [real_git, "-c", "core.preloadIndex=true", *statuses[0][statuses[0].index("status") :]]
    env = {**os.environ, "GIT_TEST_PRELOAD_INDEX": "1", "GIT_LITERAL_PATHSPECS": "1"}
    done = subprocess.run(argv, cwd=team.bob.path, env=env, capture_output=True, check=True)
    assert parse_status_v2(done.stdout) == narrow
    assert narrow == _within(whole, ASKED)
