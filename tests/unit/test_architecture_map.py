"""ARCHITECTURE.md's contributor map says what is true: every module of the package is named
in its package's entry of the layout, and every `.py` file the page names exists."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "memsync"
PAGE = (REPO / "ARCHITECTURE.md").read_text(encoding="utf-8")
ENTRY = re.compile(r"^ {0,2}(?P<head>[a-z_]+(?:/|\.py))")


def layout() -> list[str]:
    """The lines of the ```-fenced block under `## Layout`."""
    section = PAGE.split("## Layout", 1)[1]
    return section.split("```", 2)[1].splitlines()


def entries() -> dict[str, str]:
    """Each entry of the layout by its head (`roots/`, `cli.py`, ...): its whole text."""
    found: dict[str, str] = {}
    head = ""
    for line in layout():
        match = ENTRY.match(line)
        if match:
            head = match["head"]
            found[head] = ""
        if head:
            found[head] += line + "\n"
    return found


def modules() -> dict[str, list[str]]:
    """Each package of memsync (`` for the top level) and its module names."""
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name in ("__init__.py", "__main__.py"):
            continue
        package = path.parent.relative_to(PACKAGE).as_posix()
        found.setdefault("" if package == "." else package, []).append(path.stem)
    return found


def test_every_module_is_named_in_its_package_entry() -> None:
    named = entries()
    top = "".join(text for head, text in named.items() if head.endswith(".py"))
    missing = []
    for package, names in modules().items():
        if package == "":
            missing += [f"{n}.py" for n in names if not re.search(rf"\b{n}\.py\b", top)]
            continue
        text = named.get(f"{package}/", "")
        assert text, f"the layout has no entry for memsync/{package}/"
        missing += [f"{package}/{n}.py" for n in names if not re.search(rf"\b{n}\b", text)]
    assert missing == [], f"modules the layout does not name: {missing}"


def test_every_file_the_page_names_exists() -> None:
    everywhere = {p.name for p in PACKAGE.rglob("*.py")}
    gone = []
    for head, text in entries().items():
        if head.endswith("/") and head not in ("memsync/", "tests/", "bench/"):
            here = PACKAGE / head
            gone += [
                f"{head}{n}"
                for n in re.findall(r"\b([a-z_]+\.py)\b", text)
                if not (here / n).is_file()
            ]
    for path in re.findall(r"\b((?:[a-z_]+/)+[a-z_]+\.py)\b", PAGE):
        if not (PACKAGE / path).is_file() and not (REPO / path).is_file():
            gone.append(path)
    gone += [n for n in re.findall(r"`([a-z_]+\.py)`", PAGE) if n not in everywhere]
    assert gone == [], f"files the page names that do not exist: {sorted(set(gone))}"


def test_no_module_is_called_the_only_runner_of_git_unless_it_is() -> None:
    """Git runs on the process box from the git runner (`gitcore.py`), whatever module asks."""
    assert "the only module that runs git" not in PAGE
