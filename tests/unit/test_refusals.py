"""Every refusal carries its problems to every renderer (issue 17: `refused (1 problem(s))`
with `"problems": []`)."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Sequence

import pytest

import memsync
from memsync.cli.kit import error_document
from memsync.errors import ConfigError, InternalError, MemsyncError, ProblemError
from memsync.validators.problems import Problem
from memsync.views.archive import ArchiveError
from memsync.views.build import BuildError
from memsync.views.pull import Refused

PROBLEM = Problem("too-large", "dist/MEMORY_big.md", None, "'dist/MEMORY_big.md' is too big")


def _every_subclass(cls: type[MemsyncError]) -> set[type[MemsyncError]]:
    found = set(cls.__subclasses__())
    for sub in list(found):
        found |= _every_subclass(sub)
    return found


def test_every_error_that_carries_problems_is_a_problem_error() -> None:
    """No MemsyncError keeps a `problems` of its own that the renderers would not see."""
    for info in pkgutil.walk_packages(memsync.__path__, "memsync."):
        if info.name.endswith("__main__"):
            continue
        importlib.import_module(info.name)
    classes = _every_subclass(ProblemError)
    assert {ArchiveError, BuildError, Refused} <= classes
    for cls in _every_subclass(MemsyncError):
        if issubclass(cls, ConfigError):  # configuration problems: their own renderer
            continue
        keeps = "problems" in cls.__init__.__code__.co_names
        assert not keeps or issubclass(cls, ProblemError), cls


def _build(problems: Sequence[Problem]) -> ProblemError:
    return BuildError("view auth does not build", problems)


def _refused(problems: Sequence[Problem]) -> ProblemError:
    return Refused("the package was refused", problems)


@pytest.mark.parametrize("make", [ArchiveError, _build, _refused])
def test_a_refusal_is_never_without_its_problems(
    make: Callable[[Sequence[Problem]], ProblemError],
) -> None:
    with pytest.raises(InternalError, match="without problems"):
        make([])
    error = make([PROBLEM])
    document = error_document(error, error.exit_code)
    assert document.error.code == "refused"
    assert [(p.code, p.location, p.message) for p in document.error.problems] == [
        ("too-large", "dist/MEMORY_big.md", PROBLEM.message)
    ]
