"""An unusable state dir is a configuration error (exit 2, one line, a JSON error document),
and every failing `--json` command prints a JSON error document on stdout."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from memsync.cli.group import error_document
from memsync.configproblem import Located
from memsync.errors import ConfigError, StateDirError
from memsync.wire import StatusReport, SyncReport
from memsync.wire.cli import ConfigValidateReport, ErrorReport
from tests.e2e.test_cli import memsync


def config_with(tmp_path: Path, state_dir: Path, root: Path | None = None) -> Path:
    root = root or tmp_path / "no-such-root"
    path = tmp_path / "config.yaml"
    path.write_text(
        f"version: 1\nstate_dir: {state_dir}\n"
        f"control: {{socket: {tmp_path / 'memsync.sock'}}}\n"
        f"roots:\n  mem:\n    path: {root}\n    watch: false\n"
        "views:\n  team:\n    root: mem\n"
        "    source: {kind: http, url: 'http://127.0.0.1:9/v1/views/team'}\n"
        "    trust: {allow_unsigned: true}\n"
    )
    return path


@pytest.fixture
def blocked(tmp_path: Path) -> tuple[Path, Path]:
    """A config whose state dir would have to be created under a regular file."""
    (tmp_path / "file").write_text("not a directory")
    state = tmp_path / "file" / "state"
    return config_with(tmp_path, state), state


@pytest.mark.parametrize(
    "command", [("sync-now",), ("status",), ("views", "pull"), ("sync-now", "mem", "--dry-run")]
)
def test_unusable_state_dir_is_a_config_error(
    blocked: tuple[Path, Path], tmp_path: Path, command: tuple[str, ...]
) -> None:
    cfg, state = blocked
    done = memsync("--config", str(cfg), *command)
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"memsync: state dir {state} is unusable: it cannot be created: {tmp_path / 'file'} "
        "is not a directory; point `state_dir` in the config at a directory this user can "
        "create and write\n"
    )
    as_json = memsync("--config", str(cfg), *command, "--json")
    assert as_json.returncode == 2
    assert as_json.stderr == done.stderr
    error = ErrorReport.model_validate_json(as_json.stdout).error
    assert (error.code, error.exit_code, error.path) == ("state-dir-unusable", 2, str(state))
    assert error.message == done.stderr.removeprefix("memsync: ").split("; ")[0]
    assert error.hint is not None and "state_dir" in error.hint


def test_state_dir_that_is_a_file_and_roots_that_is_a_file(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.write_text("x")
    done = memsync("--config", str(config_with(tmp_path, state)), "sync-now")
    assert done.returncode == 2
    assert f"state dir {state} is unusable: it is not a directory;" in done.stderr
    state.unlink()
    state.mkdir()
    (state / "roots").write_text("x")
    done = memsync("--config", str(config_with(tmp_path, state)), "sync-now", "--json")
    assert done.returncode == 2
    assert (
        f"{state / 'roots'} is not a directory"
        in ErrorReport.model_validate_json(done.stdout).error.message
    )


def test_config_validate_warns_about_the_state_dir(blocked: tuple[Path, Path]) -> None:
    cfg, state = blocked
    done = memsync("config", "validate", str(cfg))
    assert done.returncode == 0  # the file is valid; the daemon may run as another user
    assert done.stdout == f"{cfg}: valid (1 root(s))\n"
    assert done.stderr.startswith(f"memsync: warning: state dir {state} is unusable: ")
    assert done.stderr.count("\n") == 1
    as_json = memsync("config", "validate", str(cfg), "--json")
    report = ConfigValidateReport.model_validate_json(as_json.stdout)
    assert report.valid and report.roots == 1 and report.views == 1
    assert len(report.warnings) == 1 and str(state) in report.warnings[0]


def test_commands_create_the_state_dir_private_and_status_does_not(tmp_path: Path) -> None:
    state = tmp_path / "deep" / "state"
    cfg = config_with(tmp_path, state)
    status = memsync("--config", str(cfg), "status", "--json")
    assert status.returncode == 0, status.stderr
    assert StatusReport.model_validate_json(status.stdout).roots[0].root == "mem"
    assert not (tmp_path / "deep").exists()
    config_check = memsync("config", "validate", str(cfg))
    assert config_check.returncode == 0 and config_check.stderr == ""
    done = memsync("--config", str(cfg), "sync-now", "--json")
    assert done.returncode == 1  # the root path does not exist: unconfigured
    assert SyncReport.model_validate_json(done.stdout).results[0].status == "unconfigured"
    assert stat.S_IMODE(state.stat().st_mode) == 0o700


def test_usage_errors_with_json_print_an_error_document(tmp_path: Path) -> None:
    cfg = config_with(tmp_path, tmp_path / "state")
    unknown = memsync("--config", str(cfg), "sync-now", "carol", "--json")
    assert unknown.returncode == 2
    error = ErrorReport.model_validate_json(unknown.stdout).error
    assert (error.code, error.exit_code) == ("usage", 2)
    assert error.message == "unknown root(s): carol"
    assert error.hint == "configured roots: mem"
    missing = memsync("validate", "--json")  # click's own usage error: PATH is missing
    assert missing.returncode == 2
    assert ErrorReport.model_validate_json(missing.stdout).error.code == "usage"
    no_config = memsync(
        "status", "--json", env={"MEMSYNC_CONFIG": "", "XDG_CONFIG_HOME": str(tmp_path / "x")}
    )
    assert no_config.returncode == 2
    assert ErrorReport.model_validate_json(no_config.stdout).error.code == "config-invalid"
    plain = memsync("--config", str(cfg), "sync-now", "carol")
    assert plain.stdout == ""  # the error document is for --json only


def test_error_documents_by_kind() -> None:
    bug = error_document(RuntimeError("boom"), 3).error
    assert (bug.code, bug.exit_code) == ("internal", 3)
    assert bug.message == "internal error: RuntimeError: boom"
    assert bug.hint is not None and "--debug" in bug.hint
    config = ConfigError(
        "c.yaml: 1 configuration problem",
        problems=[Located("roots.a.sync.interval", "invalid duration", 4)],
        source="c.yaml",
    )
    found = error_document(config, 2).error
    assert (found.code, found.source) == ("config-invalid", "c.yaml")
    assert [(p.location, p.line) for p in found.problems] == [("roots.a.sync.interval", 4)]
    state = error_document(StateDirError("/s", "it is not a directory"), 2).error
    assert (state.code, state.path) == ("state-dir-unusable", "/s")
    assert error_document(KeyboardInterrupt(), 130).error.code == "interrupted"
