"""The admission transaction on a real root: any kind of operation, keyed, settled."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from memsync.roots import journal
from memsync.roots.admit import Admission, Admitter, Published
from memsync.roots.candidate import MergeFailed
from memsync.roots.checks import Checks
from memsync.roots.layout import CANDIDATE_REFS, RootLayout
from memsync.roots.refused import AlreadyDone, DryRun, Invalid
from memsync.transports.git import Git
from memsync.transports.gitrefsession import RefSession
from memsync.validators.policy import SyncPolicy
from memsync.validators.problems import Problem
from tests.conftest import Team
from tests.helpers import commit, git, snapshot
from tests.integration.test_git_refs import _runs, _spy

CANDIDATES = CANDIDATE_REFS.rstrip("/")


def _made_aside(root: Path, files: dict[str, str]) -> tuple[str, str]:
    """(start, candidate): a commit made on top of HEAD, with HEAD left where it was."""
    start = git(root, "rev-parse", "HEAD")
    candidate = commit(root, files, "candidate")
    git(root, "reset", "-q", "--hard", start)
    return start, candidate


def _admitter(team: Team) -> tuple[Admitter, journal.Journal]:
    layout = RootLayout.for_root(team.bob.state_dir, "bob")
    records = journal.Journal(layout.journal_dir)
    return Admitter(Git(team.bob.path), records, layout, SyncPolicy()), records


def test_any_kind_is_admitted_once_per_key(team: Team) -> None:
    start, candidate = _made_aside(team.bob.path, {"insight_logs/2026.md": "# Insight\n"})
    admitter, records = _admitter(team)
    staged: list[str] = []

    def stage(op: journal.Operation, worktree: Path) -> str:
        staged.append(op.id)
        return candidate

    key = journal.operation_key("insight", start, None, "turn-1")
    admission = Admission("insight", "main", start, key=key, once=True)
    first = admitter.admit(admission, stage, Checks(grants="insight"))
    assert isinstance(first, Published) and first.files == ("insight_logs/2026.md",)
    assert git(team.bob.path, "rev-parse", "HEAD") == candidate
    assert (team.bob.path / "insight_logs" / "2026.md").read_text() == "# Insight\n"
    assert records.done(key) == first.operation_id
    # After a crash the caller asks again: the settled operation is not run again.
    again = admitter.admit(admission, stage, Checks(grants="insight"))
    assert isinstance(again, AlreadyDone) and again.operation_id == first.operation_id
    assert staged == [first.operation_id]
    assert git(team.bob.path, "for-each-ref", "refs/memsync/candidates") == ""


def test_a_dry_run_does_not_claim_the_key(team: Team) -> None:
    start, candidate = _made_aside(team.bob.path, {"MEMORY_d.md": "# D\n"})
    admitter, records = _admitter(team)
    admission = Admission("prune", "main", start, key="k1", once=True)
    before = snapshot(team.bob.path)
    dry = admitter.admit(
        admission,
        lambda op, wt: candidate,
        Checks(grants="prune"),
        dry_run=True,
    )
    assert isinstance(dry, DryRun) and snapshot(team.bob.path) == before
    assert records.done("k1") is None


def test_an_invalid_candidate_settles_failed_and_leaves_the_root(team: Team) -> None:
    start, candidate = _made_aside(team.bob.path, {"MEMORY_x.md": "# X\n"})
    admitter, records = _admitter(team)
    before = snapshot(team.bob.path)
    outcome = admitter.admit(  # the transaction runs the gate itself: the role's grants
        Admission("insight", "main", start, key="k2", once=True),
        lambda op, wt: candidate,
        Checks(grants="insight"),
    )
    assert isinstance(outcome, Invalid)
    assert [(p.code, p.path) for p in outcome.report.problems] == [
        ("grant-violation", "MEMORY_x.md")
    ]
    assert snapshot(team.bob.path) == before
    assert records.done("k2") is None and records.unsettled() == []
    settled = records.load(outcome.operation_id)
    assert settled is not None and settled.phase == journal.FAILED and settled.kind == "insight"


def test_an_exception_while_staging_settles_the_record(team: Team) -> None:
    admitter, records = _admitter(team)
    start = git(team.bob.path, "rev-parse", "HEAD")

    def explode(op: journal.Operation, worktree: Path) -> str | MergeFailed:
        raise RuntimeError("the executor crashed")

    with pytest.raises(RuntimeError):
        admitter.admit(Admission("repair", "main", start), explode, Checks(grants="repair"))
    assert records.unsettled() == []
    assert git(team.bob.path, "for-each-ref", "refs/memsync/candidates") == ""


def test_the_transaction_always_checks_the_candidates_tree(team: Team) -> None:
    """Checks that ask for no tree (the incoming history check before staging) still get
    the candidate's tree checked when handed to the transaction: nothing is published
    unchecked."""
    start = git(team.bob.path, "rev-parse", "HEAD")
    (team.bob.path / "MEMORY_bad.md").write_bytes(b"# Bad\n\n\xff\xfe not utf-8\n")
    git(team.bob.path, "add", "MEMORY_bad.md")
    git(team.bob.path, "commit", "-q", "-m", "bad")
    candidate = git(team.bob.path, "rev-parse", "HEAD")
    git(team.bob.path, "reset", "-q", "--hard", start)
    admitter, _records = _admitter(team)
    before = snapshot(team.bob.path)
    outcome = admitter.admit(
        Admission("sync", "main", start, key="k3"),
        lambda op, wt: candidate,
        Checks(history=False, tree="none"),
    )
    assert isinstance(outcome, Invalid)
    assert [(p.code, p.path) for p in outcome.report.problems] == [("not-utf8", "MEMORY_bad.md")]
    assert snapshot(team.bob.path) == before


def _admitter_running(team: Team, folder: Path) -> tuple[Admitter, journal.Journal]:
    """An admitter (and its journal) whose box finds its `git` in `folder` first."""
    layout = RootLayout.for_root(team.bob.state_dir, "bob")
    records = journal.Journal(layout.journal_dir)
    box = Git(team.bob.path, env={"PATH": f"{folder}:{os.environ['PATH']}"})
    return Admitter(box, records, layout, SyncPolicy()), records


def _spied(team: Team, tmp_path: Path) -> tuple[Admitter, Path]:
    """An admitter whose box runs a `git` that logs each run (`test_git_refs._spy`)."""
    folder, log = _spy(tmp_path / "spy")
    return _admitter_running(team, folder)[0], log


def _published_pinned(
    team: Team, admitter: Admitter, start: str, candidate: str, checks: Checks
) -> tuple[Published, list[str]]:
    """Admit `candidate` on `start`: it must be published. Returns the publication and the
    candidate refs just before it (what the publication relies on)."""
    seen: list[str] = []

    def pinned() -> None:
        seen.append(git(team.bob.path, "for-each-ref", "--format=%(objectname)", CANDIDATES))

    outcome = admitter.admit(
        Admission("insight", "main", start), lambda op, wt: candidate, checks, before_publish=pinned
    )
    assert isinstance(outcome, Published), outcome
    assert git(team.bob.path, "rev-parse", "HEAD") == candidate
    assert git(team.bob.path, "for-each-ref", CANDIDATES) == ""
    return outcome, seen


def _git_wrapper(folder: Path, before_ref_session: str) -> Path:
    """`folder`, holding a `git` that runs the shell lines `before_ref_session` before the
    admission's ref session (`update-ref ... --stdin`) and then the real git; every other
    run is the real git's at once."""
    real_git = shutil.which("git")
    assert real_git is not None
    folder.mkdir()
    (folder / "git").write_text(
        "#!/bin/sh\n"
        'case " $* " in *" update-ref "*" --stdin "*)\n'
        f"{before_ref_session}"
        "esac\n"
        f'exec {real_git} "$@"\n'
    )
    (folder / "git").chmod(0o755)
    return folder


def test_the_candidate_ref_and_the_branch_move_share_one_update_ref(
    team: Team, tmp_path: Path
) -> None:
    """Pinning the candidate and publishing it are two of git's transactions in one
    `update-ref --stdin`: the candidate ref stands while the candidate is checked, the
    branch moves by compare-and-swap with the publication's reflog message, and the
    candidate ref is gone with it."""
    start, candidate = _made_aside(team.bob.path, {"insight_logs/s.md": "# S\n"})
    admitter, log = _spied(team, tmp_path)
    checks = Checks(grants="insight")
    outcome, seen = _published_pinned(team, admitter, start, candidate, checks)
    assert seen == [candidate]
    message = git(team.bob.path, "reflog", "-1", "--format=%gs", "main")
    assert message == f"memsync: publish {outcome.operation_id}"
    assert _runs(log).count("update-ref") == 1
    assert admitter.git.ref_session is None


def test_a_ref_session_that_is_gone_publishes_by_a_process_of_its_own(
    team: Team, tmp_path: Path
) -> None:
    """Whatever ends the session's git between the two transactions, the branch still
    moves (compare-and-swap) and the candidate ref goes, as before sessions."""
    start, candidate = _made_aside(team.bob.path, {"insight_logs/t.md": "# T\n"})
    admitter, log = _spied(team, tmp_path)

    def end_the_session() -> None:
        session = admitter.git.ref_session
        assert session is not None
        session.close()  # its git is killed and reaped: the next transaction cannot use it

    outcome = admitter.admit(
        Admission("insight", "main", start),
        lambda op, wt: candidate,
        Checks(grants="insight"),
        before_publish=end_the_session,
    )
    assert isinstance(outcome, Published), outcome
    assert git(team.bob.path, "rev-parse", "HEAD") == candidate
    assert git(team.bob.path, "for-each-ref", CANDIDATES) == ""
    assert _runs(log).count("update-ref") == 2


def _waiting_git(tmp_path: Path, mark: Path) -> tuple[Path, Path]:
    """A directory holding a `git` whose `update-ref --stdin` (the admission's ref session)
    starts only once `mark` exists (polled, for 20 s at most), and a log that says whether
    it saw it (`seen`) or gave up (`late`); every other run is the real git's at once."""
    log = tmp_path / "waited.log"
    wait = (
        "  n=0\n"
        f'  while [ ! -e "{mark}" ] && [ "$n" -lt 400 ]; do sleep 0.05; n=$((n + 1)); done\n'
        f'  if [ -e "{mark}" ]; then echo seen >> "{log}"; else echo late >> "{log}"; fi\n'
    )
    return _git_wrapper(tmp_path / "waiting", wait), log


def test_the_candidate_is_checked_while_its_pin_commits(team: Team, tmp_path: Path) -> None:
    """Issue 18: the candidate's pin (its candidate ref, the ref session's first transaction)
    is handed to git, and the candidate is checked while git starts and commits it; its
    answer is waited for before anything relies on the ref. A git that takes the pin only
    once the checks ran is not waited for in vain, and the candidate is pinned when it is
    published."""
    start, candidate = _made_aside(team.bob.path, {"insight_logs/p.md": "# P\n"})
    mark = tmp_path / "checked"
    folder, log = _waiting_git(tmp_path, mark)
    admitter, _records = _admitter_running(team, folder)

    def checked(_start: str, _candidate: str) -> tuple[Problem, ...]:
        mark.touch()  # the checks run (a rule of the caller's own is one of them)
        return ()

    checks = Checks(grants="insight", also=checked)
    assert _published_pinned(team, admitter, start, candidate, checks)[1] == [candidate]
    assert log.read_text() == "seen\n"  # the pin's git ran while the candidate was checked


def test_checks_that_raise_while_the_pin_commits_leave_no_candidate_ref(
    team: Team, tmp_path: Path
) -> None:
    """The session is ended only once git answered the pin it was handed (it holds a ref
    lock until then): checks that raise meanwhile leave no candidate ref, no lock and an
    open record settled. The session's git takes the pin only once the checks ran (and
    raised): killed instead of waited for, it would never say it saw them."""
    start, candidate = _made_aside(team.bob.path, {"insight_logs/q.md": "# Q\n"})
    mark = tmp_path / "checked"
    folder, log = _waiting_git(tmp_path, mark)
    admitter, records = _admitter_running(team, folder)

    def explode(_start: str, _candidate: str) -> tuple[Problem, ...]:
        mark.touch()
        raise RuntimeError("a rule of the caller's own failed")

    with pytest.raises(RuntimeError):
        admitter.admit(
            Admission("insight", "main", start),
            lambda op, wt: candidate,
            Checks(grants="insight", also=explode),
        )
    assert log.read_text() == "seen\n"  # git ran to its answer: waited for, not killed
    assert records.unsettled() == []
    assert git(team.bob.path, "for-each-ref", CANDIDATES) == ""
    assert not list((team.bob.path / ".git" / "refs").rglob("*.lock"))
    assert git(team.bob.path, "rev-parse", "HEAD") == start


def test_a_pin_the_session_cannot_commit_is_made_by_a_process_of_its_own(
    team: Team, tmp_path: Path
) -> None:
    """A ref session whose git takes the pin and ends before it answers (here: the
    session's first git reads the transaction's first line, then exits): the pin is made
    by a process of its own, as before sessions, and the candidate is published (the
    branch move too: the session is broken). Reading first makes the hand-over succeed, so
    it is the answer's fallback that is tested, not the hand-over's."""
    start, candidate = _made_aside(team.bob.path, {"insight_logs/r.md": "# R\n"})
    quit_once = tmp_path / "quit"
    quits = (
        f'  if [ ! -e "{quit_once}" ]; then\n'
        f'    touch "{quit_once}"; read -r _line; exit 97\n'
        "  fi ;;\n"
    )
    admitter, _records = _admitter_running(team, _git_wrapper(tmp_path / "quitting", quits))
    checks = Checks(grants="insight")
    assert _published_pinned(team, admitter, start, candidate, checks)[1] == [candidate]


def test_a_ref_session_ends_only_once_git_answered_what_it_was_handed(team: Team) -> None:
    """`close` with a transaction handed to git (`send`) and its answer not read yet waits
    for the answer first: git is never killed inside a transaction (with a ref locked), and
    the transaction is committed as git says."""
    start = git(team.bob.path, "rev-parse", "HEAD")
    session = RefSession(Git(team.bob.path), "memsync: a test")
    assert session.send([f"update {CANDIDATES}/handed {start}"])
    session.close()
    assert git(team.bob.path, "for-each-ref", "--format=%(objectname)", CANDIDATES) == start
    assert not list((team.bob.path / ".git" / "refs").rglob("*.lock"))
    assert not session.answered()  # (nothing is left to answer)
