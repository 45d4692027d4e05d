"""The insight and pruner prompts: what each executor kind is told, and the data fenced."""

from __future__ import annotations

import re

from hypothesis import given
from hypothesis import strategies as st

from memsync.cycles.insightprompt import InsightInputs, insight_prompt
from memsync.cycles.promptkit import SECTION_BUDGET, correction
from memsync.cycles.pruneprompt import PruneInputs, prune_prompt
from memsync.validators.corrections import COLLECTION_PATHS

INSIGHT = InsightInputs(
    root="personal",
    recent_commits=("memory: deploy rules", "memory: flaky CI"),
    changed_memory="+- `ship-tuesdays` Ship on Tuesdays → []\n",
    headings=("# Deploys {#deploys}", "## CI {#ci}"),
    earlier_logs=("2026-11-01-120000.md",),
)
PRUNE = PruneInputs(
    root="personal",
    generation=4,
    generation_commits=70,
    commits_since_boundary=72,
    head="a" * 40,
    boundary="b" * 40,
    latest_prune="b" * 40,
    previous_ledger="Removed:\n- `old-ci` superseded\nRevival grace:\n- none",
    boundary_snapshot={"MEMORY.md": "# Memory\n\n## CI {#ci}\n", "MEMORY_x.md": "# X\n"},
    current_memory={"MEMORY.md": "# Memory now\n"},
    revival_grace=3,
    protected=("old-ci",),
)


def test_a_command_insight_role_is_told_the_commit_contract_not_json() -> None:
    text = insight_prompt(INSIGHT, "command").text
    assert "insight_logs/<name>.md" in text and "git add -f" in text
    assert "`insight: `" in text and "grant-violation" in text
    assert "change nothing and make no commit" in text
    assert '"action"' not in text


def test_an_openai_insight_role_is_told_the_exact_json_forms() -> None:
    prompt = insight_prompt(INSIGHT, "openai")
    assert '{"action": "write", "title": "...", "content": "..."}' in prompt.system
    assert '{"action": "noop", "reason": "..."}' in prompt.system
    assert "git commit" not in prompt.system and "git add" not in prompt.system
    for fact in (*INSIGHT.recent_commits, "ship-tuesdays", *INSIGHT.headings, "2026-11-01-120000"):
        assert fact in prompt.user
    assert prompt.text == f"{prompt.system}\n\n{prompt.user}\n"


def test_the_prune_prompt_carries_generation_boundary_ledger_and_grace() -> None:
    prompt = prune_prompt(PRUNE, "command")
    for path in COLLECTION_PATHS:
        assert path in prompt.system
    assert "generation 4 is due" in prompt.system and "70 commits" in prompt.system
    assert "grace K/3" in prompt.system
    assert "`prune: expired active memory`" in prompt.system
    assert "`prune: checkpoint`" in prompt.system and "--allow-empty" in prompt.system
    assert f"git show {'b' * 40}:MEMORY.md" in prompt.system
    assert "Removed:\n- `old-ci` superseded" in prompt.user
    assert "## Protected" in prompt.user and "old-ci" in prompt.user
    assert "### MEMORY_x.md" in prompt.user and "## CI {#ci}" in prompt.user
    assert "# Memory now" in prompt.user  # given, so shown


def test_an_openai_pruner_gets_the_json_forms_and_the_memory_now() -> None:
    prompt = prune_prompt(PruneInputs(**{**PRUNE.__dict__, "current_memory": {}}), "openai")
    assert '"action": "remove", "remove": ["item-id"' in prompt.system
    assert '"action": "checkpoint"' in prompt.system
    assert "git commit" not in prompt.system
    assert "## Active memory now\n\n(none given)" in prompt.user


def test_a_first_prune_says_there_is_no_earlier_ledger() -> None:
    first = PruneInputs("personal", 1, 70, 70, "a" * 40, None, None)
    prompt = prune_prompt(first, "command")
    assert "(none: no earlier prune)" in prompt.user
    assert "latest prune commit: none (never pruned)" in prompt.user
    assert "git show" not in prompt.system  # no boundary to show files at


@given(st.text(alphabet="`~ab\n", max_size=60))
def test_memory_text_cannot_close_its_fence_early(text: str) -> None:
    prompt = insight_prompt(InsightInputs("r", changed_memory="x" + text + "x"), "openai")
    section = prompt.user.split("## Memory text that changed recently\n\n", 1)[1]
    fence = re.match(r"`{3,}", section)
    assert fence is not None
    body = section[fence.end() + 1 :]
    # The first line that is only this fence is the closing one, right after the data.
    closing = body.index("\n" + fence.group() + "\n")
    assert body[:closing] == ("x" + text + "x").rstrip("\n")
    assert all(len(run) < len(fence.group()) for run in re.findall(r"`+", body[:closing]))


def test_oversized_memory_is_cut_with_a_note_and_the_rest_named() -> None:
    big = {f"MEMORY_{n}.md": "y" * (SECTION_BUDGET + 10) for n in range(5)}
    prompt = prune_prompt(PruneInputs(**{**PRUNE.__dict__, "boundary_snapshot": big}), "command")
    assert "(10 more characters cut here: read the rest in the worktree)" in prompt.user
    assert "over the context budget, not shown: MEMORY_3.md, MEMORY_4.md" in prompt.user
    assert len(prompt.user) < 130_000


def test_the_correction_quotes_the_error() -> None:
    text = correction("remove: 'F#x' is not an item id")
    assert "remove: 'F#x' is not an item id" in text and "one JSON object" in text


def test_the_prune_context_names_threshold_grace_ledger_summary_and_unchanged_items() -> None:
    inputs = PruneInputs(
        **{
            **PRUNE.__dict__,
            "protected": ("`old-ci` grace 1/3",),
            "snapshot_at": "c" * 40,
            "ledger_summary": "removed: old-ci\nin revival grace: none",
            "unchanged": ("`ci` (MEMORY.md) ## CI {#ci}",),
            "changed_items": 7,
        }
    )
    for executor in ("command", "openai"):
        prompt = prune_prompt(inputs, executor)
        user = prompt.user
        assert "threshold: 70 memory commits each" in user
        assert "revival grace: 3 prunes" in user
        assert f"the snapshot is from {'c' * 12}" in user
        assert "new or changed since the snapshot: 7" in user
        assert "`old-ci` grace 1/3" in user.split("## Protected", 1)[1]
        parsed = user.split("## Previous ledger, parsed", 1)[1]
        assert "removed: old-ci" in parsed.split("##", 1)[0]
        assert "`ci` (MEMORY.md) ## CI {#ci}" in user.split("## Items unchanged", 1)[1]
        assert "Removed:\n- `old-ci` superseded" in user  # the raw body too
        assert "prune: expired active memory" in prompt.system
        assert "prune: checkpoint" in prompt.system
