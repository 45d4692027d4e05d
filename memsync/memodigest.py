"""The digest that names and keys the CLI's memos (the settings memo, the config memo).

BLAKE2b from CPython's own `_blake2` module: the very function `hashlib.blake2b` is, but
importing `hashlib` also loads OpenSSL's `_hashlib` (about 2.5 ms, a thirtieth of a cold
`memsync status`). A memo's key only has to tell one input from another; anything that is an
identity on the wire or on disk for others (signatures, fingerprints, journal keys) keeps
`hashlib`'s SHA-256.
"""

from __future__ import annotations

try:
    from _blake2 import blake2b
except ImportError:  # an interpreter without CPython's module: hashlib's is the same function
    from hashlib import blake2b


def memo_digest(data: bytes) -> str:
    """A 256-bit BLAKE2b of `data`, in hex (64 characters, as SHA-256's)."""
    return blake2b(data, digest_size=32).hexdigest()
