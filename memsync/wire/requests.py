"""Wire models of the control socket's request bodies (pydantic): what decides any body
that `daemon.requests` does not read by itself, with the same verdicts and words as ever.
Loaded only for such a body (issue 18: no pydantic at rest)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class SyncRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    roots: list[str] = []
    accept_rewrite: bool = False
    dry_run: bool = False
    no_push: bool = False


class PullRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    views: list[str] = []


class CycleRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    root: str
    force: bool = False
