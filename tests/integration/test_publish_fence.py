"""The publication fence looks at the paths the candidate changes (O(diff)): an edit there
stops publication and survives; an edit elsewhere is not touched by the move and survives
it; the candidate ref is read from its file."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.roots.layout import candidate_ref
from memsync.roots.publish import FenceBroken, Target, publish
from memsync.roots.result import SyncStatus
from memsync.transports.git import Git
from memsync.validators.policy import SyncPolicy
from tests.helpers import commit, git

OP = "op-fence"


def _scene(tmp_path: Path) -> tuple[Path, str, str]:
    """A root at `start`, and a candidate that changes MEMORY_a.md and adds MEMORY_c.md."""
    root = tmp_path / "root"
    git(tmp_path, "init", "-q", "-b", "main", str(root))
    start = commit(
        root,
        {
            ".gitignore": "*\n!MEMORY*.md\n!.gitignore\n",
            "MEMORY.md": "# M\n",
            "MEMORY_a.md": "# A\n",
            "MEMORY_b.md": "# B\n",
        },
    )
    candidate = commit(root, {"MEMORY_a.md": "# A\n\nnew\n", "MEMORY_c.md": "# C\n"})
    git(root, "reset", "-q", "--hard", start)
    git(root, "update-ref", candidate_ref(OP), candidate)
    return root, start, candidate


def test_an_edit_outside_the_diff_is_kept_and_does_not_stop_publication(tmp_path: Path) -> None:
    root, start, candidate = _scene(tmp_path)
    (root / "MEMORY_b.md").write_text("# B\n\nmy edit\n")
    publish(Git(root), Target("main", start, candidate, OP), SyncPolicy())
    assert git(root, "rev-parse", "HEAD") == candidate
    assert (root / "MEMORY_a.md").read_text() == "# A\n\nnew\n"
    assert (root / "MEMORY_b.md").read_text() == "# B\n\nmy edit\n"
    assert git(root, "status", "--porcelain") == "M MEMORY_b.md"


@pytest.mark.parametrize(
    ("path", "text"),
    [("MEMORY_a.md", "# A\n\nmine\n"), ("MEMORY_c.md", "# C, mine, untracked\n")],
    ids=["edited-in-the-diff", "untracked-where-the-candidate-adds"],
)
def test_an_edit_at_a_changed_path_stops_publication(tmp_path: Path, path: str, text: str) -> None:
    root, start, candidate = _scene(tmp_path)
    (root / path).write_text(text)
    with pytest.raises(FenceBroken) as caught:
        publish(Git(root), Target("main", start, candidate, OP), SyncPolicy())
    assert caught.value.status == SyncStatus.DIRTY
    assert caught.value.files == (path,)
    assert git(root, "rev-parse", "HEAD") == start
    assert (root / path).read_text() == text


def test_a_moved_candidate_ref_stops_publication(tmp_path: Path) -> None:
    root, start, candidate = _scene(tmp_path)
    git(root, "update-ref", candidate_ref(OP), start)
    with pytest.raises(FenceBroken, match="missing or moved"):
        publish(Git(root), Target("main", start, candidate, OP), SyncPolicy())
    assert git(root, "rev-parse", "HEAD") == start


def test_an_in_place_publication_never_replaces_a_staged_version(tmp_path: Path) -> None:
    """Autocommit's publication (the work tree already holds the candidate) moves only the
    index; a version staged after the autocommit looked is the person's: refused, the
    index and the work tree as they were."""
    root, start, candidate = _scene(tmp_path)
    git(root, "read-tree", "-u", "--reset", candidate)  # the work tree holds the candidate
    git(root, "read-tree", start)  # the index is at the start again
    (root / "MEMORY_a.md").write_text("# A\n\nstaged by me\n")
    git(root, "add", "MEMORY_a.md")
    (root / "MEMORY_a.md").write_text("# A\n\nnew\n")  # back to the candidate's bytes
    index = (root / ".git" / "index").read_bytes()
    with pytest.raises(FenceBroken) as caught:
        publish(Git(root), Target("main", start, candidate, OP, in_place=True), SyncPolicy())
    assert caught.value.status == SyncStatus.DIRTY
    assert caught.value.files == ("MEMORY_a.md",)
    assert "staged" in caught.value.message
    assert (root / ".git" / "index").read_bytes() == index
    assert git(root, "show", ":MEMORY_a.md") == "# A\n\nstaged by me"
    assert git(root, "rev-parse", "HEAD") == start
