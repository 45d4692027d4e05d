"""The journal keeps its newest settled records and keys, and no more (`Journal._trim`,
which every settled operation runs: by name, not a `Path` each)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from memsync.roots import journal


def test_settling_keeps_the_newest_records_and_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(journal, "KEEP_SETTLED", 3)
    monkeypatch.setattr(journal, "KEEP_KEYS", 4)
    records = journal.Journal(tmp_path / "journal")
    settled, made = [], []
    for number in range(6):
        op = records.begin("sync", "main", f"{number:040x}", None)
        records.advance(op, journal.COMMITTED, message="published")
        settled.append(op.id)
        made.append(op.key)
        # A key's age is its file's: each one written later than the one before.
        key = records.directory / "keys" / op.key
        stamp = 1_000_000 + number
        key.touch()
        os.utime(key, (stamp, stamp))
    names = sorted(p.name for p in records.directory.iterdir() if p.name.endswith(".json"))
    assert names == sorted(f"{op_id}.json" for op_id in settled)[-3:]
    keys = sorted(p.name for p in (records.directory / "keys").iterdir())
    assert keys == sorted(made[-4:])  # the four written last
    assert records.unsettled() == []
    # what is kept is asked as before (ids sort by the second they began, then at random)
    newest = records.load(max(settled))
    assert newest is not None and newest.phase == journal.COMMITTED
    assert (records.directory / "open").is_dir()  # (a directory is never a record)
