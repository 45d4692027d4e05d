"""The memos' digest is hashlib's BLAKE2b-256, and the records' BLAKE2b and an operation
key's SHA-256 are hashlib's digests, all without loading OpenSSL."""

from __future__ import annotations

import hashlib
import subprocess
import sys

from hypothesis import given
from hypothesis import strategies as st

from memsync.memodigest import blake2b, memo_digest, sha256


@given(st.binary(max_size=4096))
def test_the_memo_digest_is_hashlibs_blake2b(data: bytes) -> None:
    assert memo_digest(data) == hashlib.blake2b(data, digest_size=32).hexdigest()
    assert len(memo_digest(data)) == 64


@given(
    st.binary(max_size=4096),
    st.binary(max_size=64),
    st.integers(min_value=1, max_value=64),
    st.integers(min_value=0, max_value=3),
)
def test_the_digests_are_hashlibs(data: bytes, key: bytes, size: int, split: int) -> None:
    assert (
        blake2b(data, key=key, digest_size=size).digest()
        == hashlib.blake2b(data, key=key, digest_size=size).digest()
    )
    ours, theirs = sha256(), hashlib.sha256()
    for part in (data[:split], data[split:]):  # fed in parts, as `journal.operation_key` does
        ours.update(part)
        theirs.update(part)
    assert ours.hexdigest() == theirs.hexdigest()
    assert sha256(data).digest() == hashlib.sha256(data).digest()


def test_the_digests_load_no_openssl() -> None:
    code = (
        "import sys, memsync.memodigest; print('hashlib' in sys.modules, '_hashlib' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
