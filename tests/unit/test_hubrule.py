"""The one rule for where a token may go (`transports/hubrule.py`), and header-bound secrets."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.errors import SecretError
from memsync.secrets import SecretRef, resolve_header
from memsync.transports.hubrule import is_loopback, url_problem

LOOPBACK = ["127.0.0.1", "127.8.9.10", "[::1]", "localhost", "LOCALHOST"]
REMOTE = [
    "192.0.2.2",
    "10.0.0.1",
    "hub.example",
    "[fd00::2]",
    "localhost.example",
    "127.0.0.1.nip.io",
]
HOSTS = st.sampled_from(LOOPBACK + REMOTE)
PORTS = st.sampled_from(["", ":80", ":8765"])
PATHS = st.sampled_from(["", "/", "/v1/events?root=team", "/v1/roots/team/notify"])


@given(
    st.sampled_from(["http", "https", "HTTPS", "ftp", "file"]),
    HOSTS,
    PORTS,
    PATHS,
    st.booleans(),
    st.booleans(),
)
def test_a_token_goes_only_over_https_or_to_loopback(
    scheme: str, host: str, port: str, path: str, token: bool, allow_http: bool
) -> None:
    url = f"{scheme}://{host}{port}{path}"
    problem = url_problem(url, token=token, allow_http=allow_http)
    loopback = host in LOOPBACK
    if scheme.lower() not in ("http", "https"):
        assert problem is not None
    elif scheme.lower() == "https" or loopback:
        assert problem is None
    elif token:  # plain http to another host: never with a token, whatever allow_http says
        assert problem is not None and "token" in problem
    else:
        assert (problem is None) == allow_http
    assert problem is None or host not in problem  # reasons never quote the URL


@given(HOSTS, st.booleans())
def test_a_redirect_never_downgrades_https_to_http(host: str, token: bool) -> None:
    problem = url_problem(f"http://{host}/x", token=token, previous=f"https://{host}/y")
    assert problem is not None and "https to http" in problem


@pytest.mark.parametrize(
    "url", ["http://u:p@127.0.0.1/x", "https://u@hub.example/x", "http:///x", "http://[::1/x", "x"]
)
def test_credentials_in_urls_and_malformed_urls_are_refused(url: str) -> None:
    assert url_problem(url, token=False, allow_http=True) is not None


def test_loopback_is_an_address_or_localhost_never_a_name_that_resolves_to_one() -> None:
    assert all(is_loopback(h) for h in ["127.0.0.1", "::1", "[::1]", "localhost", "localhost."])
    assert not any(is_loopback(h) for h in ["192.0.2.2", "localhost.example", "127.0.0.1.x", ""])


# Header-bound secrets: one trailing line break is dropped, anything else unusual refused.


@pytest.mark.parametrize("content", [b"tok-123\n", b"tok-123\r\n", b"tok-123"])
def test_a_token_file_loses_one_trailing_line_break(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "t").write_bytes(content)
    assert resolve_header(SecretRef("file", str(tmp_path / "t"))) == "tok-123"


@given(
    st.sampled_from(
        ["tok\n", "tok\r", "t\nok", "t\rok", "to k", "t\x00k", "t\x7fk", "tök", "t\u2028k"]
    )
)
def test_a_token_that_cannot_go_in_a_header_is_refused_by_key_never_by_value(bad: str) -> None:
    secret = "s3cr3t" + bad
    with pytest.raises(SecretError) as caught:
        resolve_header(
            SecretRef("env", "HUB"), where="roots.a.sync.events_token", environ={"HUB": secret}
        )
    assert caught.value.message.startswith("roots.a.sync.events_token: environment variable HUB")
    assert "s3cr3t" not in caught.value.message + (caught.value.hint or "")


def test_a_token_file_ending_in_two_newlines_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t").write_bytes(b"s3cr3t\n\n")
    with pytest.raises(SecretError) as caught:
        resolve_header(SecretRef("file", str(tmp_path / "t")), where="views.v.source.token")
    assert "views.v.source.token" in caught.value.message
    assert "s3cr3t" not in caught.value.message


def test_an_over_long_token_is_refused() -> None:
    with pytest.raises(SecretError):
        resolve_header(SecretRef("value", "x" * 5000))
