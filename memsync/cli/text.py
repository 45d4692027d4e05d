"""How the CLI's reports read on a terminal (the `--json` documents are `wire/`'s).

Errors are not here: `cli.render_error` is the one place that words them.
"""

from __future__ import annotations

from collections.abc import Mapping

from memsync.cli.app import echo

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from typing import Any

    from memsync.doctor import Diagnosis
    from memsync.roots.check import RootCheck
    from memsync.roots.result import SyncResult

_MARKS = {"ok": "ok  ", "warn": "warn", "fail": "FAIL"}


def print_validation(where: str, report: RootCheck) -> None:
    checked = (
        f"{_count(report.tracked, 'tracked file')}, {_count(report.memory_files, 'memory file')}, "
        f"{_count(report.items, 'item')}"
    )
    if report.valid:
        echo(f"{where}: valid: {checked}")
        return
    echo(f"{where}: {len(report.problems)} problem(s) in {checked}")
    for p in report.problems:
        loc = f"{p.path}:{p.line}" if p.line else (p.path or "-")
        echo(f"  {p.code:<22} {loc}: {p.message}")


def print_result(r: SyncResult) -> None:
    head = r.head[:12] if r.head else "-"
    dry = " (dry run)" if r.dry_run else ""
    echo(f"{r.root:<16} {r.status:<16} {head:<12} {r.message}{dry} [{r.duration_ms} ms]")
    for p in r.problems:
        echo(f"{'':<16}   {p.code:<20} {p.path or '-'}: {p.message}")
    if r.files and not r.problems and r.status not in ("current",):
        shown = ", ".join(r.files[:8]) + (" …" if len(r.files) > 8 else "")
        echo(f"{'':<16}   files: {shown}")
    if r.rescue_ref:
        echo(f"{'':<16}   refused head kept at {r.rescue_ref}")


def print_status(report: Mapping[str, Any]) -> None:
    """The `status --json` document (CONTRACT §2) as a table."""
    daemon = report["daemon"]
    if daemon["running"]:
        echo(
            f"daemon: running, pid {daemon['pid']}, up {_duration(daemon['uptime_seconds'] or 0)}, "
            f"version {daemon['version']}"
        )
        for entry in daemon["schedule"]:
            state = "running" if entry["running"] else f"next {entry['next_run_at'] or '-'}"
            if entry["backoff_until"]:
                state += (
                    f"; backing off after {entry['failures']} failure(s) "
                    f"until {entry['backoff_until']}"
                )
            if entry.get("held"):
                state += "; held until known_hosts or the configuration changes"
            echo(f"  {entry['kind']} {entry['name']}: {state}")
        if daemon.get("config"):
            echo(f"  config: {daemon['config']}")
    elif daemon.get("other_config"):
        echo(
            f"daemon: the running daemon serves another configuration ({daemon['other_config']}); "
            f"this one ({daemon.get('config') or '-'}) is read, and sync-now runs, in this process"
        )
    else:
        echo("daemon: not running (sync-now runs cycles in its own process)")
    echo(
        f"{'ROOT':<16} {'STATUS':<12} {'HEAD':<12} {'AHEAD':>5} {'BEHIND':>6} "
        f"{'DIRTY':<5} {'PENDING':>7}  LAST SUCCESS"
    )
    for r in report["roots"]:
        echo(
            f"{r['root']:<16} {r['status'] or 'never':<12} {(r['head'] or '-')[:12]:<12} "
            f"{_num(r['ahead']):>5} {_num(r['behind']):>6} {_yes(r['dirty']):<5} "
            f"{r['pending_operations']:>7}  {r['last_success_at'] or '-'}"
        )
        if r["message"]:
            echo(f"{'':<16} {r['message']}")
        if (r.get("admission") or {}).get("message"):
            echo(f"{'':<16} {r['admission']['message']}")
        cycles = _cycles(r)
        if cycles:
            echo(f"{'':<16} {cycles}")
    if report["views"]:
        echo(f"{'VIEW':<16} {'STATUS':<12} {'REVISION':>8}  {'FETCHED':<20}  EXPIRES")
        for v in report["views"]:
            revision = "-" if v["revision"] is None else str(v["revision"])
            echo(
                f"{v['view']:<16} {v['status']:<12} {revision:>8}  {v['fetched_at'] or '-':<20}  "
                f"{v['expires_at'] or '-'}"
            )
            if v["message"] and v["status"] != "current":
                echo(f"{'':<16} {v['message']}")


def _cycles(root: Mapping[str, Any]) -> str:
    """One line for the enabled maintenance cycles: where each stands, how the last ended."""
    parts = []
    insight, prune = root["insight"], root["prune"]
    if insight["enabled"]:
        parts.append(
            f"insight {insight['points']}/{insight['threshold']} points"
            + _last(insight["last_result"], insight["last_run_at"])
        )
    if prune["enabled"]:
        parts.append(
            f"prune {_num(prune['commits'])}/{_num(prune['generation_commits'])} commits"
            + _last(prune["last_result"], prune["last_run_at"])
        )
    return "; ".join(parts)


def _last(result: str | None, at: str | None) -> str:
    return f", last {result} at {at}" if result and at else ""


def _duration(seconds: int) -> str:
    hours, rest = divmod(seconds, 3600)
    return f"{hours}h{rest // 60:02d}m" if hours else f"{rest // 60}m{rest % 60:02d}s"


def _count(n: int, noun: str) -> str:
    """`20,003 tracked files`, `1 item`."""
    return f"{n:,} {noun}{'' if n == 1 else 's'}"


def _num(value: int | None) -> str:
    return "-" if value is None else str(value)


def _yes(value: bool | None) -> str:
    return "-" if value is None else ("yes" if value else "no")


def print_diagnosis(found: Diagnosis) -> None:
    for c in found.checks:
        echo(f"{_MARKS[c.status]} {c.name}: {c.message}")
        for line in c.details:
            echo(f"     {line}")
        if c.hint and c.status != "ok":
            echo(f"     next: {c.hint}")
    failed = sum(c.status == "fail" for c in found.checks)
    warned = sum(c.status == "warn" for c in found.checks)
    echo(f"{failed} failed, {warned} warning(s), {len(found.checks) - failed - warned} ok")
