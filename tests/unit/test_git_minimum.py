"""The oldest git memsync works with is one number: what its calls need, what `doctor`
checks, what the git-missing hint says and every place the README names it."""

from __future__ import annotations

import re
from pathlib import Path

from memsync.transports.gitversion import MIN_GIT, MIN_GIT_TEXT, REQUIRED_FEATURES

README = Path(__file__).resolve().parents[2] / "README.md"
SOURCES = Path(__file__).resolve().parents[2] / "memsync"
# "git ≥ 2.32", "git >= 2.32", "git 2.32 or newer", "git (2.32 or newer": any way of naming it.
NAMED = re.compile(r"\bgit\W{0,3}(?:≥|>=|version)?\s*\(?\s*(\d+\.\d+)(?:\.\d+)?", re.IGNORECASE)


def test_the_minimum_is_the_newest_feature_memsync_needs() -> None:
    assert max(version for _, version in REQUIRED_FEATURES) == MIN_GIT
    assert f"{MIN_GIT[0]}.{MIN_GIT[1]}" == MIN_GIT_TEXT


def test_the_readme_names_that_minimum_wherever_it_names_one() -> None:
    text = README.read_text(encoding="utf-8")
    named = [m.group(1) for m in NAMED.finditer(text)]
    assert len(named) >= 2, named  # the requirements line and the doctor section at least
    assert set(named) == {MIN_GIT_TEXT}, named


def test_no_source_names_another_minimum() -> None:
    """The number is written once (gitversion.py); doctor and the hint use the constant."""
    for path in SOURCES.rglob("*.py"):
        if path.name == "gitversion.py":
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            assert not re.search(r"git \d+\.\d+ or newer|MIN_GIT = ", line), (path, line)
