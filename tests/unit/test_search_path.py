"""The git box's PATH keeps absolute directories only, in order (`gitenv.search_path`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.transports.gitenv import clean_env
from memsync.transports.process import run_process, search_path

ENTRY = st.sampled_from(["", ".", "bin", "./x", "../y", "/usr/bin", "/bin", "/opt/a b", "//z"])


@given(st.lists(ENTRY, max_size=8))
def test_only_absolute_entries_are_kept_in_order(entries: list[str]) -> None:
    kept = search_path(os.pathsep.join(entries)).split(os.pathsep)
    absolute = [e for e in entries if e.startswith("/")]
    assert kept == (absolute or os.defpath.split(os.pathsep))
    assert all(os.path.isabs(e) for e in kept)


def test_the_box_environment_never_carries_a_relative_entry(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PATH", ":.:/usr/bin::bin:/bin")
    assert clean_env()["PATH"] == "/usr/bin:/bin"
    monkeypatch.delenv("PATH")
    assert clean_env()["PATH"] == os.defpath


def test_a_child_is_never_found_in_its_working_directory(tmp_path: Path) -> None:
    """Every child of the process box (git, a role's agent, a hook) is looked up on
    absolute PATH entries only, whatever its working directory holds."""
    work, tools = tmp_path / "work", tmp_path / "tools"
    for where, says in ((work, "planted"), (tools, "installed")):
        where.mkdir()
        program = where / "agent"
        program.write_text(f"#!/bin/sh\necho {says}\n")
        program.chmod(0o755)
    for path in ("", ".", f".:{tools}", f":{tools}", f"work:{tools}"):
        env = {"PATH": f"{path}:{tools}" if path else str(tools)}
        done = run_process(["agent"], cwd=work, env=env, seconds=10)
        assert done.stdout == b"installed\n", path
