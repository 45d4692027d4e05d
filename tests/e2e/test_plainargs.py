"""`memsync status` and `sync-now` without click (issue 18, items 1 and 2): their plain
forms print, byte for byte and exit code for exit code, what the click commands print,
errors included, and load neither click nor pydantic."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import Team
from tests.e2e.daemons import write_config
from tests.e2e.test_helpmemo import closed_pipe
from tests.e2e.test_startup import COLD_SYNC_HEAVY, STATUS_HEAVY, probe
from tests.helpers import GIT_ENV, commit, git, push

# The click path itself: `cli.main`, which `__main__` skips for the plain forms.
THROUGH_CLICK = "import sys; from memsync.cli.group import main; main()"


def run(argv: list[str], env: dict[str, str], *, click: bool) -> tuple[int, str, str]:
    entry = ["-c", THROUGH_CLICK] if click else ["-m", "memsync"]
    done = subprocess.run(
        [sys.executable, *entry, *argv],
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV, **env},
        timeout=120,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def same_as_click(argv: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    plain = run(argv, env, click=False)
    assert plain == run(argv, env, click=True), argv
    return plain


def test_the_plain_forms_print_what_click_prints(team: Team, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    (team.bob.path / "MEMORY_local.md").write_text("# Local\n\n\x1b[31mred\x1b[0m\n")
    forms = (
        ["--config", str(config), "status"],
        ["--config", str(config), "status", "--json"],
        [f"--config={config}", "status"],
        [f"--config={config}", "status", "--json"],
    )
    for _ in range(2):  # the full configuration load, then the settings memo
        for argv in forms:
            code, out, err = same_as_click(argv, env)
            assert (code, err) == (0, ""), err
            assert "bob" in out
    # The untracked MEMORY_local.md is judged by the path rules: those (and the typing they
    # import) load here, nothing else.
    rules = (
        "memsync.validators.paths",
        "memsync.validators.problems",
        "memsync.validators.tree",
        "typing",
    )
    untracked_heavy = tuple(h for h in STATUS_HEAVY if h not in rules)
    for argv in forms:
        code, heavy, _, err = probe(*argv, env=env, heavy=untracked_heavy)
        assert (code, heavy, err) == (0, [], ""), argv
    by_env = same_as_click(["status"], {**env, "MEMSYNC_CONFIG": str(config)})
    assert by_env == same_as_click(["--config", str(config), "status"], env)
    for argv in forms:  # nobody reads: click's main exits 1 quietly, and so do they
        full = {**env, **GIT_ENV}
        plain = closed_pipe(argv, full, ["-m", "memsync"])
        assert plain == closed_pipe(argv, full, ["-c", THROUGH_CLICK]) == (1, "")


def test_escape_sequences_are_stripped_as_click_strips_them(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = tmp_path / "config.yaml"
    config.write_text(
        f"version: 1\nstate_dir: {tmp_path / 'state'}\n"
        f'roots:\n  odd:\n    path: "{tmp_path}/\\e[31mred\\e[0m"\n    watch: false\n'
    )
    for _ in range(2):
        code, out, err = same_as_click(["--config", str(config), "status"], env)
        assert (code, err) == (0, ""), err
        assert "red is not the top level of a Git work tree" in out
        assert "\x1b" not in out  # not a terminal: click strips them
        code, out, _ = same_as_click(["--config", str(config), "status", "--json"], env)
        assert "\\u001b[31mred" in out


@pytest.mark.parametrize("as_json", [False, True])
def test_the_plain_forms_fail_as_click_fails(tmp_path: Path, as_json: bool) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    tail = ["status", "--json"] if as_json else ["status"]
    broken = tmp_path / "broken.yaml"
    broken.write_text("version: 1\nbogus: 1\n")
    (tmp_path / "file").write_text("not a directory")
    blocked = tmp_path / "blocked.yaml"
    blocked.write_text(
        f"version: 1\nstate_dir: {tmp_path / 'file' / 'state'}\n"
        f"roots:\n  mem:\n    path: {tmp_path}\n    watch: false\n"
    )
    cases = {
        "no config anywhere": tail,
        "missing file": ["--config", str(tmp_path / "missing.yaml"), *tail],
        "a directory": ["--config", str(tmp_path), *tail],
        "broken": ["--config", str(broken), *tail],
        "unusable state dir": [f"--config={blocked}", *tail],
    }
    for name, argv in cases.items():
        code, out, err = same_as_click(argv, env)
        assert code == 2, (name, err)
        assert err.startswith("memsync: "), (name, err)
        assert ('"error"' in out) is as_json, (name, out)


def timeless(text: str) -> str:
    """A cycle's duration moves between two runs; nothing else may."""
    return re.sub(r'"duration_ms":\d+', '"duration_ms":0', re.sub(r"\[\d+ ms\]", "[0 ms]", text))


def test_sync_now_plain_forms_do_what_click_does(team: Team, tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    config = write_config(tmp_path, {"bob": {"path": team.bob.path}})
    for turn, click in enumerate((False, True, False, True)):  # each admits a commit
        commit(team.alice.path, {"MEMORY_plain.md": f"# Plain\n\nturn {turn}\n"}, "plain")
        push(team.alice.path)
        code, out, err = run(["--config", str(config), "sync-now"], env, click=click)
        assert (code, err) == (0, ""), err
        assert out.split()[:2] == ["bob", "synced"], out
        assert git(team.bob.path, "rev-parse", "HEAD") == git(team.upstream, "rev-parse", "main")
    forms = (
        ["--config", str(config), "sync-now"],
        [f"--config={config}", "sync-now", "bob"],
        ["--config", str(config), "sync-now", "--json"],
        ["--config", str(config), "sync-now", "--dry-run", "bob", "--no-push"],
        ["--config", str(config), "sync-now", "--accept-rewrite", "--json"],
        ["--config", str(config), "sync-now", "nosuch"],
        ["--config", str(config), "sync-now", "bob", "nosuch", "--json"],
        ["--config", str(tmp_path / "missing.yaml"), "sync-now", "--json"],
    )
    for argv in forms:
        plain = run(argv, env, click=False)
        through = run(argv, env, click=True)
        assert (plain[0], timeless(plain[1]), plain[2]) == (
            through[0],
            timeless(through[1]),
            through[2],
        ), argv
        assert plain[0] in (0, 2), plain
    for argv in forms[:2]:
        code, heavy, _, err = probe(*argv, env=env, heavy=COLD_SYNC_HEAVY)
        assert (code, heavy, err) == (0, [], ""), argv
