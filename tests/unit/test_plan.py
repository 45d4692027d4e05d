"""The planner: pure decisions over commit facts, checked against a model of history."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.roots.plan import Action, Facts, decide, questions

SHA = st.sampled_from(["a" * 40, "b" * 40, "c" * 40, "d" * 40])


def test_same_commit_is_current() -> None:
    plan = decide(Facts("a" * 40, "a" * 40, None))
    assert plan.action is Action.CURRENT and not plan.incoming and not plan.outgoing


def test_missing_upstream_branch_is_created_unless_it_was_trusted() -> None:
    assert decide(Facts("a" * 40, None, None)).action is Action.CREATE
    assert decide(Facts("a" * 40, None, "b" * 40)).action is Action.REWOUND
    assert decide(Facts("a" * 40, None, "b" * 40), accept_rewrite=True).action is Action.CREATE


def test_behind_ahead_diverged() -> None:
    a, b = "a" * 40, "b" * 40
    assert decide(Facts(a, b, None, local_in_upstream=True)).action is Action.BEHIND
    assert decide(Facts(a, b, None, upstream_in_local=True)).action is Action.AHEAD
    assert decide(Facts(a, b, None)).action is Action.DIVERGED


def test_rewrite_and_unrelated_history_are_refused() -> None:
    a, b, t = "a" * 40, "b" * 40, "t" * 40
    rewound = decide(Facts(a, b, t, local_in_upstream=True, trusted_in_upstream=False))
    assert rewound.action is Action.REWOUND and "last trusted" in rewound.reason
    unrelated = decide(Facts(a, b, None, related=False))
    assert unrelated.action is Action.REWOUND
    accepted = decide(Facts(a, b, None, related=False), accept_rewrite=True)
    assert accepted.action is Action.ADOPT
    adopted = decide(
        Facts(a, b, t, local_in_upstream=True, trusted_in_upstream=False), accept_rewrite=True
    )
    assert adopted.action is Action.ADOPT and adopted.incoming and adopted.outgoing


def test_a_missing_branch_says_what_is_known() -> None:
    plan = decide(Facts("a" * 40, None, "b" * 40))
    assert "does not exist" in plan.reason and "b" * 12 in plan.reason
    assert "deleted after" not in plan.reason


# A tiny model of history: commits are integers; each commit's ancestors are a set.
HISTORIES = st.dictionaries(
    st.integers(0, 6), st.frozensets(st.integers(0, 6), max_size=3), min_size=1, max_size=7
)


def _ancestors(graph: dict[int, frozenset[int]], node: int) -> set[int]:
    seen, stack = set(), [node]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        stack += [p for p in graph.get(current, ()) if p < current]  # parents are older
    return seen


@given(HISTORIES, st.data())
def test_plan_matches_the_history_model(
    graph: dict[int, frozenset[int]], data: st.DataObject
) -> None:
    nodes = sorted(graph)
    local = data.draw(st.sampled_from(nodes))
    upstream = data.draw(st.one_of(st.none(), st.sampled_from(nodes)))
    trusted = data.draw(st.one_of(st.none(), st.sampled_from(nodes)))
    accept = data.draw(st.booleans())
    key = {n: f"{n:040x}" for n in nodes}

    def anc(x: int, y: int) -> bool:
        return x in _ancestors(graph, y)

    facts = Facts(
        key[local],
        None if upstream is None else key[upstream],
        None if trusted is None else key[trusted],
    )
    if upstream is not None:
        need = questions(facts.local, facts.upstream, facts.trusted)
        related = bool(_ancestors(graph, local) & _ancestors(graph, upstream))
        facts = Facts(
            facts.local,
            facts.upstream,
            facts.trusted,
            local_in_upstream=anc(local, upstream),
            upstream_in_local=anc(upstream, local),
            trusted_in_upstream=(
                anc(trusted, upstream)
                if "trusted_in_upstream" in need and trusted is not None
                else None
            ),
            related=related,
        )
    plan = decide(facts, accept_rewrite=accept)

    # Safety: without --accept-rewrite, an upstream that drops the trusted commit or shares
    # no history is never admitted, and nothing is ever pushed over it.
    if (
        not accept
        and upstream is not None
        and upstream != local
        and (
            (trusted is not None and not anc(trusted, upstream))
            or not (_ancestors(graph, local) & _ancestors(graph, upstream))
        )
    ):
        assert plan.action is Action.REWOUND
    # Progress: the same commit is current; a pure fast-forward is behind; pure ahead pushes.
    if upstream == local:
        assert plan.action is Action.CURRENT
    if plan.action is Action.BEHIND:
        assert anc(local, upstream)  # type: ignore[arg-type]
    if plan.action is Action.AHEAD:
        assert anc(upstream, local)  # type: ignore[arg-type]
    # Never lose local commits: every plan that admits upstream commits keeps local ones
    # (merged in; or, only when the person accepted a rewrite, replayed onto it).
    if plan.incoming and upstream is not None and not anc(local, upstream):
        assert plan.action is Action.DIVERGED or (accept and plan.action is Action.ADOPT)
    # A rewrite is adopted only when accepted, and only when it is one.
    if plan.action is Action.ADOPT:
        assert accept
        assert (trusted is not None and not anc(trusted, upstream)) or not (  # type: ignore[arg-type]
            _ancestors(graph, local) & _ancestors(graph, upstream)  # type: ignore[arg-type]
        )
