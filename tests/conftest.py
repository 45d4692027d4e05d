"""Shared fixtures: a team upstream (a real bare repository) and two memory roots.

Scenes that take many processes to make are built once per session (per xdist worker) and
copied into each test's own directory with `copy_built`, so no test sees another's leftovers.
"""

from __future__ import annotations

import atexit
import gc
import itertools
import os
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from memsync.config.model import RootSettings
from memsync.cycles.repairer import make_repairer
from memsync.roots.create import init_root
from memsync.roots.cycle import SyncOptions, sync_root
from memsync.roots.result import SyncResult
from tests import leftovers
from tests.helpers import git
from tests.kit import settings_for

# Property tests run real parsers on shared, noisy machines: no per-example deadline.
#
# The profile decides what property tests cost; tests never set `max_examples` themselves.
# Three profiles, chosen by MEMSYNC_HYPOTHESIS:
# - `dev` (unset: plain pytest, `make test-fast`): the inner loop. Few examples, fresh ones
#   each run, so many quick runs still explore; a failure is saved in `.hypothesis/` and
#   replayed first by the next run, and its reproduce blob is printed.
# - `ci` (`.ci/run` and therefore CI's `make test`): the thorough gate. More examples,
#   derandomized, so a landing never depends on a lucky draw and every run replays the same.
# - `explore`: many fresh examples, for a deliberate hunt (before a release, after changing
#   a parser); as slow as it sounds.
# A property whose every example runs real processes (git, a server) takes PROCESS_EXAMPLES.
settings.register_profile(
    "dev",
    max_examples=10,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "ci", parent=settings.get_profile("dev"), max_examples=100, derandomize=True
)
settings.register_profile("explore", parent=settings.get_profile("dev"), max_examples=1000)
_PROCESS_EXAMPLES = {"dev": 3, "ci": 12, "explore": 50}
PROFILE = os.environ.get("MEMSYNC_HYPOTHESIS", "dev")
if PROFILE not in _PROCESS_EXAMPLES:
    raise pytest.UsageError(
        f"MEMSYNC_HYPOTHESIS={PROFILE!r}: expected one of {', '.join(_PROCESS_EXAMPLES)}"
    )
settings.load_profile(PROFILE)
PROCESS_EXAMPLES = settings(max_examples=_PROCESS_EXAMPLES[PROFILE])


# Every test runs with a home and XDG directories of its own (issue 20, item 10): memsync
# resolves its memos, caches, state and socket from them, and a test must never write the
# user's real ~/.cache or ~/.local/state, nor read their ~/.config. The whole process gets one
# first (session fixtures, import-time code), then each test its own.
ISOLATED_DIRS = {
    "HOME": "home",
    "XDG_CONFIG_HOME": "config",
    "XDG_CACHE_HOME": "cache",
    "XDG_STATE_HOME": "state",
    "XDG_DATA_HOME": "data",
    "XDG_RUNTIME_DIR": "run",
}


def isolate_home(base: Path) -> dict[str, str]:
    """Point HOME and the XDG directories into `base` (created 0700); the values set."""
    values = {}
    for var, name in ISOLATED_DIRS.items():
        path = base / name
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
        values[var] = str(path)
    os.environ.update(values)
    return values


def pytest_configure(config: pytest.Config) -> None:
    """The process's own home, before any fixture or test runs (in pytest only: modules that
    import this one, like a test's launcher, keep the environment they were given)."""
    home = Path(tempfile.mkdtemp(prefix="memsync-tests-home-"))
    isolate_home(home)
    atexit.register(shutil.rmtree, home, ignore_errors=True)
    _SUBREAPER.append(leftovers.become_subreaper())
    # A test process holds a large heap that lives as long as it does (the memsync modules,
    # Hypothesis' state, pytest's items): each full collection walked all of it, ~0.2 s
    # apiece, 10 of tests/unit's ~80 CPU-seconds. Full collections come 10x less often here;
    # young ones as always. Only this process's collector: the memsync processes the tests
    # start keep theirs.
    young, middle, _old = gc.get_threshold()
    gc.set_threshold(young, middle, FULL_GC_EVERY)


FULL_GC_EVERY = 100  # middle-generation collections per full one (Python's default: 10)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Freeze what collection made (the test modules, memsync's modules, every item and
    fixture definition: most of the heap, alive until the process ends) so the collector
    never walks it again: each full collection of a worker walked it all, ~0.25 s apiece."""
    gc.collect()
    gc.freeze()


_HOME_NUMBERS = itertools.count()
# Homes a finished test left exactly as it got them (empty, mode 0700), given to the next
# test: making one is 7 mkdirs, ~2 ms of CPU on this machine's ext4, and most tests never
# write theirs (over the suite's ~2,700 tests, ~5 s of CPU).
_UNTOUCHED_HOMES: list[Path] = []


@pytest.fixture(scope="session")
def homes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where each test's home is made: `tmp_path_factory.mktemp` per test lists the whole
    base temp dir (a thousand entries by the end of a worker's run) and relinks a symlink."""
    return tmp_path_factory.mktemp("homes")


def _new_home(homes: Path) -> Path:
    base = homes / str(next(_HOME_NUMBERS))
    base.mkdir()
    for name in ISOLATED_DIRS.values():
        (base / name).mkdir(mode=0o700)
    return base


def untouched(base: Path) -> bool:
    """Whether the home `base` holds exactly its empty directories, each a real directory
    of mode 0700 (what `_new_home` made): nothing a test wrote, moved or chmodded."""
    try:
        if sorted(os.listdir(base)) != sorted(ISOLATED_DIRS.values()):
            return False
        for name in ISOLATED_DIRS.values():
            info = os.lstat(base / name)
            if not stat.S_ISDIR(info.st_mode) or stat.S_IMODE(info.st_mode) != 0o700:
                return False
            if os.listdir(base / name):
                return False
    except OSError:
        return False
    return True


@pytest.fixture(autouse=True)
def isolated_home(homes: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """This test's own HOME and XDG directories, outside its tmp_path (which it may list):
    new, or one an earlier test left untouched (no test sees what another wrote)."""
    base = _UNTOUCHED_HOMES.pop() if _UNTOUCHED_HOMES else _new_home(homes)
    for var, name in ISOLATED_DIRS.items():
        monkeypatch.setenv(var, str(base / name))
    yield {var: os.environ[var] for var in ISOLATED_DIRS}
    # After `ends_what_it_started` (which asks for this fixture): no process of the test's
    # is left to write here.
    if untouched(base):
        _UNTOUCHED_HOMES.append(base)


# Every test ends what it started (issue 20, item 11): see tests/leftovers.py.
_SUBREAPER: list[bool] = []  # set in pytest_configure: importing this module changes nothing


@pytest.fixture(autouse=True)
def ends_what_it_started(isolated_home: dict[str, str]) -> Iterator[None]:
    """Fail the test whose processes outlive it (they are killed first, with their group)."""
    if _SUBREAPER[-1:] != [True]:
        yield
        return
    before = set(leftovers.children())
    yield
    left = leftovers.settle(before)
    if left:
        named = "; ".join(f"pid {c.pid} ({c.command})" for c in left)
        pytest.fail(f"processes outlived the test and were killed: {named}", pytrace=False)


@dataclass
class Member:
    name: str
    path: Path
    settings: RootSettings
    state_dir: Path

    def sync(self, **options: object) -> SyncResult:
        options.setdefault("repair", make_repairer)  # as every product caller passes it
        return sync_root(self.settings, self.state_dir, SyncOptions(**options))  # type: ignore[arg-type]


@dataclass
class Team:
    upstream: Path
    alice: Member
    bob: Member


def _hook_samples(directory: str, names: list[str]) -> list[str]:
    """`shutil.copytree`'s ignore: the `*.sample` files of a `hooks` directory."""
    if os.path.basename(directory) != "hooks":
        return []
    return [name for name in names if name.endswith(".sample")]


def copy_built(built: Path, dest: Path, names: Iterable[str]) -> None:
    """Copy the entries `names` of a scene built once per session into `dest`.

    A built scene names its own location only in Git configs (an upstream's path); those are
    rewritten to the copy. Each work tree's index is refreshed, since copied files have new
    inodes and times and plumbing that does not refresh would see them as changed. The
    example hooks `git init` puts in every repository (`hooks/*.sample`, which git never
    runs) are not copied: they were a third of the files of a copied team.
    """
    for name in names:
        if (built / name).is_dir():
            shutil.copytree(built / name, dest / name, symlinks=True, ignore=_hook_samples)
        else:
            shutil.copy2(built / name, dest / name)
    for name in names:
        git_dir = dest / name / ".git"
        config = (git_dir if git_dir.is_dir() else dest / name) / "config"
        if config.is_file():
            text = config.read_text()
            config.write_text(text.replace(f"{built}{os.sep}", f"{dest}{os.sep}"))
        if git_dir.is_dir():
            git(dest / name, "update-index", "-q", "--refresh", check=False)


@pytest.fixture(scope="session")
def built_team(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The upstream `team.git` and the roots `alice` and `bob`, made once and only copied."""
    base = tmp_path_factory.mktemp("team")
    upstream = base / "team.git"
    git(base, "init", "-q", "--bare", "-b", "main", str(upstream))
    for name in ("alice", "bob"):
        path = base / name
        init_root(path, upstream=str(upstream))
        git(path, "config", "user.name", name.title())
        git(path, "config", "user.email", f"{name}@example.invalid")
    return base


@pytest.fixture
def team(built_team: Path, tmp_path: Path) -> Team:
    copy_built(built_team, tmp_path, ("team.git", "alice", "bob"))
    members = []
    for name in ("alice", "bob"):
        path = tmp_path / name
        state = tmp_path / f"state-{name}"
        members.append(Member(name, path, settings_for(name, path), state))
    return Team(tmp_path / "team.git", members[0], members[1])
