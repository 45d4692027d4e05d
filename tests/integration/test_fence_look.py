"""The fence's reads started beside the validation (`publish.FenceLook`, issue 18): the
fence judges them only after the verdict, and never on a HEAD that moved since they were
taken; an edit made after them is still refused (by git's two-tree merge). Publishing with
an early look gives the same outcome as publishing without one."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from memsync.errors import GitError
from memsync.roots import journal
from memsync.roots.admit import Admission, Admitter
from memsync.roots.checks import Checks
from memsync.roots.layout import RootLayout
from memsync.roots.publish import FenceBroken, FenceLook, Target, publish
from memsync.roots.refused import Fenced
from memsync.roots.result import SyncStatus
from memsync.transports.git import Git
from memsync.validators.policy import SyncPolicy
from tests.conftest import Team
from tests.helpers import commit, git
from tests.integration.test_publish_fence import OP, _scene  # the same root and candidate


def _looked(root: Path, start: str, candidate: str) -> FenceLook:
    look = FenceLook(Git(root), start, candidate)
    look.wait()  # its status has read the work tree as it is now
    return look


def test_a_commit_made_after_the_look_stops_publication(tmp_path: Path) -> None:
    """The look's status saw HEAD at the start; the person commits before the fence judges
    it: the fence reads HEAD again (from its file), asks git again, and refuses."""
    root, start, candidate = _scene(tmp_path)
    look = _looked(root, start, candidate)
    mine = commit(root, {"MEMORY_b.md": "# B\n\nmine, committed\n"})
    with pytest.raises(FenceBroken, match="the branch moved") as caught:
        publish(Git(root), Target("main", start, candidate, OP), SyncPolicy(), look)
    assert caught.value.status == SyncStatus.ERROR
    assert git(root, "rev-parse", "HEAD") == mine
    assert (root / "MEMORY_a.md").read_text() == "# A\n"
    assert not (root / "MEMORY_c.md").exists()
    assert git(root, "status", "--porcelain") == ""


def test_a_branch_checked_out_after_the_look_stops_publication(tmp_path: Path) -> None:
    root, start, candidate = _scene(tmp_path)
    look = _looked(root, start, candidate)
    git(root, "checkout", "-q", "-b", "other")
    with pytest.raises(FenceBroken, match="no longer on branch main"):
        publish(Git(root), Target("main", start, candidate, OP), SyncPolicy(), look)
    assert git(root, "rev-parse", "HEAD") == start
    assert git(root, "rev-parse", "main") == start


def test_an_edit_made_after_the_look_survives(tmp_path: Path) -> None:
    """The look's status found the changed path clean; the person edits it before the work
    tree moves: git's two-tree merge does not overwrite a file that is not up to date, so
    nothing is published and the edit is kept."""
    root, start, candidate = _scene(tmp_path)
    look = _looked(root, start, candidate)
    (root / "MEMORY_a.md").write_text("# A\n\nmine, after the look\n")
    with pytest.raises((FenceBroken, GitError)):
        publish(Git(root), Target("main", start, candidate, OP), SyncPolicy(), look)
    assert git(root, "rev-parse", "HEAD") == start
    assert (root / "MEMORY_a.md").read_text() == "# A\n\nmine, after the look\n"
    assert not (root / "MEMORY_c.md").exists()


def _outcome(root: Path, start: str, candidate: str, early: bool) -> tuple[object, ...]:
    look = _looked(root, start, candidate) if early else None
    try:
        publish(Git(root), Target("main", start, candidate, OP), SyncPolicy(), look)
    except FenceBroken as fence:
        verdict: tuple[object, ...] = (fence.status, fence.message, fence.files)
    else:
        verdict = ("published",)
    tree = sorted(p.name for p in root.iterdir() if p.name != ".git")
    texts = {name: (root / name).read_text() for name in tree if (root / name).is_file()}
    head = {start: "start", candidate: "candidate"}.get(git(root, "rev-parse", "HEAD"))
    return verdict, head, git(root, "status", "--porcelain"), texts


EDITS = {
    "clean": {},
    "edit-outside-the-diff": {"MEMORY_b.md": "# B\n\nmine\n"},
    "edit-in-the-diff": {"MEMORY_a.md": "# A\n\nmine\n"},
    "untracked-where-the-candidate-adds": {"MEMORY_c.md": "# C, mine\n"},
    "ignored-where-the-candidate-adds": {"MEMORY_c.md/x": "mine\n"},
    "already-the-candidate": {"MEMORY_a.md": "# A\n\nnew\n", "MEMORY_c.md": "# C\n"},
}


@pytest.mark.parametrize("edits", list(EDITS.values()), ids=list(EDITS))
def test_an_early_look_decides_as_the_fence_alone(tmp_path: Path, edits: dict[str, str]) -> None:
    """Edits made before the look: the same verdict, HEAD, status and files either way."""
    outcomes = []
    for early in (False, True):
        (tmp_path / str(early)).mkdir()
        root, start, candidate = _scene(tmp_path / str(early))
        for name, text in edits.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
        outcomes.append(_outcome(root, start, candidate, early))
    assert outcomes[0] == outcomes[1]


def test_a_look_at_another_move_is_not_used(tmp_path: Path) -> None:
    """A look taken for another candidate is ignored: the fence asks git itself."""
    root, start, candidate = _scene(tmp_path)
    look = _looked(root, start, start)  # nothing to move: a status of the whole tree
    (root / "MEMORY_a.md").write_text("# A\n\nmine\n")
    with pytest.raises(FenceBroken) as caught:
        publish(Git(root), Target("main", start, candidate, OP), SyncPolicy(), look)
    assert caught.value.status == SyncStatus.DIRTY
    assert caught.value.files == ("MEMORY_a.md",)


def _add(root: Path, name: str, text: str) -> None:
    (root / name).write_text(text)
    git(root, "add", name)


AFTER_THE_LOOK = {
    "edit-in-the-diff": lambda root: (root / "MEMORY_a.md").write_text("# A\n\nmine\n"),
    "staged-in-the-diff": lambda root: _add(root, "MEMORY_a.md", "# A\n\nmine\n"),
    "staged-removal-in-the-diff": lambda root: git(root, "rm", "-q", "--cached", "MEMORY_a.md"),
    "committed-then-soft-reset": lambda root: (
        _add(root, "MEMORY_a.md", "# A\n\nmine\n"),
        git(root, "commit", "-q", "-m", "mine"),
        git(root, "reset", "-q", "--soft", "HEAD~"),
    ),
}


@pytest.mark.parametrize("change", list(AFTER_THE_LOOK.values()), ids=list(AFTER_THE_LOOK))
def test_a_change_made_after_the_look_is_refused_as_the_fence_refuses_it(
    team: Team, change: Callable[[Path], object]
) -> None:
    """A change to a path the candidate changes, made after the early status and before the
    work tree moves, is refused by git's two-tree merge; the admission then reports what
    the fence would have (dirty, the path named) and settles its record, instead of a raw
    git error and a `prepared` record left for the next cycle's recovery."""
    root = team.bob.path
    commit(root, {"MEMORY_a.md": "# A\n"})
    start = git(root, "rev-parse", "HEAD")
    candidate = commit(root, {"MEMORY_a.md": "# A\n\nnew\n", "MEMORY_c.md": "# C\n"})
    git(root, "reset", "-q", "--hard", start)
    layout = RootLayout.for_root(team.bob.state_dir, "bob")
    records = journal.Journal(layout.journal_dir)
    outcome = Admitter(Git(root), records, layout, SyncPolicy()).admit(
        Admission("sync", "main", start, candidate),
        lambda _op, _worktree: candidate,
        Checks(history=False),
        before_publish=lambda: change(root),  # after the look (the admission's own) and verdict
    )
    assert isinstance(outcome, Fenced), outcome
    assert outcome.fence.status == SyncStatus.DIRTY
    assert outcome.fence.files == ("MEMORY_a.md",)
    assert records.unsettled() == []
    assert git(root, "rev-parse", "HEAD") == start
    assert not (root / "MEMORY_c.md").exists()
