"""What a one-shot `memsync cycle` loads (issue 18, item 5): a turn through an agent CLI
(`executor: command`) loads neither the HTTP client of the `openai` executor (aiohttp,
asyncio) nor its answer parser, nor the wire models it prints without (pydantic), nor
GitPython (a one-shot git box asks git), also when it pushes what landed; the document it
prints is the model's text. What it loaded is frozen before the turn runs: the turn's
garbage collections never walk the modules again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memsync.wire.cli import CycleReport
from tests.conftest import Team
from tests.e2e.test_cycle_crash import MEMORY, command_role, configure
from tests.e2e.test_startup import PROBE
from tests.helpers import GIT_ENV, commit, git

HEAVY = (
    "pydantic",
    "pydantic_core",
    "aiohttp",
    "git",
    "gitdb",
    "memsync.wire.cli",
    "memsync.cycles.chat",
    "memsync.cycles.answers",
    "memsync.transports.http",
    "click",  # `cycle KIND ROOT` is a plain form (`cli.plain`): no click, no command group
    "memsync.cli.group",
)


def probe_frozen(*args: str) -> tuple[int, list[str], int, str, str]:
    """test_startup's probe of `memsync ARGS`, and how many objects were frozen by its end:
    exit code, heavy modules imported, frozen objects, stdout, the rest of stderr."""
    script = PROBE + "print('FROZEN', __import__('gc').get_freeze_count(), file=sys.stderr)\n"
    done = subprocess.run(
        [sys.executable, "-c", script, ",".join(HEAVY), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **GIT_ENV},
        timeout=60,
        check=False,
    )
    *rest, probed, frozen = done.stderr.rstrip("\n").split("\n")
    assert probed.startswith("PROBE ") and frozen.startswith("FROZEN "), done.stderr
    code, heavy, _started = eval(probed.removeprefix("PROBE "))  # noqa: S307 - our own repr
    return code, heavy, int(frozen.split()[1]), done.stdout, "\n".join(rest)


@pytest.mark.parametrize(("kind", "push"), [("insight", True), ("prune", False)])
def test_a_command_role_turn_loads_no_http_client_no_models_and_no_gitpython(
    team: Team, tmp_path: Path, kind: str, push: bool
) -> None:
    # Loaded once (the settings memo); with `push`, what lands is pushed by a sync cycle
    # in the same process.
    cfg = configure(team, tmp_path, kind, command_role(tmp_path, kind), push=push)
    commit(team.bob.path, {"MEMORY.md": MEMORY}, "memory: notes")
    code, heavy, frozen, out, err = probe_frozen(
        "--config", str(cfg), "cycle", kind, "bob", "--json", "--force"
    )
    assert (code, heavy) == (0, []), err
    assert frozen > 10_000, frozen  # the command's modules, functions and classes
    report = CycleReport.model_validate_json(out)
    assert report.status == "landed", out
    assert out == report.model_dump_json() + "\n"
    pushed = git(team.upstream, "rev-parse", "main") == report.commit
    assert (pushed, report.message.endswith("; pushed")) == (push, push), report.message
