"""The memos' digest is hashlib's BLAKE2b-256, without loading OpenSSL."""

from __future__ import annotations

import hashlib

from hypothesis import given
from hypothesis import strategies as st

from memsync.memodigest import memo_digest


@given(st.binary(max_size=4096))
def test_the_memo_digest_is_hashlibs_blake2b(data: bytes) -> None:
    assert memo_digest(data) == hashlib.blake2b(data, digest_size=32).hexdigest()
    assert len(memo_digest(data)) == 64
