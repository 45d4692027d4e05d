"""Problems (code, path, line, message) and the Report that collects them."""

from __future__ import annotations

from collections.abc import Iterable

from memsync.values import field, value


@value(order=True)
class Problem:
    """One rule violation. `code` is a CONTRACT §3 problem code."""

    code: str
    path: str | None
    line: int | None
    message: str

    def document(self) -> dict[str, object]:
        """Its `--json` object (CONTRACT: `code`, `path`, `line`, `message`)."""
        return {"code": self.code, "path": self.path, "line": self.line, "message": self.message}


@value
class Report:
    """The outcome of validating one tree."""

    problems: tuple[Problem, ...] = ()
    files: int = 0
    items: int = 0

    @property
    def ok(self) -> bool:
        return not self.problems

    def codes(self) -> set[str]:
        return {p.code for p in self.problems}


def _dedupe(problems: Iterable[Problem]) -> tuple[Problem, ...]:
    seen: set[Problem] = set()
    out: list[Problem] = []
    for problem in problems:
        if problem not in seen:
            seen.add(problem)
            out.append(problem)
    return tuple(out)


@value(frozen=False)
class ProblemList:
    """A small accumulator used while a validator runs."""

    items: list[Problem] = field(default_factory=list)

    def add(self, code: str, path: str | None, message: str, line: int | None = None) -> None:
        self.items.append(Problem(code=code, path=path, line=line, message=message))

    def report(self, *, files: int = 0, items: int = 0) -> Report:
        return Report(problems=_dedupe(self.items), files=files, items=items)
