"""The wire model of one problem (`code`, `path`, `line`, `message`): shared by the CLI's
documents (`wire.cli`), the hub's refusals (`wire.hub`) and provenance, and small on its
own, so that a hub loads none of the CLI's models (issue 18)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from memsync.validators.problems import Problem


class ProblemModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    code: str
    path: str | None
    line: int | None
    message: str

    @classmethod
    def of(cls, problem: Problem) -> ProblemModel:
        return cls(code=problem.code, path=problem.path, line=problem.line, message=problem.message)
