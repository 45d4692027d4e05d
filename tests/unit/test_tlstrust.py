"""`tlstrust`: inside the block a TLS context that verifies nothing loads no trust store
(and, for a hub, neither does one that verifies); contexts made afterwards load the
system's again."""

from __future__ import annotations

import ssl

import pytest

from memsync.tlstrust import no_trust_store


def loaded(context: ssl.SSLContext) -> int:
    return int(context.cert_store_stats()["x509_ca"])


def unverifying() -> ssl.SSLContext:
    """aiohttp's context for `ssl=False`, made as aiohttp makes it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_default_verify_paths()
    return context


@pytest.mark.parametrize("verifying", [False, True])
def test_contexts_made_inside_load_no_trust_store_they_do_not_need(verifying: bool) -> None:
    before, system = dict(ssl.SSLContext.__dict__), loaded(ssl.create_default_context())
    with no_trust_store(verifying=verifying):
        verified, plain = ssl.create_default_context(), unverifying()
        paths = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        paths.set_default_verify_paths()
    assert loaded(plain) == 0
    # A context that verifies keeps the system's trust, unless it is a hub's: then it
    # trusts nothing and still verifies (every peer is refused, none goes unchecked).
    assert (loaded(verified), loaded(paths)) == ((0, 0) if verifying else (system, system))
    assert verified.verify_mode == ssl.CERT_REQUIRED and verified.check_hostname
    assert dict(ssl.SSLContext.__dict__) == before
    assert loaded(ssl.create_default_context()) == system  # as before the block
    assert loaded(unverifying()) == system


def test_the_methods_come_back_after_an_error() -> None:
    before = dict(ssl.SSLContext.__dict__)
    with pytest.raises(KeyError), no_trust_store(verifying=True):
        raise KeyError("x")
    assert dict(ssl.SSLContext.__dict__) == before
