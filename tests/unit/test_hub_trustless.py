"""`hub.trustless`: TLS contexts made inside the block load no trust store, and the ones
made after it load the system's again (a hub only serves; nothing else changes)."""

from __future__ import annotations

import ssl

from memsync.hub.trustless import no_trust_store


def loaded(context: ssl.SSLContext) -> int:
    return int(context.cert_store_stats()["x509_ca"])


def test_contexts_made_inside_load_no_ca_and_verify_nothing_unchecked() -> None:
    before, system = dict(ssl.SSLContext.__dict__), loaded(ssl.create_default_context())
    with no_trust_store():
        verified = ssl.create_default_context()
        plain = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        plain.set_default_verify_paths()
    assert (loaded(verified), loaded(plain)) == (0, 0)
    assert verified.verify_mode == ssl.CERT_REQUIRED and verified.check_hostname  # refuses all
    assert dict(ssl.SSLContext.__dict__) == before
    assert loaded(ssl.create_default_context()) == system  # as before the block


def test_the_methods_come_back_after_an_error() -> None:
    before = dict(ssl.SSLContext.__dict__)
    try:
        with no_trust_store():
            raise KeyError("x")
    except KeyError:
        pass
    assert dict(ssl.SSLContext.__dict__) == before
