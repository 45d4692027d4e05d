"""The hub's token store against a real SQLite file: format, hashing, scopes, expiry,
revocation across connections, audit, permissions, and `hub init`."""

from __future__ import annotations

import re
import sqlite3
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from memsync.hub.tokens import (
    DB_NAME,
    AuthFailure,
    AuthReason,
    TokenError,
    TokenInfo,
    TokenStore,
    check_scope,
    hub_init,
    open_store,
    redact,
)
from memsync.names import NAME_MAX
from memsync.wire.hub import TokenCreated, TokenList

TOKEN_FORM = re.compile(r"msk_[0-9a-f]{16}_[A-Za-z0-9_-]{43}")


@pytest.fixture
def store(tmp_path: Path) -> TokenStore:
    return TokenStore(tmp_path / "hub" / DB_NAME)


def raw_bytes(db: Path) -> bytes:
    return b"".join(p.read_bytes() for p in db.parent.glob(db.name + "*"))


def test_create_returns_a_well_formed_token_that_authenticates(store: TokenStore) -> None:
    token_id, raw = store.create(["read:auth", "publish:auth"], label="ci")
    assert TOKEN_FORM.fullmatch(raw)
    assert raw.startswith(f"msk_{token_id}_")
    info = store.authenticate(raw)
    assert isinstance(info, TokenInfo)
    assert info.id == token_id
    assert info.scopes == ("publish:auth", "read:auth")
    assert info.label == "ci"
    assert info.expires_at is None


def test_failures_say_why(store: TokenStore) -> None:
    token_id, raw = store.create(["read:*"])
    other_id, other = store.create(["read:*"])
    store.revoke(other_id)
    wrong_secret = raw[:-4] + ("AAAA" if not raw.endswith("AAAA") else "BBBB")
    unknown_id = "msk_" + "0" * 16 + raw[len(f"msk_{token_id}") :]
    cases: dict[str | None, AuthReason] = {
        None: "missing",
        "": "missing",
        "nope": "malformed",
        raw + "x": "malformed",
        raw.upper(): "malformed",
        wrong_secret: "unknown",
        unknown_id: "unknown",
        other: "revoked",
    }
    for presented, reason in cases.items():
        assert store.authenticate(presented) == AuthFailure(reason), presented


def test_only_the_full_secret_matches(store: TokenStore) -> None:
    token_id, raw = store.create(["read:*"])
    secret = raw.split("_", 2)[2]
    for cut in (1, 8, 42):
        shorter = f"msk_{token_id}_{secret[:cut]}"
        assert isinstance(store.authenticate(shorter), AuthFailure)


def test_expiry(tmp_path: Path) -> None:
    db = tmp_path / "hub" / DB_NAME
    past = TokenStore(db, clock=lambda: datetime.now(UTC) - timedelta(days=2))
    _, old = past.create(["read:*"], expires=timedelta(hours=1))
    _, fresh = past.create(["read:*"], expires=timedelta(days=30))
    store = TokenStore(db)
    assert store.authenticate(old) == AuthFailure("expired")
    assert isinstance(store.authenticate(fresh), TokenInfo)
    with pytest.raises(TokenError):
        store.create(["read:*"], expires=timedelta(0))


def test_revocation_from_another_connection_is_seen_at_once(tmp_path: Path) -> None:
    db = tmp_path / "hub" / DB_NAME
    server, cli = TokenStore(db), TokenStore(db)
    token_id, raw = cli.create(["read:auth"])
    assert isinstance(server.authenticate(raw), TokenInfo)  # now cached in `server`
    assert cli.revoke(token_id) is True
    assert server.authenticate(raw) == AuthFailure("revoked")
    assert server.active(token_id) is None
    assert cli.revoke(token_id) is False  # already revoked: idempotent
    with pytest.raises(TokenError):
        cli.revoke("0123456789abcdef")


def test_scope_grammar(store: TokenStore) -> None:
    for good in (
        "admin",
        "read:*",
        "publish:*",
        "read:team-auth",
        "publish:a.b_c",
        "read:" + "x" * NAME_MAX,
        "root:team",
        "root:*",
        "notify:team",
        "notify:*",
        "metrics",
    ):
        assert check_scope(good) == good
    bad = ["", "read", "read:", "write:auth", "read:../x", "read:.hidden", "read:a b", "ADMIN",
           "read:" + "x" * (NAME_MAX + 1), "publish:a/b", "read:*x", "root", "root:", "roots:team",
           "notify:a/b", "root:*x", "admin:team", "metrics:*", "metrics:team", "METRICS",
           "metrics:"]  # fmt: skip
    for scope in bad:
        with pytest.raises(TokenError):
            check_scope(scope)
    with pytest.raises(TokenError):
        store.create([])
    with pytest.raises(TokenError):
        store.create(["read:auth"], label="two\nlines")


def test_scope_meaning(store: TokenStore) -> None:
    def info(*scopes: str) -> TokenInfo:
        result = store.authenticate(store.create(list(scopes))[1])
        assert isinstance(result, TokenInfo)
        return result

    reader, star, publisher, admin = (
        info("read:auth"),
        info("read:*"),
        info("publish:auth"),
        info("admin"),
    )
    assert reader.may_read("auth") and not reader.may_read("ops")
    assert not reader.may_publish("auth")
    assert star.may_read("ops") and not star.may_publish("ops")
    assert publisher.may_publish("auth") and publisher.may_read("auth")
    assert not publisher.may_publish("ops") and not publisher.may_read("ops")
    assert admin.may_publish("anything") and admin.may_read("anything") and admin.is_admin
    assert admin.may_watch("anything") and admin.may_notify("anything")


def test_views_and_roots_have_separate_scopes(store: TokenStore) -> None:
    def info(*scopes: str) -> TokenInfo:
        result = store.authenticate(store.create(list(scopes))[1])
        assert isinstance(result, TokenInfo)
        return result

    for scope in ("read:team", "read:*", "publish:team", "publish:*"):
        view = info(scope)
        assert view.may_read("team"), scope
        assert not view.may_watch("team") and not view.may_notify("team"), scope
    watcher, notifier = info("root:team"), info("notify:team")
    assert watcher.may_watch("team") and not watcher.may_watch("ops")
    assert not watcher.may_notify("team")
    assert notifier.may_notify("team") and notifier.may_watch("team")
    assert not notifier.may_notify("ops") and not notifier.may_watch("ops")
    for root in (watcher, notifier, info("root:*"), info("notify:*")):
        assert not root.may_read("team") and not root.may_publish("team")
    assert info("root:*").may_watch("ops") and not info("root:*").may_notify("ops")
    assert info("notify:*").may_notify("ops") and info("notify:*").may_watch("ops")


def test_list_shows_no_secrets_and_persists(tmp_path: Path) -> None:
    db = tmp_path / "hub" / DB_NAME
    store = TokenStore(db)
    token_id, raw = store.create(["read:auth"], label="laptop", expires=timedelta(days=1))
    store.close()
    again = TokenStore(db)
    [listed] = again.list()
    assert listed.id == token_id and listed.label == "laptop"
    assert listed.expires_at is not None and listed.revoked_at is None
    assert raw.split("_", 2)[2] not in repr(listed)
    assert isinstance(again.authenticate(raw), TokenInfo)


def test_secrets_never_reach_the_file(tmp_path: Path) -> None:
    db = tmp_path / "hub" / DB_NAME
    store = TokenStore(db)
    raws = [store.create(["read:*"], label=f"t{i}")[1] for i in range(5)]
    store.authenticate(raws[0])
    store.revoke(store.list()[1].id)
    data = raw_bytes(db)
    for raw in raws:
        assert raw.encode() not in data
        assert raw.split("_", 2)[2].encode() not in data


def test_files_are_private_and_wal(tmp_path: Path) -> None:
    db = tmp_path / "hub" / DB_NAME
    store = TokenStore(db)
    store.create(["admin"])
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    assert stat.S_IMODE(db.parent.stat().st_mode) == 0o700
    for extra in db.parent.glob(DB_NAME + "-*"):
        assert stat.S_IMODE(extra.stat().st_mode) == 0o600
    with sqlite3.connect(db) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_last_used_is_written_at_most_once_a_minute(store: TokenStore) -> None:
    token_id, raw = store.create(["read:*"])
    assert store.touch_due(token_id) is True
    assert store.touch_due(token_id) is False
    store.touch(token_id)
    [listed] = store.list()
    assert listed.last_used_at is not None
    assert isinstance(store.authenticate(raw), TokenInfo)


def test_audit_records_ids_never_tokens(store: TokenStore) -> None:
    token_id, raw = store.create(["read:*"])
    store.revoke(token_id)
    store.audit("auth.refuse", outcome="unknown-token", remote="127.0.0.1")
    events = store.audit_events()
    assert [e.action for e in events] == ["auth.refuse", "token.revoke", "token.create"]
    assert events[1].target == token_id
    assert all(raw not in repr(e) for e in events)
    for _ in range(10):
        store.audit("x", outcome="y")
    store.prune_audit(keep=4)
    assert len(store.audit_events(limit=100)) == 4


def test_hub_init_creates_a_private_dir_and_an_admin_token(tmp_path: Path) -> None:
    data = tmp_path / "hub"
    raw = hub_init(data)
    assert TOKEN_FORM.fullmatch(raw)
    assert stat.S_IMODE(data.stat().st_mode) == 0o700
    store = open_store(data)
    info = store.authenticate(raw)
    assert isinstance(info, TokenInfo) and info.is_admin
    assert [e.action for e in store.audit_events()][:1] == ["hub.init"]
    with pytest.raises(TokenError):
        hub_init(data)  # no longer empty


def test_hub_init_refuses_non_empty_dirs_and_files(tmp_path: Path) -> None:
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    with pytest.raises(TokenError):
        hub_init(busy)
    assert sorted(p.name for p in busy.iterdir()) == ["notes.txt"]
    a_file = tmp_path / "file"
    a_file.write_text("x")
    with pytest.raises(TokenError):
        hub_init(a_file)
    empty = tmp_path / "empty"
    empty.mkdir()
    hub_init(empty)  # an empty existing dir is fine
    with pytest.raises(TokenError):
        open_store(tmp_path / "nowhere")


def test_redact_hides_tokens_even_truncated(store: TokenStore) -> None:
    _, raw = store.create(["read:*"])
    for text in (raw, raw[:20], f"/v1/x?token={raw}&view=a", f"MSK_{raw[4:]}"):
        shown = redact(text)
        assert raw[4:20] not in shown  # not even the id survives
        assert "msk_REDACTED" in shown


def test_wire_listing_round_trips(store: TokenStore) -> None:
    token_id, raw = store.create(["read:auth"], label="ci", expires=timedelta(days=1))
    store.revoke(store.create(["admin"])[0])
    now = datetime.now(UTC)
    listing = TokenList(tokens=[info.model(now) for info in store.list()])
    text = listing.model_dump_json()
    assert raw.split("_", 2)[2] not in text
    again = TokenList.model_validate_json(text)
    states = {e.id: e.state for e in again.tokens}
    assert states[token_id] == "active"
    assert {e.state for e in again.tokens} == {"active", "revoked"}
    created = TokenCreated(
        id=token_id, token=raw, scopes=["read:auth"], label="ci", expires_at=None
    )
    assert TokenCreated.model_validate_json(created.model_dump_json()) == created
