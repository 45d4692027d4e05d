"""Credentials in URLs never survive redaction: user-info, query and fragment."""

from __future__ import annotations

import string

from hypothesis import given
from hypothesis import strategies as st

from memsync.redaction import redact

SECRET_CHARS = string.ascii_letters + string.digits + "-_.~%!$&()*+,;=:@/?#"
secrets = st.text(SECRET_CHARS, min_size=8, max_size=30).filter(
    lambda s: any(c.isalnum() for c in s)
)
hosts = st.sampled_from(["host", "git.example.com", "127.0.0.1:8080", "[::1]:22"])
paths = st.sampled_from(["", "/", "/team.git", "/a/b/team.git/"])
quotes = st.sampled_from(["'", '"', " ", "<", ""])


@given(secrets, hosts, paths, quotes)
def test_a_password_in_the_user_info_is_hidden(
    secret: str, host: str, path: str, quote: str
) -> None:
    url = f"https://bob:SEKRIT{secret}@{host}{path}"
    out = redact(f"fatal: unable to access {quote}{url}{quote}: refused")
    assert "SEKRIT" not in out
    assert f"https://***@{host}{path}" in out


@given(secrets, hosts, paths, quotes, st.sampled_from(["?access_token=", "?a=1&t=", "#"]))
def test_query_and_fragment_values_are_hidden(
    secret: str, host: str, path: str, quote: str, lead: str
) -> None:
    url = f"https://{host}{path}{lead}SEKRIT{secret}"
    out = redact(f"fatal: unable to access {quote}{url}{quote}/: refused")
    assert "SEKRIT" not in out
    if "@" not in secret:  # an "@" may read as the end of user-info: then more is hidden
        assert f"https://{host}" in out


def test_messages_without_urls_are_unchanged() -> None:
    text = "the upstream rejected the push; retry with: git push origin main"
    assert redact(text) == text


def test_every_url_of_a_message_is_redacted() -> None:
    text = (
        "fatal: unable to access 'https://u:pw1@h/x.git?access_token=tok1/': and "
        "ssh://git:pw2@h2/y and http://h3/z#frag3"
    )
    out = redact(text)
    for secret in ("pw1", "tok1", "pw2", "frag3"):
        assert secret not in out
    assert "https://***@h/x.git?***" in out and "ssh://***@h2/y" in out
