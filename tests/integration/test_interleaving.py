"""Interleavings of local edits, local commits, upstream pushes and sync cycles (Hypothesis).

Invariants after every step: no commit anyone made is lost, uncommitted edits are never
touched, the published tree always validates, nothing of ours is left behind; and at the
end every root converges on the upstream.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from memsync.roots.create import init_root
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.transports.git import Git
from memsync.validators.gate import validate_tree
from memsync.validators.policy import SyncPolicy
from memsync.validators.rightmemory import default_graph_validator
from tests.conftest import PROCESS_EXAMPLES, copy_built
from tests.helpers import commit, git, head_of
from tests.kit import settings_for

MEMBERS = ("alice", "bob")
SCENE = ("team.git", *MEMBERS, "outsider")


@functools.cache
def built_scene() -> Path:
    """The upstream, both roots and the outsider's clone, made once per process: every
    run of the machine starts from a copy of it (`copy_built`), a few git processes where
    making it took some sixty."""
    base = Path(tempfile.mkdtemp(prefix="memsync-interleave-built-"))
    atexit.register(shutil.rmtree, base, ignore_errors=True)
    upstream = base / "team.git"
    git(base, "init", "-q", "--bare", "-b", "main", str(upstream))
    for member in MEMBERS:
        path = base / member
        init_root(path, upstream=str(upstream))
        git(path, "config", "user.name", member)
        git(path, "config", "user.email", f"{member}@example.invalid")
    git(base, "clone", "-q", str(upstream), str(base / "outsider"))
    return base


class Interleavings(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.base = Path(tempfile.mkdtemp(prefix="memsync-interleave-"))
        copy_built(built_scene(), self.base, SCENE)
        self.upstream = self.base / "team.git"
        self.paths = {m: self.base / m for m in MEMBERS}
        self.outsider = self.base / "outsider"
        self.settings = {m: settings_for(m, p) for m, p in self.paths.items()}
        self.pending: dict[str, dict[str, str]] = {m: {} for m in MEMBERS}
        self.made: dict[str, list[str]] = {m: [] for m in MEMBERS}
        self.counter = 0
        self.checked: dict[str, tuple[str, int]] = {}  # member -> (HEAD, commits made) checked

    def teardown(self) -> None:
        shutil.rmtree(self.base, ignore_errors=True)

    def _sync(self, member: str) -> str:
        return sync_root(self.settings[member], self.base / f"state-{member}", SyncOptions()).status

    @rule(
        member=st.sampled_from(MEMBERS),
        text=st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=20),
    )
    def edit(self, member: str, text: str) -> None:
        self.counter += 1
        name = f"MEMORY_{member}{self.counter % 3}.md"
        content = f"# {member}\n\n{self.counter}: {text}\n"
        (self.paths[member] / name).write_text(content, encoding="utf-8")
        self.pending[member][name] = content

    @precondition(lambda self: any(self.pending.values()))
    @rule(member=st.sampled_from(MEMBERS))
    def commit_edits(self, member: str) -> None:
        if not self.pending[member]:
            return
        git(self.paths[member], "add", "-A")
        if git(self.paths[member], "status", "--porcelain"):
            git(self.paths[member], "commit", "-q", "-m", f"{member} notes")
            self.made[member].append(git(self.paths[member], "rev-parse", "HEAD"))
        self.pending[member] = {}

    @rule()
    def outsider_pushes(self) -> None:
        self.counter += 1
        git(self.outsider, "pull", "-q", "--no-rebase", "origin", "main")
        commit(self.outsider, {f"insight_logs/n{self.counter}.md": "# insight\n"}, "outsider")
        git(self.outsider, "push", "-q", "origin", "HEAD:main")

    @rule(member=st.sampled_from(MEMBERS))
    def sync(self, member: str) -> None:
        status = self._sync(member)
        if self.pending[member]:
            assert status == "dirty", status
        else:
            assert status in ("current", "synced", "pushed"), status

    @invariant()
    def nothing_lost_nothing_left(self) -> None:
        for member, path in self.paths.items():
            head = head_of(path)
            # What a HEAD reaches and its tree never change: they are asked of git again
            # only when HEAD moved or a commit was made since they were last checked.
            if self.checked.get(member) != (head, len(self.made[member])):
                reached = set(git(path, "rev-list", head).split())
                for made in self.made[member]:
                    assert made in reached, f"{member} lost commit {made[:12]}"
                tree = Git(path).tree_view(head)
                assert validate_tree(tree, SyncPolicy(), default_graph_validator()).ok
                self.checked[member] = (head, len(self.made[member]))
            for name, content in self.pending[member].items():
                assert (path / name).read_text(encoding="utf-8") == content
            assert git(path, "for-each-ref", "refs/memsync/candidates") == ""

    def converge(self) -> None:
        for member in MEMBERS:
            self.commit_edits(member)
        for member in (*MEMBERS, *MEMBERS):
            assert self._sync(member) in ("current", "synced", "pushed")
        heads = {git(p, "rev-parse", "HEAD") for p in self.paths.values()}
        assert heads == {git(self.upstream, "rev-parse", "main")}


class ConvergingInterleavings(Interleavings):
    def teardown(self) -> None:
        try:
            self.converge()
        finally:
            super().teardown()


# The profile's PROCESS_EXAMPLES runs of up to twelve steps, as three tests of a third each:
# in one test they took 20-40 s of a single worker, which a run's end waited for. Each part
# draws its own runs (derandomized by the class, whose name differs).
PARTS = 3
PART = settings(
    PROCESS_EXAMPLES,
    max_examples=max(1, PROCESS_EXAMPLES.max_examples // PARTS),
    stateful_step_count=12,
)


class InterleavingsFirst(ConvergingInterleavings):
    """The first third of the runs."""


class InterleavingsSecond(ConvergingInterleavings):
    """The second third of the runs."""


class InterleavingsThird(ConvergingInterleavings):
    """The last third of the runs."""


InterleavingsFirst.TestCase.settings = PART
InterleavingsSecond.TestCase.settings = PART
InterleavingsThird.TestCase.settings = PART
test_interleavings_first = pytest.mark.slow(InterleavingsFirst.TestCase)
test_interleavings_second = pytest.mark.slow(InterleavingsSecond.TestCase)
test_interleavings_third = pytest.mark.slow(InterleavingsThird.TestCase)


def test_a_diverged_sync_keeps_the_local_commit() -> None:
    """The shape a random run may miss: commit locally while the upstream moves, then sync."""
    machine = ConvergingInterleavings()
    try:
        machine.edit("alice", "a local note")
        machine.commit_edits("alice")
        machine.outsider_pushes()
        machine.sync("alice")
        machine.nothing_lost_nothing_left()
        machine.converge()
        machine.nothing_lost_nothing_left()
    finally:
        Interleavings.teardown(machine)
