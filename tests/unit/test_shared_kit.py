"""The tests and the benchmarks keep one copy of what they share (`tests/kit.py`): the git
environment, raw git, a root's settings, polling, a free port, the hub launcher and a signed
view release; and `python -m bench` still imports from the repository root."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "tests" / "kit.py"
SHARED = {"git", "free_port", "_port", "wait", "wait_for", "settings_for"}
SHARED_CONTEXTS = {"hub", "hub_process", "running_hub"}
# A launcher of its own, and why: restarts on the same port, SIGTERM's exit status, workers.
OWN_LAUNCHER = {"tests/e2e/test_hub_workers.py"}
MANIFEST_RULES = {"test_manifest.py"}  # the tests of `build_signed` itself


def sources() -> list[Path]:
    return [p for p in sorted([*REPO.glob("bench/*.py"), *REPO.glob("tests/**/*.py")]) if p != KIT]


def uses(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def copies(path: Path) -> list[str]:
    """What `path` defines again of the kit: its functions, the git identity, settings."""
    found = []
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in tree.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        if node.name in SHARED and not uses(node, "settings_for"):  # a wrapper is no copy
            found.append(f"def {node.name}")
        launches = uses(node, "hub_process") or uses(node, "running_hub")
        if node.name in SHARED_CONTEXTS and not launches:
            found.append(f"def {node.name} (its own hub launcher)")
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict) and any(
            isinstance(k, ast.Constant) and k.value == "GIT_AUTHOR_NAME" for k in node.keys
        ):
            found.append(f"a git identity at line {node.lineno}")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "RootSettings":
                found.append(f"RootSettings(...) at line {node.lineno}")
            if node.func.id == "build_signed" and path.name not in MANIFEST_RULES:
                found.append(f"a release signed by hand at line {node.lineno}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "Popen"
            and "hub" in ast.unparse(node)
            and "serve" in ast.unparse(node)
        ):
            found.append(f"`hub serve` started at line {node.lineno}")
    return found


def test_tests_and_bench_keep_one_copy_of_the_kit() -> None:
    found = {
        path.relative_to(REPO).as_posix(): kept for path in sources() if (kept := copies(path))
    }
    for name in OWN_LAUNCHER:
        found.pop(name, None)
    assert found == {}, f"copies of tests/kit.py: {found}"


def test_bench_imports_from_the_repository_root() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "import bench.__main__"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
