"""Wire models of the command line's `--json` documents (sync, validate, init, status).

Tests parse the CLI's output back through these same models. Producers convert their own
values to these models (`SyncResult.model()`, `ViewResult.model()`, ...); nothing here
imports them (a `Problem` is a plain value of the bottom layer, `validators.problems`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

# (ProblemModel lives in wire.problem, small for the hub; the producers import it from here)
from memsync.wire.problem import ProblemModel as ProblemModel  # noqa: PLC0414


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SyncResultModel(_Wire):
    root: str
    status: str
    message: str
    head: str | None
    upstream: str | None
    files: list[str]
    problems: list[ProblemModel]
    rescue_ref: str | None
    operation_id: str | None
    duration_ms: int
    dry_run: bool = False


class SyncReport(_Wire):
    results: list[SyncResultModel]


class ValidateReport(_Wire):
    valid: bool
    root: str
    rev: str | None = None
    files: int  # memory documents the graph parsed (CONTRACT §2), as `memory_files`
    items: int
    problems: list[ProblemModel]
    tracked: int = 0  # every file checked for name, mode, size and text (git's list, or disk)
    memory_files: int = 0  # MEMORY.md, MEMORY_*.md, PURSUITS.md, ...: parsed as the graph


class InitReport(_Wire):
    path: str
    created: bool
    joined: bool
    head: str
    branch: str
    upstream: str | None
    pushed: bool
    message: str


class ScheduleEntry(_Wire):
    """One root or view as the daemon schedules it."""

    kind: str  # root | view
    name: str
    next_run_at: str | None
    running: bool
    failures: int  # consecutive failures (back-off grows with them)
    backoff_until: str | None  # automatic runs wait until then
    held: bool = False  # host-key-changed: automatic runs wait for known_hosts or the config


class DaemonStatus(_Wire):
    running: bool
    pid: int | None = None
    version: str | None = None
    started_at: str | None = None
    uptime_seconds: int | None = None
    schedule: list[ScheduleEntry] = []
    config: str | None = None  # the configuration file described (the daemon's, when running)
    other_config: str | None = None  # a daemon runs on the socket but serves this other file


class CycleStatus(_Wire):
    enabled: bool
    generation_commits: int | None = None
    commits: int | None = None  # memory commits since the latest prune, at the last check
    last_result: str | None = None  # artifact | noop | failed
    last_run_at: str | None = None


class InsightStatus(_Wire):
    enabled: bool
    points: int
    threshold: int
    last_result: str | None = None  # artifact | noop | failed
    last_run_at: str | None = None


class AdmissionStatus(_Wire):
    """`roots.*.admission` as it holds now: the pinned keys and the trust anchor."""

    require: str = "off"  # off | signed
    signers: list[str] = []  # inline keys' fingerprints (SHA256:...)
    signer_files: list[str] = []  # files of keys, read at each cycle
    anchor: str | None = None  # the trusted upstream when `signed` was turned on
    since: str | None = None
    message: str | None = None


class RootStatus(_Wire):
    root: str
    path: str
    head: str | None
    branch: str | None
    status: str | None
    message: str | None
    last_success_at: str | None
    last_failure_at: str | None
    dirty: bool | None
    ahead: int | None
    behind: int | None
    pending_operations: int
    trusted_upstream: str | None
    prune: CycleStatus
    insight: InsightStatus
    paused: bool = False  # `memsync pause` holds it (then `status` is "paused")
    paused_until: str | None = None  # None while paused: until `memsync resume`
    admission: AdmissionStatus = AdmissionStatus()


class ViewStatus(_Wire):
    view: str
    root: str
    heading: str
    status: str
    revision: int | None
    fetched_at: str | None
    expires_at: str | None
    message: str | None
    paused: bool = False
    paused_until: str | None = None


class StatusReport(_Wire):
    daemon: DaemonStatus
    roots: list[RootStatus]
    views: list[ViewStatus]


class ViewPullResult(_Wire):
    view: str
    status: str
    revision: int | None
    previous_revision: int | None
    message: str
    problems: list[ProblemModel]


class ViewsPullReport(_Wire):
    results: list[ViewPullResult]


class ViewVerifyReport(_Wire):
    valid: bool
    source: str
    view_id: str | None
    revision: int | None
    expires: str | None
    files: int
    items: int
    signed_by: list[str]
    problems: list[ProblemModel]


class KeyReport(_Wire):
    path: str
    public_key: str
    key_id: str


class ViewBuildReport(_Wire):
    view_id: str
    status: str  # "built" | "unchanged" (nothing written: OUT holds this content already)
    revision: int
    out: str
    package_sha256: str
    package_length: int
    files: list[str]
    signed: bool


class ViewPublishReport(_Wire):
    view_id: str
    status: str  # "published" | "unchanged" | "refused"
    revision: int
    package_sha256: str
    message: str
    problems: list[ProblemModel] = []  # why the hub (or the build) refused


class ConfigValidateReport(_Wire):
    """`config validate --json`: the file is valid; `warnings` name what still stands in the
    way of running as this user (an unusable state dir)."""

    valid: bool
    path: str
    roots: int
    views: int
    warnings: list[str]


class DoctorCheck(_Wire):
    name: str
    status: str  # "ok" | "warn" | "fail"
    message: str
    hint: str | None
    details: list[str] = []


class DoctorReport(_Wire):
    ok: bool
    checks: list[DoctorCheck]


class ErrorProblem(_Wire):
    """One problem of a failed command. A configuration problem: dotted `location` (""
    for the whole file) and file line. A refusal's problem (`code` set, CONTRACT §3):
    `location` is the path it is about ("" for the whole input), `line` its line."""

    location: str
    line: int | None
    message: str
    code: str | None = None


class ErrorDetail(_Wire):
    # config-invalid, state-dir-unusable, secret-unavailable, usage, git-..., refused (a
    # verdict on some input: `problems` lists why), failed, internal
    code: str
    message: str
    hint: str | None
    exit_code: int
    source: str | None = None  # the config file a configuration error is about
    path: str | None = None  # the path an error is about (the state dir)
    problems: list[ErrorProblem] = []


class ErrorReport(_Wire):
    """What a `--json` command prints on stdout when it fails with exit 2, 3 or 130, or
    is refused (exit 1, code `refused`) with no report of its own to say so."""

    error: ErrorDetail


class CycleReport(_Wire):
    """`memsync cycle prune|insight --json` (CONTRACT §2)."""

    root: str
    cycle: str
    status: str  # landed | noop | not-due | refused | failed
    operation_id: str | None
    commit: str | None
    files: list[str]
    problems: list[ProblemModel]
    message: str
    duration_ms: int = 0
