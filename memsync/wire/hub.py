"""Wire models of the hub's JSON bodies (CONTRACT §5): errors, health, view lists, publish
results, notify bodies, Server-Sent Event payloads, and the token listings the CLI prints.

The hub renders its answers through these models and clients parse them back with the same
ones, so the two sides cannot drift apart.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, StringConstraints

from memsync.wire.manifest import Sha256Hex, ViewId
from memsync.wire.problem import ProblemModel

CommitId = Annotated[str, StringConstraints(pattern=r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ErrorDetail(_Wire):
    code: str
    message: str


class ErrorBody(_Wire):
    """Every non-2xx answer; `problems` only when a publication was refused as invalid."""

    error: ErrorDetail
    problems: list[ProblemModel] | None = None


class Health(_Wire):
    status: Literal["ok"]


class ViewEntry(_Wire):
    view_id: ViewId
    revision: int
    published_at: str
    expires: str
    sha256: Sha256Hex  # the package's
    length: int  # the package's, in bytes
    manifest_etag: str


class ViewList(_Wire):
    views: list[ViewEntry]


class PublishResult(_Wire):
    """`201` (`created`) or `200` (`unchanged`: the same revision and package again)."""

    status: Literal["created", "unchanged"]
    view_id: ViewId
    revision: int
    sha256: Sha256Hex


class NotifyBody(_Wire):
    commit: CommitId


class NotifyAccepted(_Wire):
    root: str
    commit: CommitId


class RevisionEvent(_Wire):
    """SSE `event: revision`: a view has a new current revision."""

    view_id: ViewId
    revision: int
    sha256: Sha256Hex


class UpstreamEvent(_Wire):
    """SSE `event: upstream`: a root's upstream moved to `commit`."""

    root: str
    commit: CommitId


class TokenEntry(_Wire):
    """One token as `hub token list --json` prints it (never its secret)."""

    id: str
    scopes: list[str]
    label: str | None
    state: Literal["active", "expired", "revoked"]
    created_at: str
    expires_at: str | None
    revoked_at: str | None
    last_used_at: str | None


class TokenList(_Wire):
    tokens: list[TokenEntry]


class TokenCreated(_Wire):
    """`hub init` / `hub token create --json`: the raw token, shown this once."""

    id: str
    token: str
    scopes: list[str]
    label: str | None
    expires_at: str | None
