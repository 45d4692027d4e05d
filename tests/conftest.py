"""Shared fixtures: a team upstream (a real bare repository) and two memory roots."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from memsync.config.model import RootSettings
from memsync.roots.create import init_root
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.roots.result import SyncResult
from tests.helpers import git, settings_for

# Property tests run real parsers on shared, noisy machines: no per-example deadline. CI
# (`.ci/run` sets MEMSYNC_HYPOTHESIS=ci) replays the same examples every run, so a landing
# never depends on a lucky draw; local runs keep exploring new ones.
#
# The profile decides what property tests cost; tests never set `max_examples` themselves.
# `dev` (the inner loop) draws fewer, fresh examples each run; `ci` replays more, fixed ones.
# A property whose every example runs real processes (git, a server) takes PROCESS_EXAMPLES.
settings.register_profile(
    "dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "ci", parent=settings.get_profile("dev"), max_examples=100, derandomize=True, print_blob=True
)
_PROCESS_EXAMPLES = {"dev": 6, "ci": 12}
PROFILE = os.environ.get("MEMSYNC_HYPOTHESIS", "dev")
settings.load_profile(PROFILE)
PROCESS_EXAMPLES = settings(max_examples=_PROCESS_EXAMPLES[PROFILE])


@dataclass
class Member:
    name: str
    path: Path
    settings: RootSettings
    state_dir: Path

    def sync(self, **options: object) -> SyncResult:
        return sync_root(self.settings, self.state_dir, SyncOptions(**options))  # type: ignore[arg-type]


@dataclass
class Team:
    upstream: Path
    alice: Member
    bob: Member


@pytest.fixture
def team(tmp_path: Path) -> Team:
    upstream = tmp_path / "team.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(upstream))
    members = []
    for name in ("alice", "bob"):
        path = tmp_path / name
        init_root(path, upstream=str(upstream))
        git(path, "config", "user.name", name.title())
        git(path, "config", "user.email", f"{name}@example.invalid")
        state = tmp_path / f"state-{name}"
        members.append(Member(name, path, settings_for(name, path), state))
    return Team(upstream, members[0], members[1])
