"""Role grants (pure): what each role's commit may change."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.validators.corrections import COLLECTION_PATHS
from memsync.validators.grants import check_grants
from memsync.validators.policy import SyncPolicy


def codes(kind: str, changes: list[tuple[str, str]]) -> list[str]:
    return [p.code for p in check_grants(kind, changes)]


def test_insight_may_only_add_a_log() -> None:
    assert codes("insight", [("A", "insight_logs/2026-11-30-101500.md")]) == []
    assert codes("insight", [("M", "insight_logs/old.md")]) == ["grant-violation"]
    assert codes("insight", [("D", "insight_logs/old.md")]) == ["grant-violation"]
    assert codes("insight", [("A", "MEMORY.md")]) == ["grant-violation"]
    assert codes("insight", [("A", "insight_logs/sub/x.md")]) == ["grant-violation"]
    assert codes("insight", []) == ["empty-commit"]


def test_prune_may_change_memory_but_not_the_collections() -> None:
    assert codes("prune", [("M", "MEMORY.md"), ("D", "MEMORY_old.md")]) == []
    assert codes("prune", []) == []  # `prune: checkpoint`
    for path in COLLECTION_PATHS:
        assert codes("prune", [("M", path)]) == ["grant-violation"]
    assert codes("prune", [("M", "PURSUITS.md")]) == ["grant-violation"]


paths = st.one_of(
    st.text(min_size=1, max_size=30),
    st.builds(lambda s: f"MEMORY_{s}.md", st.text(max_size=10)),
    st.builds(lambda s: f"insight_logs/{s}.md", st.text(max_size=10)),
)


@given(st.sampled_from(["A", "M", "D"]), paths)
def test_no_role_is_granted_a_path_the_sync_allowlist_refuses(status: str, path: str) -> None:
    policy = SyncPolicy()
    for kind in ("insight", "prune", "repair"):
        if check_grants(kind, [(status, path)]) == []:
            assert policy.allows(path), (kind, path)


def test_insight_may_add_exactly_one_log_per_turn() -> None:
    for count in (2, 3, 50):
        logs = [("A", f"insight_logs/2026-11-30-1200{n:02d}.md") for n in range(count)]
        problems = check_grants("insight", logs)
        assert [p.code for p in problems] == ["grant-violation"] * (count - 1)
        assert all("1 file(s) per turn" in p.message for p in problems)


@given(st.integers(min_value=0, max_value=60), st.integers(min_value=0, max_value=3))
def test_an_insight_turn_never_passes_with_more_than_one_file(logs: int, others: int) -> None:
    changes = [("A", f"insight_logs/l{n}.md") for n in range(logs)]
    changes += [("M", f"MEMORY_{n}.md") for n in range(others)]
    passed = check_grants("insight", changes) == []
    assert passed == (logs == 1 and others == 0)
