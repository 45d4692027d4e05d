"""aiohttp imported without the CA bundle loads it would make for nothing.

Importing aiohttp builds its client's two default TLS contexts (`aiohttp.connector`), and
each reads the system's CA bundle: 245M instructions apiece, a third of a `hub serve`'s
imports (issue 18). One of them verifies nothing (it is aiohttp's for `ssl=False`, which
memsync never asks for): a trust store is never consulted there. A hub verifies nothing at
all: it only serves (plain HTTP behind a TLS proxy) and opens no connection of its own.

So the processes that load aiohttp import it inside `no_trust_store()`: while it lasts, a
TLS context that verifies nothing loads no trust store, and with `verifying=True` (the hub)
neither does one that verifies, which then trusts nothing: a request with it fails its
verification, it never goes unchecked. Contexts made afterwards load the system's as ever.
The HTTP box (`transports/http.py`) imports aiohttp so too: its https requests verify with
a context of its own, built on the first one.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

TYPE_CHECKING = False
if TYPE_CHECKING:
    import ssl

_NAMES = ("set_default_verify_paths", "load_default_certs")


@contextlib.contextmanager
def no_trust_store(*, verifying: bool = False) -> Iterator[None]:
    """Within the block (one thread: a process starting up), a new TLS context that
    verifies nothing loads no CA certificates, nor (`verifying`) does one that verifies."""
    import ssl  # noqa: PLC0415 - what the block imports loads it anyway

    saved = {name: ssl.SSLContext.__dict__.get(name) for name in _NAMES}
    for name in _NAMES:
        setattr(ssl.SSLContext, name, _skipping(getattr(ssl.SSLContext, name), verifying))
    try:
        yield
    finally:
        for name, method in saved.items():
            if method is None:
                delattr(ssl.SSLContext, name)
            else:
                setattr(ssl.SSLContext, name, method)


def _skipping(load: Callable[..., None], verifying: bool) -> Callable[..., None]:
    def skipped(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        if verifying or self.verify_mode == 0:  # ssl.CERT_NONE
            return
        load(self, *args, **kwargs)

    return skipped
