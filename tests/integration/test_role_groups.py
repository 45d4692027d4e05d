"""Role process groups a killed memsync process left running are ended by the next one
(issue 20, item 11), and only those: real processes, real groups, real SIGKILL."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from memsync.cycles.rolegroups import RoleGroups
from tests.e2e.daemons import launcher, write_config
from tests.helpers import wait_for

# A stand-in for a memsync process running a role: it starts a group the way the process box
# does (a new session: a shell and its child), records it, says so, and waits to be killed.
OWNER = textwrap.dedent(
    """
    import subprocess, sys
    from pathlib import Path
    from memsync.cycles.rolegroups import RoleGroups
    agent = subprocess.Popen(
        ["sh", "-c", "sleep 300 & wait"], start_new_session=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    RoleGroups(Path(sys.argv[1])).record(agent.pid, operation_id="op-1", role="insight")
    print(agent.pid, flush=True)
    sys.stdin.read()
    """
)


def alive(pid: int) -> bool:
    """Running (not gone, not a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


def group_members(pgid: int) -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and alive(int(entry.name)):
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2 :].split()[2]) == pgid:
                out.append(int(entry.name))
    return out


def owner_left_group(base: Path) -> tuple[subprocess.Popen[str], int]:
    """An owner process that recorded a running group; (the owner, the group id)."""
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER, str(base)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert owner.stdout is not None
    pgid = int(owner.stdout.readline())
    wait_for(lambda: len(group_members(pgid)) == 2, 30, "the agent and its child")
    return owner, pgid


def kill(owner: subprocess.Popen[str]) -> None:
    owner.send_signal(signal.SIGKILL)
    owner.wait(timeout=30)


def end_group(pgid: int) -> None:
    if group_members(pgid):
        os.killpg(pgid, signal.SIGKILL)


def test_a_group_whose_owner_was_killed_is_ended_with_all_its_processes(tmp_path: Path) -> None:
    owner, pgid = owner_left_group(tmp_path)
    try:
        kill(owner)
        assert len(group_members(pgid)) == 2  # the kill left the agent and its child running
        ended = RoleGroups(tmp_path).end_left()
        assert [(e.pgid, e.role, e.operation_id) for e in ended] == [(pgid, "insight", "op-1")]
        wait_for(lambda: not group_members(pgid), 30, "the group to end")
        assert list((tmp_path / "role-groups").iterdir()) == []
    finally:
        end_group(pgid)


def test_a_group_whose_owner_still_runs_is_left_alone(tmp_path: Path) -> None:
    owner, pgid = owner_left_group(tmp_path)
    try:
        assert RoleGroups(tmp_path).end_left() == []
        assert len(group_members(pgid)) == 2
        assert (tmp_path / "role-groups" / f"{pgid}.json").exists()
    finally:
        kill(owner)
        end_group(pgid)


def test_a_reused_group_number_is_not_ended(tmp_path: Path) -> None:
    """The record names a leader start time the live process with that id does not have:
    the number now belongs to someone else, who is left alone."""
    owner, pgid = owner_left_group(tmp_path)
    try:
        kill(owner)
        record = tmp_path / "role-groups" / f"{pgid}.json"
        entry = json.loads(record.read_text())
        record.write_text(json.dumps({**entry, "leader_start": entry["leader_start"] - 1}))
        assert RoleGroups(tmp_path).end_left() == []
        assert len(group_members(pgid)) == 2
        assert not record.exists()  # the stale record is dropped
    finally:
        end_group(pgid)


def test_junk_records_are_dropped_and_end_nothing(tmp_path: Path) -> None:
    groups = tmp_path / "role-groups"
    groups.mkdir()
    (groups / "1.json").write_text(json.dumps({"pgid": 1}))
    (groups / "2.json").write_text("{")
    mine = os.getpgrp()
    (groups / f"{mine}.json").write_text(
        json.dumps(
            {
                "pgid": mine,
                "leader_start": 0,
                "owner": 999_999_999,
                "owner_start": 0,
                "boot": "x",
                "operation_id": "o",
                "role": "r",
            }
        )
    )
    assert RoleGroups(tmp_path).end_left() == []
    assert list(groups.iterdir()) == []


def test_the_daemon_ends_a_left_group_before_ready(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    config = write_config(tmp_path, {"alice": {"path": root}})
    owner, pgid = owner_left_group(tmp_path / "state" / "roots" / "alice")
    try:
        kill(owner)
        assert group_members(pgid)
        with launcher(tmp_path) as launch:
            daemon = launch(config)
            # Sent before READY (said in the log by then); SIGKILL takes effect when the
            # kernel next runs a member, which a busy machine may not have done yet.
            assert f"ended the process group {pgid} of role insight" in daemon.log.read_text()
            wait_for(lambda: not group_members(pgid), 10, "the left group to be gone")
    finally:
        end_group(pgid)
