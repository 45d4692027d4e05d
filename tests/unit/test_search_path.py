"""The git box's PATH keeps absolute directories only, in order (`gitenv.search_path`)."""

from __future__ import annotations

import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.transports.gitenv import clean_env, search_path

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
