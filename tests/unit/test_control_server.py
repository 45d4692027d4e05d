"""The control server's request head parser (`daemon.server.parse_head`): what a client
writes is read back as written, and anything else is a bad request, never an exception of
another kind nor a head with room for a second request (issue 18)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.daemon.server import MAX_HEADERS, _BadRequest, parse_head

TOKEN = st.text("abcdefghijklmnopqrstuvwxyz-ABCXYZ0123456789", min_size=1, max_size=12)
VALUE = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=20)
PATH = st.lists(TOKEN, max_size=3).map(lambda parts: "/" + "/".join(parts))


@given(
    st.sampled_from(["GET", "HEAD", "POST", "DELETE"]),
    PATH,
    st.none() | VALUE,
    st.sampled_from(["HTTP/1.0", "HTTP/1.1"]),
    st.dictionaries(TOKEN, VALUE, max_size=5),
)
def test_a_clients_head_is_read_as_written(
    method: str, path: str, query: str | None, version: str, headers: dict[str, str]
) -> None:
    unique = {k.lower(): v for k, v in headers.items()}
    target = path if query is None else f"{path}?{query}"
    lines = [f"{method} {target} {version}", *(f"{k}: {v}" for k, v in unique.items())]
    head = parse_head(("\r\n".join(lines) + "\r\n\r\n").encode())
    assert (head.method, head.path, head.version, head.headers) == (method, path, version, unique)


@given(st.sampled_from([b"", b"GET /v1/status HTTP/1.1\r\n"]), st.binary(max_size=200))
def test_any_bytes_are_a_head_or_a_bad_request(line: bytes, raw: bytes) -> None:
    try:
        head = parse_head(line + raw + b"\r\n\r\n")
    except _BadRequest:
        return
    assert head.method.isalpha() and head.path.startswith("/")
    for name, value in head.headers.items():  # no control character but a tab
        assert name.isprintable() and " " not in name
        assert all(c == "\t" or (" " <= c != "\x7f") for c in value), value


@pytest.mark.parametrize(
    "raw",
    [
        b"GET /v1/status\r\n\r\n",  # no version
        b"GET /v1/status HTTP/2.0\r\n\r\n",
        b"get /v1/status HTTP/1.1\r\n\r\n",
        b"GET v1/status HTTP/1.1\r\n\r\n",
        b"GET /v1/ status HTTP/1.1\r\n\r\n",
        b"GET /v1/status HTTP/1.1\r\nNoColon\r\n\r\n",
        b"GET /v1/status HTTP/1.1\r\n Folded: x\r\n\r\n",
        b"GET /v1/status HTTP/1.1\r\nX: a\rb\r\n\r\n",
        b"GET /v1/status HTTP/1.1\r\nX: a\x00b\r\n\r\n",
        b"POST /v1/sync HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
        b"GET /v1/status HTTP/1.1\r\n" + b"X: y\r\n" * (MAX_HEADERS + 1) + b"\r\n",
    ],
)
def test_what_is_not_http_is_a_bad_request(raw: bytes) -> None:
    with pytest.raises(_BadRequest):
        parse_head(raw)
