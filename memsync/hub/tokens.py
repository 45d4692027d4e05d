"""The hub's token store and audit log: `<data_dir>/hub.db`, SQLite in WAL mode, 0600.

A raw token is `msk_<id>_<secret>`: `id` is 16 lowercase hex characters, `secret` is 32
random bytes in base64url without padding. Only the hex SHA-256 of the secret is stored.
A token is looked up by its id and the full hash is compared in constant time; there is no
prefix matching and no scan.

A scope is `<kind>:<name>`, `<kind>:*` (every name), `metrics` (`GET /metrics`: the hub's
counters and every view's name and revision) or `admin` (everything). Views and roots
are separate namespaces: `read:team` says nothing about root `team`, nor `read:*` about roots.
- `read:<view>`: the view's manifest, package, revisions and `revision` events;
- `publish:<view>`: publish revisions of the view, and read it (a publisher must see the
  current revision to pick the next one);
- `root:<root>`: the root's `upstream` events (`GET /v1/events?root=<root>`);
- `notify:<root>`: `POST /v1/roots/<root>/notify`, and the root's events.

Reads never write: `last_used_at` is written at most once a minute per token, by a
separate call the server runs off its event loop. Parsed tokens are cached in process and
the cache is dropped whenever another connection or process commits (`PRAGMA
data_version`), so `hub token revoke` in another process takes effect on the next request.
The audit log records ids, actions and outcomes, never a token or a secret.
"""

from __future__ import annotations

import base64
import builtins
import hashlib
import hmac
import json
import os
import re
import secrets
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from memsync import timefmt
from memsync.atomicfile import FILE_MODE, private_dir
from memsync.errors import UsageError
from memsync.names import NAME_MAX, is_name
from memsync.redaction import TOKENISH

if TYPE_CHECKING:  # the wire model (pydantic) loads for a listed token only
    from memsync.wire.hub import TokenEntry

DB_NAME = "hub.db"
TOKEN_RE = re.compile(r"msk_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")
_TOKENISH = TOKENISH
SCHEMA_VERSION = 1
TOUCH_INTERVAL = 60.0  # seconds between `last_used_at` writes for one token
BUSY_TIMEOUT_MS = 5000
MAX_LABEL = 200
_CACHE_LIMIT = 10_000

AuthReason = Literal["missing", "malformed", "unknown", "expired", "revoked"]

# `<kind>:<name>` or `<kind>:*` (every name); see the module docstring.
SCOPE_KINDS = frozenset({"read", "publish", "root", "notify"})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    id TEXT PRIMARY KEY,
    secret_sha256 TEXT NOT NULL,
    scopes TEXT NOT NULL,
    label TEXT,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT,
    last_used_at TEXT
);
CREATE TABLE IF NOT EXISTS audit (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at TEXT NOT NULL,
    token_id TEXT,
    action TEXT NOT NULL,
    target TEXT,
    outcome TEXT NOT NULL,
    remote TEXT
);
"""


class TokenError(UsageError):
    """A token request cannot be carried out (bad scope, unknown id, not a hub dir…)."""


@dataclass(frozen=True)
class TokenInfo:
    """A token without its secret."""

    id: str
    scopes: tuple[str, ...]
    label: str | None
    created_at: datetime
    expires_at: datetime | None
    revoked_at: datetime | None
    last_used_at: datetime | None

    @property
    def is_admin(self) -> bool:
        return "admin" in self.scopes

    def may_scrape(self) -> bool:
        """Read the hub's metrics (`GET /metrics`), which name every view."""
        return "admin" in self.scopes or "metrics" in self.scopes

    def may_read(self, view: str) -> bool:
        """Read view `view` and receive its `revision` events."""
        return self._grants(view, "read", "publish")

    def may_publish(self, view: str) -> bool:
        """Publish revisions of view `view`."""
        return self._grants(view, "publish")

    def may_watch(self, root: str) -> bool:
        """Receive `upstream` events of root `root`."""
        return self._grants(root, "root", "notify")

    def may_notify(self, root: str) -> bool:
        """Tell the subscribers of root `root` that its upstream moved."""
        return self._grants(root, "notify")

    def _grants(self, name: str, *kinds: str) -> bool:
        s = self.scopes
        return "admin" in s or any(f"{kind}:*" in s or f"{kind}:{name}" in s for kind in kinds)

    def state(self, now: datetime) -> Literal["active", "expired", "revoked"]:
        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= now:
            return "expired"
        return "active"

    def model(self, now: datetime) -> TokenEntry:
        """The token as `hub token list --json` prints it (never its secret)."""
        from memsync.wire.hub import TokenEntry  # noqa: PLC0415

        def stamp(moment: datetime | None) -> str | None:
            return None if moment is None else timefmt.rfc3339(moment)

        return TokenEntry(
            id=self.id,
            scopes=list(self.scopes),
            label=self.label,
            state=self.state(now),
            created_at=timefmt.rfc3339(self.created_at),
            expires_at=stamp(self.expires_at),
            revoked_at=stamp(self.revoked_at),
            last_used_at=stamp(self.last_used_at),
        )


@dataclass(frozen=True)
class AuthFailure:
    """Why a presented token was refused (all of them answer 401)."""

    reason: AuthReason


@dataclass(frozen=True)
class AuditEvent:
    seq: int
    at: datetime
    token_id: str | None
    action: str
    target: str | None
    outcome: str
    remote: str | None


def check_scope(scope: str) -> str:
    """`scope` if it follows the grammar; `TokenError` otherwise."""
    if scope in ("admin", "metrics"):
        return scope
    kind, sep, name = scope.partition(":")
    if sep and kind in SCOPE_KINDS and (name == "*" or is_name(name)):
        return scope
    raise TokenError(
        f"invalid scope {scope[:80]!r}",
        hint="use read:<view>, publish:<view>, root:<root>, notify:<root> (or * for every "
        "name), metrics or admin (names: letters, digits, '_', '.', '-'; at most "
        f"{NAME_MAX} characters)",
    )


def normalize_scopes(scopes: Iterable[str]) -> tuple[str, ...]:
    checked = sorted({check_scope(scope) for scope in scopes})
    if not checked:
        raise TokenError("a token needs at least one scope", hint="pass --scope read:<view>")
    return tuple(checked)


def redact(text: str) -> str:
    """`text` with anything that looks like a token (even a truncated one) replaced."""
    return _TOKENISH.sub("msk_REDACTED", text)


def looks_like_token(text: str) -> bool:
    return _TOKENISH.search(text) is not None


def _digest(secret: str) -> str:
    return hashlib.sha256(secret.encode("ascii")).hexdigest()


def _time(text: str | None) -> datetime | None:
    return timefmt.parse(text) if text else None


def _connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(
        path, timeout=BUSY_TIMEOUT_MS / 1000, isolation_level=None, check_same_thread=False
    )
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    return conn


class TokenStore:
    """Tokens and audit rows in one SQLite file; thread-safe, usable from the CLI and the hub.

    Two connections: the reader serves `authenticate` (on the server's event loop; WAL
    readers never wait for writers), the writer does everything that changes the file.
    """

    def __init__(self, db_path: Path, *, clock: Callable[[], datetime] = timefmt.now) -> None:
        self.path = db_path
        self._clock = clock
        private_dir(db_path.parent)
        fd = os.open(db_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), FILE_MODE)
        os.close(fd)
        if db_path.stat().st_mode & 0o077:
            db_path.chmod(FILE_MODE)
        self._wlock = threading.Lock()
        self._rlock = threading.Lock()
        self._writer = _connect(db_path)
        self._migrate()
        self._reader = _connect(db_path)
        self._version = -1
        self._cache: dict[str, tuple[str, TokenInfo]] = {}
        self._touched: dict[str, float] = {}

    def _migrate(self) -> None:
        with self._wlock:
            version = self._writer.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise TokenError(
                    f"{self.path} was written by a newer memsync (schema {version})",
                    hint="upgrade memsync",
                )
            self._writer.executescript(_SCHEMA)
            self._writer.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")

    def close(self) -> None:
        with self._wlock, self._rlock:
            self._reader.close()
            self._writer.close()

    # -- managing tokens ------------------------------------------------------------------

    def create(
        self,
        scopes: Sequence[str],
        label: str | None = None,
        expires: timedelta | None = None,
    ) -> tuple[str, str]:
        """A new token: `(id, raw_token)`. The raw token is not kept anywhere."""
        checked = normalize_scopes(scopes)
        if label is not None and (
            len(label) > MAX_LABEL or any(ord(ch) < 32 or ord(ch) == 127 for ch in label)
        ):
            raise TokenError(f"a label is one line of at most {MAX_LABEL} characters")
        if expires is not None and expires <= timedelta(0):
            raise TokenError("--expires must be a positive duration, e.g. 30d")
        token_id = secrets.token_hex(8)
        secret = base64.urlsafe_b64encode(secrets.token_bytes(32)).decode("ascii").rstrip("=")
        now = self._clock()
        expires_at = timefmt.rfc3339(now + expires) if expires is not None else None
        with self._wlock:
            self._writer.execute(
                "INSERT INTO tokens (id, secret_sha256, scopes, label, created_at, expires_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (
                    token_id,
                    _digest(secret),
                    json.dumps(list(checked)),
                    label,
                    timefmt.rfc3339(now),
                    expires_at,
                ),
            )
        self.audit("token.create", target=token_id, outcome=",".join(checked))
        return token_id, f"msk_{token_id}_{secret}"

    def list(self) -> list[TokenInfo]:
        """Every token (revoked and expired ones too), oldest first, without secrets."""
        with self._wlock:
            rows = self._writer.execute(
                "SELECT id, scopes, label, created_at, expires_at, revoked_at, last_used_at"
                " FROM tokens ORDER BY created_at, id"
            ).fetchall()
        return [self._info(row) for row in rows]

    def revoke(self, token_id: str) -> bool:
        """Revoke at once; True if it was active, False if it was already revoked."""
        now = timefmt.rfc3339(self._clock())
        with self._wlock:
            cursor = self._writer.execute(
                "UPDATE tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL",
                (now, token_id),
            )
            changed = cursor.rowcount == 1
            known = (
                changed
                or self._writer.execute("SELECT 1 FROM tokens WHERE id = ?", (token_id,)).fetchone()
                is not None
            )
        with self._rlock:
            self._cache.pop(token_id, None)
        if not known:
            raise TokenError(
                f"no token with id {token_id[:40]!r}", hint="see `memsync hub token list`"
            )
        self.audit("token.revoke", target=token_id, outcome="revoked" if changed else "already")
        return changed

    # -- checking tokens ------------------------------------------------------------------

    def authenticate(self, raw: str | None) -> TokenInfo | AuthFailure:
        """The token `raw` names, if it is well-formed, known, unexpired and unrevoked."""
        if not raw:
            return AuthFailure("missing")
        match = TOKEN_RE.fullmatch(raw)
        if match is None:
            return AuthFailure("malformed")
        token_id, secret = match.groups()
        entry = self._lookup(token_id)
        if entry is None or not hmac.compare_digest(entry[0], _digest(secret)):
            return AuthFailure("unknown")
        info = entry[1]
        state = info.state(self._clock())
        if state != "active":
            return AuthFailure(state)
        return info

    def active(self, token_id: str) -> TokenInfo | None:
        """The token `token_id` if it is still usable (re-checks a long-lived stream)."""
        entry = self._lookup(token_id)
        if entry is None or entry[1].state(self._clock()) != "active":
            return None
        return entry[1]

    def _lookup(self, token_id: str) -> tuple[str, TokenInfo] | None:
        with self._rlock:
            version = self._reader.execute("PRAGMA data_version").fetchone()[0]
            if version != self._version:
                self._cache.clear()
                self._version = version
            hit = self._cache.get(token_id)
            if hit is not None:
                return hit
            row = self._reader.execute(
                "SELECT id, scopes, label, created_at, expires_at, revoked_at, last_used_at,"
                " secret_sha256 FROM tokens WHERE id = ?",
                (token_id,),
            ).fetchone()
            if row is None:
                return None
            entry = (str(row[7]), self._info(row[:7]))
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            self._cache[token_id] = entry
            return entry

    @staticmethod
    def _info(row: Sequence[object]) -> TokenInfo:
        created = _time(str(row[3]))
        return TokenInfo(
            id=str(row[0]),
            scopes=tuple(json.loads(str(row[1]))),
            label=None if row[2] is None else str(row[2]),
            created_at=created if created is not None else datetime.min,
            expires_at=_time(None if row[4] is None else str(row[4])),
            revoked_at=_time(None if row[5] is None else str(row[5])),
            last_used_at=_time(None if row[6] is None else str(row[6])),
        )

    def touch_due(self, token_id: str) -> bool:
        """True (once a minute per token) when `last_used_at` should be written now."""
        now = time.monotonic()
        last = self._touched.get(token_id)
        if last is not None and now - last < TOUCH_INTERVAL:
            return False
        if len(self._touched) >= _CACHE_LIMIT:
            self._touched.clear()
        self._touched[token_id] = now
        return True

    def touch(self, token_id: str) -> None:
        """Record that the token was just used (a write: call it off the event loop)."""
        with self._wlock:
            self._writer.execute(
                "UPDATE tokens SET last_used_at = ? WHERE id = ?",
                (timefmt.rfc3339(self._clock()), token_id),
            )

    # -- audit ----------------------------------------------------------------------------

    def audit(
        self,
        action: str,
        *,
        outcome: str,
        target: str | None = None,
        token_id: str | None = None,
        remote: str | None = None,
    ) -> None:
        """Append one audit row. Callers pass ids and names only, never a token."""
        row = (
            timefmt.rfc3339(self._clock()),
            token_id,
            action[:64],
            None if target is None else target[:200],
            outcome[:200],
            None if remote is None else remote[:100],
        )
        with self._wlock:
            self._writer.execute(
                "INSERT INTO audit (at, token_id, action, target, outcome, remote)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                row,
            )

    def audit_events(self, limit: int = 100) -> builtins.list[AuditEvent]:
        """The newest `limit` audit rows, newest first."""
        with self._wlock:
            rows = self._writer.execute(
                "SELECT seq, at, token_id, action, target, outcome, remote FROM audit"
                " ORDER BY seq DESC LIMIT ?",
                (limit,),
            ).fetchall()
        return [
            AuditEvent(
                seq=int(r[0]),
                at=_time(str(r[1])) or datetime.min,
                token_id=r[2],
                action=str(r[3]),
                target=r[4],
                outcome=str(r[5]),
                remote=r[6],
            )
            for r in rows
        ]

    def prune_audit(self, keep: int = 100_000) -> None:
        """Drop all but the newest `keep` audit rows (the log stays bounded)."""
        with self._wlock:
            self._writer.execute(
                "DELETE FROM audit WHERE seq <= (SELECT MAX(seq) FROM audit) - ?", (keep,)
            )


def hub_init(data_dir: Path) -> str:
    """Create a hub data dir (0700) with its database and first admin token; return it raw."""
    if data_dir.exists() and (not data_dir.is_dir() or any(data_dir.iterdir())):
        raise TokenError(
            f"{data_dir} exists and is not an empty directory; refusing to initialise a hub there",
            hint="choose a new or empty directory",
        )
    private_dir(data_dir)
    private_dir(data_dir / "views")
    store = TokenStore(data_dir / DB_NAME)
    try:
        token_id, raw = store.create(["admin"], label="admin (hub init)")
        store.audit("hub.init", target=str(data_dir), outcome="ok", token_id=token_id)
    finally:
        store.close()
    return raw


def open_store(data_dir: Path) -> TokenStore:
    """The token store of an initialised hub data dir (`TokenError` if it is not one)."""
    if not (data_dir / DB_NAME).is_file():
        raise TokenError(
            f"{data_dir} is not a hub data directory (no {DB_NAME})",
            hint=f"create one with `memsync hub init {data_dir}`",
        )
    return TokenStore(data_dir / DB_NAME)
