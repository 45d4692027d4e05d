"""Only the git box runs git: no module outside `memsync/transports/` calls the box's raw
runner (`run`, `out`, `session`) on a git object; it calls a named method of `Git`
(`transports/gitfacts.py`, `gitcommits.py`, `git.py`, `gittree.py`) that fixes the
arguments and parses the answer.

The scan is an allowlist: every `.run(` / `.out(` / `.session(` call outside the box must
be on a receiver named below, each with the reason it is not git. A new call on anything
else (a git box under any name) fails here.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import memsync

PACKAGE = Path(memsync.__file__).parent
RAW = frozenset({"run", "out", "session"})

# Receivers that are never a git box, in any module
NEVER_GIT: dict[str, str] = {"asyncio": "the stdlib event loop (`asyncio.run`)"}

# (module, receiver as written) -> why that call is not the git box's raw runner
NOT_GIT: dict[tuple[str, str], str] = {
    ("views/pull.py", "puller"): "the view puller's own run loop",
    ("daemon/app.py", "Daemon(settings, load)"): "the daemon's main loop",
    ("hub/workers.py", "Supervisor(data_dir, sockets, limits or Limits(), stop_grace)"): (
        "the hub supervisor"
    ),
    ("cycles/turn.py", "_Turn(root, cycle, role, layout, resident)"): "one role turn",
    ("validators/document.py", "scanner"): "the document scanner",
    ("validators/graph.py", "join"): "the graph join",
    ("validators/graph.py", "chosen"): "the parse cache's session (a file, not git)",
    ("validators/crossfile.py", "_Join(tree, profile, source)"): "the cross-file join",
    ("roots/cycle.py", "cycle"): "one sync cycle",
    ("roots/revocation.py", "_Revert(root, layout, commit_signer(root))"): "one revert",
    ("roots/provenance.py", "self.records"): "the journal's run records",
    ("__main__.py", "plain"): "the plain-argument CLI (memsync/cli/plain.py)",
}


def calls_in(source: str, module: str) -> list[tuple[str, str, str, int]]:
    """(module, receiver, method, line) of every `.run/.out/.session(` call in `source`."""
    return [
        (module, ast.unparse(node.func.value), node.func.attr, node.lineno)
        for node in ast.walk(ast.parse(source, module))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in RAW
    ]


@functools.cache
def raw_calls() -> list[tuple[str, str, str, int]]:
    """Every such call in the package, outside the box (`transports/`): read once per
    process (both tests below ask; each read parses the package, ~0.5 s of CPU)."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        if not module.startswith("transports/"):
            found += calls_in(path.read_text(encoding="utf-8"), module)
    return found


def test_no_module_outside_the_box_runs_git() -> None:
    stray = [
        f"{module}:{line}: {receiver}.{method}(...)"
        for module, receiver, method, line in raw_calls()
        if (module, receiver) not in NOT_GIT and receiver not in NEVER_GIT
    ]
    assert not stray, "name the git call in the box (transports/git*.py) instead:\n" + "\n".join(
        stray
    )


def test_the_allowlist_has_no_stale_entries() -> None:
    seen = {(module, receiver) for module, receiver, _method, _line in raw_calls()}
    assert set(NOT_GIT) <= seen, sorted(set(NOT_GIT) - seen)


def test_the_scan_finds_raw_git_calls_under_any_name() -> None:
    """The scan is not vacuous: git's raw runner is found however the box is named and
    however the call is spelled (chained, multi-line, through `self`)."""
    source = """
def f(git, box, self):
    git.run("log", "--format=%s")
    done = box.out(
        "rev-parse", "HEAD"
    ).strip()
    self.git.run("merge-base", "--all", "a", "b", check=False).stdout.split()
    Git(Path("/"), timeout=10).run("--version", check=False)
    return git.at(path).session("cat-file", "--batch")
"""
    found = {receiver for _m, receiver, _f, _l in calls_in(source, "roots/example.py")}
    assert found == {"git", "box", "self.git", "Git(Path('/'), timeout=10)", "git.at(path)"}
