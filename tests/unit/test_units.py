"""Durations, sizes and the other scalar value checks in memsync.config.units."""

from __future__ import annotations

import base64
from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memsync.config.units import (
    check_branch,
    check_http_url,
    check_listen,
    check_name,
    check_public_key,
    check_repo_path,
    format_duration,
    format_size,
    parse_duration,
    parse_size,
)
from memsync.names import NAME_MAX

durations = st.integers(min_value=0, max_value=10**12).map(lambda ms: timedelta(milliseconds=ms))


@given(durations)
def test_duration_round_trip(value: timedelta) -> None:
    assert parse_duration(format_duration(value)) == value


@given(st.integers(min_value=0, max_value=10**18 - 1))
def test_size_round_trip(value: int) -> None:
    assert parse_size(format_size(value)) == value


@given(st.integers(min_value=0, max_value=10**6), st.sampled_from(["ms", "s", "m", "h", "d"]))
def test_every_written_duration_parses(number: int, unit: str) -> None:
    factor = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}[unit]
    assert parse_duration(f"{number}{unit}").total_seconds() == pytest.approx(number * factor)


@given(st.text(max_size=12))
def test_duration_parser_accepts_only_the_strict_form(text: str) -> None:
    try:
        value = parse_duration(text)
    except ValueError as exc:
        assert "<int><ms|s|m|h|d>" in str(exc) or "too large" in str(exc)
    else:
        assert text[:1].isdigit()
        assert parse_duration(format_duration(value)) == value


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("60s", timedelta(seconds=60)),
        ("0s", timedelta(0)),
        ("250ms", timedelta(milliseconds=250)),
        ("50m", timedelta(minutes=50)),
        ("2h", timedelta(hours=2)),
        ("7d", timedelta(days=7)),
    ],
)
def test_parse_duration(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    "text",
    ["60", "60x", " 60s", "60s ", "6 0s", "1.5m", "-5s", "+5s", "s", "", "60S", "٣s", "5sec"],
)
def test_parse_duration_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"<int><ms\|s\|m\|h\|d>"):
        parse_duration(text)


@pytest.mark.parametrize("value", [60, True, None, 1.5, ["60s"]])
def test_parse_duration_rejects_non_strings(value: object) -> None:
    with pytest.raises(ValueError, match="use <int>"):
        parse_duration(value)


def test_parse_duration_too_large() -> None:
    with pytest.raises(ValueError, match="too large"):
        parse_duration("999999999999999d")


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0B", 0), ("512B", 512), ("4KiB", 4096), ("4MiB", 4 * 1024**2), ("2GiB", 2 * 1024**3)],
)
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["4MB", "4mib", "4", "4 MiB", "1.5MiB", "-1B", "MiB", "4KB"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match=r"<int><B\|KiB\|MiB\|GiB>"):
        parse_size(text)


def test_parse_size_bare_number_says_unit_missing() -> None:
    with pytest.raises(ValueError, match="no unit"):
        parse_size(4096)


@pytest.mark.parametrize(
    ("value", "text"),
    [(timedelta(seconds=90), "90s"), (timedelta(minutes=60), "1h"), (timedelta(0), "0s")],
)
def test_format_duration_picks_largest_exact_unit(value: timedelta, text: str) -> None:
    assert format_duration(value) == text


def test_format_rejects_what_cannot_be_written() -> None:
    with pytest.raises(ValueError, match="negative"):
        format_duration(timedelta(seconds=-1))
    with pytest.raises(ValueError, match="milliseconds"):
        format_duration(timedelta(microseconds=5))
    with pytest.raises(ValueError, match="negative"):
        format_size(-1)
    assert format_size(1024**2 + 1) == f"{1024**2 + 1}B"


@pytest.mark.parametrize("name", ["personal", "a", "team-auth", "v1.2_x", "9" * NAME_MAX])
def test_names_accepted(name: str) -> None:
    assert check_name(name) == name


@pytest.mark.parametrize("name", ["", "-a", ".a", "a b", "a/b", "9" * (NAME_MAX + 1), "é"])
def test_names_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="invalid name"):
        check_name(name)


@pytest.mark.parametrize("value", ["127.0.0.1:8765", "localhost:80", "[::1]:9464", "h.example:1"])
def test_listen_accepted(value: str) -> None:
    assert check_listen(value) == value


@pytest.mark.parametrize(
    "value", ["localhost", ":80", "host:0", "host:65536", "host:x", "::1:80", "[zz]:80", "a b:1"]
)
def test_listen_rejected(value: str) -> None:
    with pytest.raises(ValueError):
        check_listen(value)


def test_http_url_rules() -> None:
    assert check_http_url("https://hub.example/v1") == "https://hub.example/v1"
    for bad in ["ftp://x", "https://", "hub.example", "https://a b", "https://h:99999"]:
        with pytest.raises(ValueError):
            check_http_url(bad)
    with pytest.raises(ValueError, match="credentials") as caught:
        check_http_url("https://user:s3cret@hub.example")
    assert "s3cret" not in str(caught.value)


@pytest.mark.parametrize("name", ["main", "feature/x", "release-1.2"])
def test_branch_accepted(name: str) -> None:
    assert check_branch(name) == name


@pytest.mark.parametrize("name", ["", "-x", "a..b", "a b", "x.lock", "x/", "@", "a:b", "a@{1}"])
def test_branch_rejected(name: str) -> None:
    with pytest.raises(ValueError, match="branch"):
        check_branch(name)


def test_repo_path() -> None:
    assert check_repo_path("shares/auth") == "shares/auth"
    assert check_repo_path(".") == "."
    for bad in ["/abs", "a/../b", "a//b", "a\\b", "", "a/"]:
        with pytest.raises(ValueError):
            check_repo_path(bad)


@given(st.binary(min_size=32, max_size=32))
def test_public_keys_of_32_bytes_accepted(raw: bytes) -> None:
    key = "ed25519:" + base64.urlsafe_b64encode(raw).decode().rstrip("=")
    assert check_public_key(key) == key


@given(st.binary(max_size=40).filter(lambda raw: len(raw) != 32))
def test_public_keys_of_other_lengths_rejected(raw: bytes) -> None:
    key = "ed25519:" + base64.urlsafe_b64encode(raw).decode().rstrip("=")
    with pytest.raises(ValueError, match="32 bytes"):
        check_public_key(key)


def test_public_key_form() -> None:
    body = base64.urlsafe_b64encode(bytes(32)).decode()
    for bad in [body.rstrip("="), "ed25519:" + body, "ed25519:" + body[:42] + "B", "rsa:x"]:
        with pytest.raises(ValueError, match="ed25519:"):
            check_public_key(bad)
