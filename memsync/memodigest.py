"""The digests a cold process takes without loading OpenSSL: the memos' keys, the records'.

BLAKE2b from CPython's own `_blake2` module: the very function `hashlib.blake2b` is, but
importing `hashlib` also loads OpenSSL's `_hashlib` (about 2.5 ms, a thirtieth of a cold
`memsync status`). `memo_digest` names and keys the CLI's memos (the settings memo, the
config memo); the records a sync reads and writes (lineage, tree shape, git config records,
a stored summary's checksum) take `blake2b` from here too. `sha256` is CPython's own
SHA-256 (the same digest as `hashlib.sha256`, without OpenSSL's speed on large inputs): for
a journal operation's key, a few hundred bytes (issue 18: a clean one-file sync loads no
OpenSSL). Hashing file contents, signatures and fingerprints keeps `hashlib`'s.
"""

from __future__ import annotations

import sys

try:
    from _blake2 import blake2b
except ImportError:  # another interpreter's own module, if it has one (on CPython,
    from hashlib import blake2b  # hashlib's blake2b is `_blake2`'s: no fallback there)

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:  # typeshed names CPython's module for 3.12 on (`_sha2`): the same type
    from hashlib import sha256
else:
    try:
        if sys.version_info >= (3, 12):
            from _sha2 import sha256
        else:
            from _sha256 import sha256
    except ImportError:  # an interpreter without CPython's modules: the same digest
        from hashlib import sha256

__all__ = ["blake2b", "memo_digest", "sha256"]


def memo_digest(data: bytes) -> str:
    """A 256-bit BLAKE2b of `data`, in hex (64 characters, as SHA-256's)."""
    return blake2b(data, digest_size=32).hexdigest()
