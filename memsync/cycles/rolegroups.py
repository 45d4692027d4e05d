"""The role groups a memsync process has running, on disk, so a later one can end them.

A role's agent runs in a process group of its own (the process box starts it in a new
session); the box kills that group when the agent exits or its time is up. A memsync process
killed meanwhile (SIGKILL, OOM, a power cut of the daemon alone) cannot: the agent and what it
started run on. So each group is recorded here while it runs (`<root state>/role-groups/<pgid>
.json`, 0600: the group, its leader's start time, the boot, and the memsync process that owns
it) and the record removed when the run ends. At start (the daemon, before READY; a one-shot
cycle, before its turn) `end_left` ends every recorded group whose owner is gone.

A group is ended only when it is provably the one recorded: the same boot, and either its
leader still runs with the recorded start time, or the leader is gone and processes still
carry the group id (the kernel does not hand out a number that a live group still holds). A
group whose owner still runs (another memsync process on the same state dir) is left alone.
Linux only (`/proc`); elsewhere nothing is recorded and nothing is ended.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
from dataclasses import asdict, dataclass
from pathlib import Path

from memsync.atomicfile import private_dir, read_json, write_json

log = logging.getLogger(__name__)

DIR_NAME = "role-groups"
MAX_RECORDS = 256  # more than any state dir runs at once; the rest are ignored (and removed)


@dataclass(frozen=True)
class GroupRecord:
    pgid: int
    leader_start: int  # the leader's start time, in clock ticks since boot (/proc stat 22)
    owner: int  # the memsync process that started the group
    owner_start: int
    boot: str
    operation_id: str
    role: str


def _boot_id() -> str | None:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _stat(pid: int) -> tuple[int, int] | None:
    """(process group, start time in ticks) of a live (not zombie) process, or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()  # the name may hold spaces and ')'
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[2]), int(fields[19])


def _members(pgid: int) -> list[int]:
    """Live processes whose group is `pgid`."""
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found is not None and found[0] == pgid:
                out.append(int(entry.name))
    return out


class RoleGroups:
    """The records of one root's state directory."""

    def __init__(self, root_state: Path) -> None:
        self.dir = root_state / DIR_NAME

    def record(self, pgid: int, *, operation_id: str, role: str) -> None:
        """Note that group `pgid` (its leader is `pgid`) now runs for this process."""
        boot, leader, owner = _boot_id(), _stat(pgid), _stat(os.getpid())
        if boot is None or leader is None or owner is None:
            return  # not Linux, or the leader is already gone: nothing to end later
        private_dir(self.dir)
        entry = GroupRecord(pgid, leader[1], os.getpid(), owner[1], boot, operation_id, role)
        write_json(self.dir / f"{pgid}.json", asdict(entry), durable=False)

    def forget(self, pgid: int) -> None:
        with contextlib.suppress(FileNotFoundError):
            (self.dir / f"{pgid}.json").unlink()

    def end_left(self) -> list[GroupRecord]:
        """End every recorded group whose owner is gone; the ones ended (for the log)."""
        if not self.dir.is_dir():
            return []
        ended = []
        for path in sorted(self.dir.glob("*.json"))[:MAX_RECORDS]:
            entry = _load(path)
            if entry is not None and _owner_alive(entry):
                continue
            if entry is not None and _is_ours(entry):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(entry.pgid, signal.SIGKILL)
                ended.append(entry)
                log.warning(
                    "ended the process group %d of role %s (operation %s), left running by "
                    "memsync process %d that is gone",
                    entry.pgid,
                    entry.role,
                    entry.operation_id,
                    entry.owner,
                )
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        return ended


def _load(path: Path) -> GroupRecord | None:
    try:
        raw = read_json(path)
        entry = GroupRecord(**raw) if isinstance(raw, dict) else None
    except (TypeError, ValueError, json.JSONDecodeError, OSError):
        return None
    if entry is None or not all(
        isinstance(getattr(entry, f), int) and not isinstance(getattr(entry, f), bool)
        for f in ("pgid", "leader_start", "owner", "owner_start")
    ):
        return None
    if entry.pgid <= 1 or entry.pgid == os.getpgrp():
        return None  # never init's group, never our own
    return entry


def _owner_alive(entry: GroupRecord) -> bool:
    if entry.boot != _boot_id():
        return False
    owner = _stat(entry.owner)
    return owner is not None and owner[1] == entry.owner_start


def _is_ours(entry: GroupRecord) -> bool:
    """The recorded group, provably: same boot, and its leader with the recorded start time,
    or no leader but members still holding the id (which therefore was not reused)."""
    if entry.boot != _boot_id():
        return False
    leader = _stat(entry.pgid)
    if leader is not None:
        return leader == (entry.pgid, entry.leader_start)
    return bool(_members(entry.pgid))
