"""aiohttp imported to serve: without the CA bundle its client side would load for nothing.

Importing aiohttp builds its client's two default TLS contexts (`aiohttp.connector`), and
each reads the system's CA bundle: a third of a `hub serve`'s imports (490M of 1,780M
instructions; issue 18). A hub only serves, over plain HTTP behind a TLS proxy; it opens no
connection of its own. So `hub serve` imports its server stack inside `no_trust_store()`:
while it lasts, TLS contexts load no trust store, so aiohttp's default client contexts
trust nothing. A client request with them would fail verification, never go unchecked.
"""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import Iterator


def _no_trust_store(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
    """`set_default_verify_paths` / `load_default_certs` that load nothing."""


@contextlib.contextmanager
def no_trust_store() -> Iterator[None]:
    """Within the block (one thread: a process starting up), new TLS contexts load no CA
    certificates; afterwards they do again."""
    names = ("set_default_verify_paths", "load_default_certs")
    saved = {name: ssl.SSLContext.__dict__.get(name) for name in names}
    for name in names:
        setattr(ssl.SSLContext, name, _no_trust_store)
    try:
        yield
    finally:
        for name, method in saved.items():
            if method is None:
                delattr(ssl.SSLContext, name)
            else:
                setattr(ssl.SSLContext, name, method)
