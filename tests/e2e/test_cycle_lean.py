"""What a one-shot `memsync cycle` loads (issue 18, item 5): a turn through an agent CLI
(`executor: command`) loads neither the HTTP client of the `openai` executor (aiohttp,
asyncio) nor its answer parser, nor the wire models it prints without (pydantic), nor
GitPython (a one-shot git box asks git), also when it pushes what landed; the document it
prints is the model's text."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsync.wire.cli import CycleReport
from tests.conftest import Team
from tests.e2e.test_cycle_crash import MEMORY, command_role, configure
from tests.e2e.test_startup import probe
from tests.helpers import commit, git

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
)


@pytest.mark.parametrize(("kind", "push"), [("insight", True), ("prune", False)])
def test_a_command_role_turn_loads_no_http_client_no_models_and_no_gitpython(
    team: Team, tmp_path: Path, kind: str, push: bool
) -> None:
    # Loaded once (the settings memo); with `push`, what lands is pushed by a sync cycle
    # in the same process.
    cfg = configure(team, tmp_path, kind, command_role(tmp_path, kind), push=push)
    commit(team.bob.path, {"MEMORY.md": MEMORY}, "memory: notes")
    code, heavy, out, err = probe(
        "--config", str(cfg), "cycle", kind, "bob", "--json", "--force", env={}, heavy=HEAVY
    )
    assert (code, heavy) == (0, []), err
    report = CycleReport.model_validate_json(out)
    assert report.status == "landed", out
    assert out == report.model_dump_json() + "\n"
    pushed = git(team.upstream, "rev-parse", "main") == report.commit
    assert (pushed, report.message.endswith("; pushed")) == (push, push), report.message
