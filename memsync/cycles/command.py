"""The `command` executor (CONTRACT §7): an agent CLI in the candidate worktree.

`run_command` runs it through the process box: argv templates substituted whole (never a
shell), the prompt on stdin and in a private file outside the worktree, a clean
environment plus `MEMSYNC_*`, the process group killed at the timeout, output kept up to
a cap. The role commits its own work; `uncommitted_changes` reports what it left behind.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from memsync.config.sections import CommandRoleSettings
from memsync.cycles.promptkit import Prompt
from memsync.cycles.rolegroups import RoleGroups
from memsync.cycles.runrecord import (
    ExecutorFailed,
    FailureKind,
    RunRecord,
    Scrub,
    last_line,
    ms_since,
    tail,
)
from memsync.errors import InternalError
from memsync.roots.faults import fault
from memsync.transports.git import Git
from memsync.transports.process import PIPE_GRACE, Completed, Deadline, run_process
from memsync.validators.paths import printable
from memsync.validators.problems import Problem

log = logging.getLogger("memsync.cycles")

OUTPUT_CAP = 1 << 20  # bytes of a command's stdout and of its stderr kept for the log

# What an agent CLI gets of the daemon's environment: enough to find its tools, its own
# login (under HOME or XDG_*) and a git identity; never the daemon's secrets.
BASE_ENV = (
    *("PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR"),
    *("LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES"),
    *("XDG_CONFIG_HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME"),
    *("GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"),
)


def command_argv(template: Sequence[str], values: Mapping[str, str]) -> list[str]:
    """Substitute whole-argument templates only: `{prompt_file}` becomes the path, while
    `--file={prompt_file}` or any other braces stay as written (no format-string parsing)."""
    return [values.get(arg, arg) for arg in template]


def role_env(
    *,
    role: str,
    worktree: Path,
    prompt_file: Path,
    operation_id: str,
    environ: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The clean base environment plus the `MEMSYNC_*` variables of CONTRACT §7."""
    source = os.environ if environ is None else environ
    env = {key: source[key] for key in BASE_ENV if key in source}
    env.update(
        {
            "MEMSYNC_ROLE": role,
            "MEMSYNC_WORKTREE": str(worktree),
            "MEMSYNC_PROMPT_FILE": str(prompt_file),
            "MEMSYNC_OPERATION_ID": operation_id,
        }
    )
    return env


def run_command(
    role: CommandRoleSettings,
    *,
    worktree: Path,
    prompt: Prompt | str,
    operation_id: str,
    deadline: Deadline,
    scratch: Path | None = None,
    environ: Mapping[str, str] | None = None,
    output_cap: int = OUTPUT_CAP,
    groups: RoleGroups | None = None,
) -> RunRecord:
    """Run the role's command once in `worktree` (blocking; call it from a worker thread).

    The prompt file lives in a private directory under `scratch` (the state dir; the system
    temp dir when None), never inside the worktree, and is removed afterwards. Returns the
    record of a run that exited 0; raises ExecutorFailed (with the record) otherwise.
    With `groups`, the agent's process group is recorded there while it runs, so a later
    memsync process can end it if this one is killed meanwhile (`rolegroups.py`).
    """
    text = prompt.text if isinstance(prompt, Prompt) else prompt
    worktree = worktree.absolute()
    if not worktree.is_dir():
        raise ExecutorFailed(FailureKind.CANNOT_START, f"the worktree {worktree} does not exist")
    if scratch is not None:
        scratch = scratch.absolute()
        if scratch.resolve().is_relative_to(worktree.resolve()):
            raise InternalError("internal: the prompt file would be inside the role's worktree")
        scratch.mkdir(parents=True, exist_ok=True, mode=0o700)
    started = time.monotonic()
    seconds = deadline.cap(role.timeout.total_seconds())
    if seconds <= 0:
        raise _command_failed(role, operation_id, started, FailureKind.TIMEOUT, "no time was left")
    private = Path(tempfile.mkdtemp(prefix="memsync-prompt-", dir=scratch))
    try:
        prompt_file = private / "prompt.md"
        fd = os.open(prompt_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        values = {"{prompt_file}": str(prompt_file), "{worktree}": str(worktree)}
        values["{role}"] = role.name
        argv = command_argv(role.command, values)
        env = role_env(
            role=role.name,
            worktree=worktree,
            prompt_file=prompt_file,
            operation_id=operation_id,
            environ=environ,
        )
        started_group: list[int] = []

        def on_start(pid: int) -> None:
            started_group.append(pid)
            if groups is not None:
                groups.record(pid, operation_id=operation_id, role=role.name)

        try:
            done = run_process(
                argv,
                cwd=worktree,
                env=env,
                seconds=seconds,
                input=text.encode("utf-8"),
                keep=output_cap,
                on_start=on_start,
            )
        except OSError as exc:
            what = "was not found" if isinstance(exc, FileNotFoundError) else "could not start"
            reason = f"its command {printable(argv[0])!r} {what}"
            if not isinstance(exc, FileNotFoundError):
                reason += f" ({exc.strerror})"
            raise _command_failed(
                role, operation_id, started, FailureKind.CANNOT_START, reason
            ) from exc
    finally:
        shutil.rmtree(private, ignore_errors=True)
        if groups is not None:
            for pid in started_group:  # the box ended the group, whatever the outcome
                groups.forget(pid)
    fault("cycle-during-executor")  # the agent ran (and may have committed); nothing recorded
    record = _command_record(role, operation_id, started, seconds, done, output_cap)
    log.info("%s", record.summary())
    if record.outcome != "ok":
        raise ExecutorFailed(FailureKind(record.outcome), record.message, record=record)
    return record


def _command_record(
    role: CommandRoleSettings,
    operation_id: str,
    started: float,
    seconds: float,
    done: Completed,
    output_cap: int,
) -> RunRecord:
    """How a finished (or stopped) command ended, with its output cut to the cap."""
    scrub = Scrub()
    stdout, cut_out = tail(done.stdout, output_cap, done.stdout_total)
    stderr, cut_err = tail(done.stderr, output_cap, done.stderr_total)
    outcome = "ok"
    message = f"the role {role.name} finished"
    if done.escaped:
        outcome = FailureKind.ESCAPED.value
        message = (
            f"the role {role.name} left a process running outside its process group that "
            f"held its output past its exit (or its deadline); it was killed after "
            f"{PIPE_GRACE:g}s and nothing of this run is used (role-escaped)"
        )
    elif done.expired:
        outcome = FailureKind.TIMEOUT.value
        message = (
            f"the role {role.name} did not finish within {seconds:g}s; "
            "it was stopped with its whole process group"
        )
    elif done.returncode != 0:
        outcome = FailureKind.EXIT_STATUS.value
        how = (
            f"was killed by signal {-done.returncode}"
            if done.returncode < 0
            else f"exited with status {done.returncode}"
        )
        said = last_line(stderr) or last_line(stdout)
        message = f"the role {role.name} {how}" + (f": {scrub(said)}" if said else "")
    return RunRecord(
        role=role.name,
        executor="command",
        operation_id=operation_id,
        duration_ms=ms_since(started),
        outcome=outcome,
        exit_status=None if done.expired else done.returncode,
        stdout=scrub(stdout),
        stderr=scrub(stderr),
        truncated=cut_out or cut_err,
        message=message,
    )


def _command_failed(
    role: CommandRoleSettings, operation_id: str, started: float, kind: FailureKind, why: str
) -> ExecutorFailed:
    message = f"the role {role.name} could not run: {why}"
    record = RunRecord(
        role.name, "command", operation_id, ms_since(started), kind.value, message=message
    )
    log.info("%s", record.summary())
    return ExecutorFailed(kind, message, record=record)


def uncommitted_changes(worktree: Path) -> tuple[Problem, ...]:
    """`uncommitted-changes` for every path the role left changed or untracked (not ignored)
    in its worktree. A git failure raises (never "assume clean")."""
    entries = Git(worktree, trusted_alternates=True).work_state().entries  # a role repository
    return tuple(
        Problem(
            "uncommitted-changes",
            printable(entry.path),
            None,
            f"the role left '{printable(entry.path)}' uncommitted",
        )
        for entry in entries
    )
