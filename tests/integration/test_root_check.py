"""`roots.check.check_root` is `memsync validate` (issue 20, item 6): the command only parses
and renders, so the result in process is what the command prints, field for field."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsync.errors import UsageError
from memsync.roots.check import RootCheck, check_root
from memsync.wire import ValidateReport
from tests.conftest import Team
from tests.e2e.test_cli import memsync
from tests.helpers import commit


def printed(result: RootCheck) -> dict[str, object]:
    """What `validate --json` prints for `result`, as the report's values."""
    return {
        "valid": result.valid,
        "root": str(result.root),
        "rev": result.rev,
        "files": result.files,
        "items": result.items,
        "problems": [(p.code, p.path, p.line, p.message) for p in result.problems],
        "tracked": result.tracked,
        "memory_files": result.memory_files,
    }


def from_cli(*args: str, env: dict[str, str]) -> tuple[int, dict[str, object]]:
    done = memsync("validate", *args, "--json", env=env)
    report = ValidateReport.model_validate_json(done.stdout)
    values = report.model_dump()
    values["problems"] = [(p.code, p.path, p.line, p.message) for p in report.problems]
    return done.returncode, values


def test_the_command_prints_what_check_root_returns(team: Team, tmp_path: Path) -> None:
    state = tmp_path / "state"
    env = {"XDG_STATE_HOME": str(state)}
    root = team.alice.path
    bad = commit(root, {"notes.txt": "x"})
    (root / "MEMORY_bad.md").write_bytes(b"\xff\n")
    os.chmod(root / "MEMORY.md", 0o755)
    cases: list[tuple[str, ...]] = [(), ("--rev", bad), ("--rev", "HEAD~1")]
    for rev_args in cases:
        rev = rev_args[1] if rev_args else None
        result = check_root(root, rev, state_dir=state / "memsync")
        code, shown = from_cli(str(root), *rev_args, env=env)
        assert shown == printed(result), rev_args
        assert code == (0 if result.valid else 1), rev_args
    assert not check_root(root, None, state_dir=state / "memsync").valid
    assert check_root(root, "HEAD~1", state_dir=state / "memsync").valid


def test_an_unknown_rev_is_a_usage_error_in_process_and_exit_2(team: Team, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not a commit"):
        check_root(team.alice.path, "no-such-branch", state_dir=tmp_path / "state")
    done = memsync("validate", str(team.alice.path), "--rev", "no-such-branch")
    assert (done.returncode, done.stdout) == (2, "")
    assert "is not a commit" in done.stderr
