"""The control socket's trust rules as pure decisions (`daemon.peer`): who may be at the
other end, and which directories may hold the socket; plus a real socket pair's SO_PEERCRED."""

from __future__ import annotations

import os
import socket
import stat
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from memsync.daemon.peer import (
    DirFacts,
    directory_chain,
    directory_refusal,
    peer_refusal,
    peer_uid,
)

uids = st.integers(min_value=0, max_value=2**31 - 1)
DIR = stat.S_IFDIR
OTHERS_WRITE = stat.S_IWGRP | stat.S_IWOTH


@given(uids, uids)
def test_a_client_talks_only_to_its_own_uid(peer: int, own: int) -> None:
    refusal = peer_refusal(peer, own, serving=False)
    assert (refusal is None) == (peer == own)
    if refusal is not None:
        assert f"uid {peer}" in refusal


@given(uids, uids)
def test_the_daemon_answers_its_own_uid_and_root_only(peer: int, own: int) -> None:
    assert (peer_refusal(peer, own, serving=True) is None) == (peer in (own, 0))


def test_a_real_socket_pair_reads_our_own_uid_and_is_accepted() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert peer_uid(left) == os.geteuid() == peer_uid(right)
        assert peer_refusal(peer_uid(left), os.geteuid(), serving=False) is None
        assert peer_refusal(peer_uid(right), os.geteuid(), serving=True) is None


modes = st.integers(min_value=0, max_value=0o7777)


@given(own=uids, owner=uids, mode=modes)
def test_the_socket_directory_is_this_users_alone(own: int, owner: int, mode: int) -> None:
    chain = [DirFacts("/run/me", owner, DIR | mode), DirFacts("/", 0, DIR | 0o755)]
    refusal = directory_refusal(chain, own)
    assert (refusal is None) == (owner == own and not mode & OTHERS_WRITE)


@given(own=uids, owner=uids, mode=modes)
def test_a_directory_above_is_roots_or_ours_and_sticky_when_others_write(
    own: int, owner: int, mode: int
) -> None:
    chain = [
        DirFacts("/tmp/me/run", own, DIR | 0o700),
        DirFacts("/tmp/me", owner, DIR | mode),
        DirFacts("/", 0, DIR | 0o755),
    ]
    refusal = directory_refusal(chain, own)
    trusted_owner = owner in (0, own)
    safe_mode = not mode & OTHERS_WRITE or bool(mode & stat.S_ISVTX)
    assert (refusal is None) == (trusted_owner and safe_mode)


def test_what_is_not_a_directory_or_nothing_at_all_is_refused() -> None:
    assert directory_refusal([], 0) is not None
    assert directory_refusal([DirFacts("/x", 0, stat.S_IFREG | 0o600)], 0) is not None


def test_the_chain_is_read_from_the_real_path(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    (tmp_path / "link").symlink_to(real)
    chain = directory_chain(tmp_path / "link")
    assert chain[0].path == os.path.realpath(real)
    assert [c.path for c in chain][-1] == "/"
    assert directory_refusal(chain, os.geteuid()) is None  # pytest's own tree is private
