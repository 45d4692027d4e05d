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


def hand_built_bodies(source: str) -> list[int]:
    """Lines where a request to the daemon (`call`, `call_serving`) is sent a dict literal,
    directly or through a name the same function binds to one."""
    found: list[int] = []
    for func in ast.walk(ast.parse(source)):
        if not isinstance(func, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        dicts = {
            target.id
            for node in ast.walk(func)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for node in ast.walk(func):
            if not isinstance(node, ast.Call):
                continue
            name = getattr(node.func, "id", getattr(node.func, "attr", None))
            if name not in ("call", "call_serving"):
                continue
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Dict) or (isinstance(arg, ast.Name) and arg.id in dicts):
                    found.append(node.lineno)
    return found


def test_requests_to_the_daemon_are_wire_documents() -> None:
    # Every control-socket body the CLI sends is made from wire's one definition
    # (`wire.requests`, `wire.pause`), never a dict written at the call.
    package = Path(memsync.wire.__file__).parent.parent
    for path in sorted(package.rglob("*.py")):
        lines = hand_built_bodies(path.read_text(encoding="utf-8"))
        assert not lines, f"{path.relative_to(package)}:{lines} sends a hand-built body"


def test_the_check_sees_a_hand_built_body() -> None:
    source = (
        "def a():\n    call_serving(s, c, 'POST', '/v1/x', {'k': 1})\n"
        "def b():\n    body = {'k': 1}\n    client.call(s, 'POST', '/v1/x', body)\n"
        "def c():\n    call_serving(s, c, 'POST', '/v1/x', Request(k=1).document())\n"
    )
    assert hand_built_bodies(source) == [2, 5]
