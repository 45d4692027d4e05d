"""Wire models of `memsync provenance --json`: one item's origin, and one signer's items.

`ItemProvenanceReport.model_json_schema()` and `SignerReport.model_json_schema()` are the
documents' JSON schemas; tests parse the CLI's output back through these models. The
core's values convert themselves (`ItemProvenance.model()`, `Reverted.model()`).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from memsync.wire.problem import ProblemModel

# A key fingerprint as OpenSSH prints it (`SHA256:` and unpadded base64), or "unsigned".
SIGNER_PATTERN = r"^(SHA256:[A-Za-z0-9+/]{43}|unsigned)$"
OperationKind = Literal["sync", "autocommit", "prune", "insight", "repair", "revert"]


class _Wire(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AdmissionModel(_Wire):
    """memsync's journal record of the operation that made or admitted the commit."""

    operation_id: str
    kind: OperationKind
    relation: Literal["made", "admitted"]
    phase: str  # the journal record's phase
    role: str | None  # cycles: the role and its executor (from the run log)
    executor: str | None


class CommitModel(_Wire):
    commit: str
    author: str
    author_email: str
    authored_at: str  # RFC 3339 UTC
    committed_at: str
    subject: str
    signer: str = Field(pattern=SIGNER_PATTERN)
    admission: AdmissionModel | None


class ItemModel(_Wire):
    item: str
    kind: Literal["heading", "node"]
    anchor: str | None  # a heading's anchor kind: "#", "F#", "M#", "S#", "MF#", "MQ#"
    file: str
    line: int
    introduced: CommitModel
    last_changed: CommitModel


class ItemProvenanceReport(_Wire):
    """`memsync provenance ROOT ITEM_ID --json`."""

    root: str
    head: str
    item: ItemModel


class RevertModel(_Wire):
    status: Literal["landed", "refused", "failed", "noop"]
    message: str
    operation_id: str | None
    commit: str | None
    files: list[str]
    removed: list[str]  # every id the commit removes (subtrees included)
    problems: list[ProblemModel]


class SignerReport(_Wire):
    """`memsync provenance ROOT --signer FINGERPRINT [--since DATE] [--revert] --json`."""

    root: str
    head: str
    signer: str = Field(pattern=SIGNER_PATTERN)
    since: str | None
    signed_commits: int  # commits touching memory files that key signed (in range)
    items: list[ItemModel]
    revert: RevertModel | None  # None without --revert
