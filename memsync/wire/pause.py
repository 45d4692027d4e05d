"""Wire models of `memsync pause` / `resume`: the control socket's requests and the
`--json` document both print (the same from the daemon and from the CLI alone)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict


class PauseRequest(BaseModel):
    """`POST /v1/pause`: hold `name` until `until` (RFC 3339), or until resumed."""

    model_config = ConfigDict(extra="forbid")
    name: str
    kind: Literal["root", "view"] | None = None
    until: str | None = None


class ResumeRequest(BaseModel):
    """`POST /v1/resume`: let `name` run again (one cycle runs at once under a daemon)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    kind: Literal["root", "view"] | None = None


class PauseReport(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["root", "view"]
    name: str
    paused: bool  # held now
    until: str | None  # when paused: None means until `memsync resume`
    message: str
