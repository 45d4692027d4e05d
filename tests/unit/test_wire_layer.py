"""`memsync.wire` is the bottom of the stack for documents that cross a process: producers
convert their values to wire models, wire never imports a producer (issue 20). An
allowlist: the standard library, pydantic, other wire modules, and two plain values of the
bottom layer (`Problem`, the name rule). The import-linter contract in pyproject.toml
states the same for the subpackages; this also covers the top-level modules and imports
inside functions."""

from __future__ import annotations

import ast
from pathlib import Path

import memsync.wire

ALLOWED = {"memsync.validators.problems", "memsync.names"}


def imported(source: str) -> set[str]:
    """Every module an `import` or `from ... import` statement anywhere in `source` names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None and not node.level:
            names.add(node.module)
            # `from memsync import timefmt` imports a module named by the alias
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def ours(name: str) -> bool:
    return name == "memsync" or name.startswith("memsync.")


def test_wire_imports_no_producer() -> None:
    folder = Path(memsync.wire.__file__).parent
    files = sorted(folder.glob("*.py"))
    assert files
    for path in files:
        for name in imported(path.read_text(encoding="utf-8")):
            if not ours(name):
                continue
            # `from memsync.validators.problems import Problem` also names `...problems.Problem`
            allowed = any(name == a or name.startswith(a + ".") for a in {*ALLOWED, "memsync.wire"})
            assert allowed, f"{path.name} imports {name}"


def test_the_check_sees_a_producer() -> None:
    found = imported(
        "def f():\n    from memsync.roots.result import SyncResult\n"
        "from memsync import timefmt\nimport memsync.daemon.app\n"
    )
    assert {"memsync.roots.result", "memsync.timefmt", "memsync.daemon.app"} <= found
