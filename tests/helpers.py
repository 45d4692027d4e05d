"""Test helpers: commits, snapshots, killing a run mid-role, metrics pages; on the raw git,
the git environment and the polling of `tests/kit.py` (which bench shares)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.kit import GIT_ENV, git, wait_for


def is_ancestor(cwd: Path, ancestor: str, descendant: str) -> bool:
    """`git merge-base --is-ancestor` by its exit status (it prints nothing either way)."""
    env = {**os.environ, **GIT_ENV}
    done = subprocess.run(
        ["git", "merge-base", "--is-ancestor", ancestor, descendant],
        cwd=cwd,
        env=env,
        capture_output=True,
        check=False,
    )
    if done.returncode not in (0, 1):
        raise AssertionError(f"git merge-base failed: {done.stderr.decode()}")
    return done.returncode == 0


def write(root: Path, files: Mapping[str, bytes | str | None]) -> None:
    for rel, data in files.items():
        target = root / rel
        if data is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data.encode() if isinstance(data, str) else data)


def stage(root: Path, files: Mapping[str, bytes | str | None], *, force_add: bool = True) -> None:
    """Write `files` into `root` (None removes one) and stage exactly them."""
    write(root, files)
    gone = [rel for rel, data in files.items() if data is None]
    kept = [rel for rel, data in files.items() if data is not None]
    # One git process each for the removals and the additions (a test's fixture may stage
    # hundreds of files: a process per file was a good part of the suite's git time).
    if gone:
        git(root, "rm", "-q", "--cached", "--ignore-unmatch", "--", *gone)
    if kept:
        git(root, "add", *(["-f"] if force_add else []), "--", *kept)


def _symbolic_head(root: Path) -> str | None:
    """What `.git/HEAD` names (`ref: refs/heads/main` -> `refs/heads/main`); None when it
    is anything else (detached, a linked work tree, another ref store)."""
    try:
        text = (root / ".git" / "HEAD").read_text()
    except OSError:
        return None
    return text[5:].strip() if text.startswith("ref: refs/") else None


def head_of(root: Path) -> str:
    """`git rev-parse HEAD`, read from the branch's loose ref file when there is one (as
    right after a commit): the tests ask this after most commits, a git process each."""
    branch = _symbolic_head(root)
    if branch is not None:
        with contextlib.suppress(OSError):
            oid = (root / ".git" / branch).read_text().strip()
            if len(oid) in (40, 64) and all(c in "0123456789abcdef" for c in oid):
                return oid
    return git(root, "rev-parse", "HEAD")


def commit(
    root: Path,
    files: Mapping[str, bytes | str | None],
    message: str = "edit",
    *,
    force_add: bool = True,
) -> str:
    stage(root, files, force_add=force_add)
    git(root, "commit", "-q", "-m", message)
    return head_of(root)


def push(root: Path, ref: str = "HEAD:refs/heads/main", force: bool = False) -> None:
    git(root, "push", "-q", *(["--force"] if force else []), "origin", ref)


@dataclass(frozen=True)
class Snapshot:
    head: str
    branch: str
    index: str
    files: dict[str, str]
    status: str


def snapshot(root: Path) -> Snapshot:
    """HEAD, index and every work-tree file's bytes (hashed), for byte-identity checks."""
    files: dict[str, str] = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel == ".git" or rel.startswith(".git/") or (path.is_dir() and not path.is_symlink()):
            continue
        data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        files[rel] = hashlib.sha256(data).hexdigest()
    index = hashlib.sha256((root / ".git" / "index").read_bytes()).hexdigest()
    return Snapshot(
        head=head_of(root),
        branch=_symbolic_head(root) or git(root, "symbolic-ref", "HEAD"),
        index=index,
        files=files,
        status=git(root, "status", "--porcelain", "--untracked-files=all"),
    )


def kill_while_agent_holds(
    memsync_args: list[str], pidfile: Path, *, end_agent: bool = True
) -> int:
    """Run `memsync *memsync_args` until its agent script has written its pid to `pidfile`
    (and blocks, e.g. on a fifo), SIGKILL memsync there, then end the orphaned agent by its
    own pid and its process group (what it was blocked in, `cat FIFO`, is its child and would
    outlive it). Returns the agent's pid (gone or a zombie when this returns)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "memsync", *memsync_args],
        env={**os.environ, **GIT_ENV, "MEMSYNC_FAULT": ""},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    agent = 0
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", 60, "the agent")
        agent = int(pidfile.read_text())
        proc.send_signal(signal.SIGKILL)
        assert proc.wait(timeout=30) == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if agent and end_agent:  # the agent was left blocked: end its whole group, then it
            with contextlib.suppress(ProcessLookupError):
                group = os.getpgid(agent)
                if group != os.getpgrp():  # roles run in a session of their own; never ours
                    os.killpg(group, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.kill(agent, signal.SIGKILL)
    return agent


def promtool_check(text: str) -> None:
    """`promtool check metrics` (format and lint) on a `/metrics` page; the test skips only
    when promtool is absent (Debian: `apt-get install prometheus`)."""
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.skip("promtool is not installed (Debian: apt-get install prometheus)")
    done = subprocess.run(
        [promtool, "check", "metrics"],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def metric_samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of a Prometheus text page, keyed by (name, labels)."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def metric(text: str, name: str, **labels: str) -> float | None:
    """One sample's value (None when the page has no such series)."""
    return metric_samples(text).get((name, frozenset(labels.items())))
