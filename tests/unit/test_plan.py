"""The planner: pure decisions over commit facts, checked against a model of history."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memsync.roots.plan import Action, Facts, anchor, asks_seen, decide, questions

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


def test_without_trusted_state_what_the_tracking_ref_held_is_not_unpushed_work() -> None:
    """The state dir is gone; local holds d, which the remote-tracking ref held before this
    fetch (`seen`); the upstream was force-pushed back to its parent u: pushing d back
    would undo the rewind. Refused, and the plan names d as the commit to trust."""
    d, u = "d" * 40, "u" * 40
    facts = Facts(d, u, None, upstream_in_local=True, trusted_in_upstream=False, seen=d)
    assert questions(d, u, facts.anchor) >= {"trusted_in_upstream"}
    plan = decide(facts)
    assert plan.action is Action.REWOUND and plan.trusted == d and not plan.outgoing
    assert "remote-tracking" in plan.reason and "not unpushed work" in plan.reason
    assert decide(facts, accept_rewrite=True).action is Action.ADOPT
    # A branch deleted upstream is not recreated from what it held either.
    assert decide(Facts(d, None, None, seen=d)).action is Action.REWOUND
    # The trusted upstream, when there is one, is what counts.
    assert anchor("t" * 40, d) == "t" * 40 and anchor(None, d) == d
    assert asks_seen(None, d) and not asks_seen("t" * 40, d) and not asks_seen(None, None)


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
    # The remote-tracking head before this fetch (asked about only without trusted state).
    previous = data.draw(st.one_of(st.none(), st.sampled_from(nodes)))
    accept = data.draw(st.booleans())
    _check_model(graph, local, upstream, trusted, previous, accept)


def test_a_criss_cross_with_the_tracking_ref_is_judged_by_all_it_held() -> None:
    """3 and 4 both merge 1 and 2; local is 3, the tracking ref held 4, the upstream is now
    2. One merge base (2) would let 3 (and 1 with it) be pushed back; all of 4 must stay."""
    graph = {1: frozenset(), 2: frozenset(), 3: frozenset({1, 2}), 4: frozenset({1, 2})}
    for accept in (False, True):
        _check_model(graph, 3, 2, None, 4, accept)


def _check_model(
    graph: dict[int, frozenset[int]],
    local: int,
    upstream: int | None,
    trusted: int | None,
    previous: int | None,
    accept: bool,
) -> None:
    key = {n: f"{n:040x}" for n in range(7)}  # every commit, also parents not drawn
    node = {v: n for n, v in key.items()}

    def anc(x: int, y: int) -> bool:
        return x in _ancestors(graph, y)

    # What local shares with `previous`: commits the upstream held once (not unpushed work).
    held = _ancestors(graph, local) & _ancestors(graph, previous) if previous is not None else set()
    seen = None
    if asks_seen(
        None if trusted is None else key[trusted], None if previous is None else key[previous]
    ):
        # git merge-base --all: the common ancestors no other common ancestor descends from;
        # one is `seen`, several (a criss-cross) make `previous` itself the anchor
        bases = [h for h in held if not any(h in _ancestors(graph, o) - {o} for o in held)]
        seen = key[bases[0]] if len(bases) == 1 else key[previous] if bases else None  # type: ignore[index]
    facts = Facts(
        key[local],
        None if upstream is None else key[upstream],
        None if trusted is None else key[trusted],
        seen=seen,
    )
    if upstream is not None:
        judged = facts.anchor
        need = questions(facts.local, facts.upstream, judged)
        related = bool(_ancestors(graph, local) & _ancestors(graph, upstream))
        facts = Facts(
            facts.local,
            facts.upstream,
            facts.trusted,
            local_in_upstream=anc(local, upstream),
            upstream_in_local=anc(upstream, local),
            trusted_in_upstream=(
                anc(node[judged], upstream)
                if "trusted_in_upstream" in need and judged is not None
                else None
            ),
            related=related,
            seen=seen,
        )
    plan = decide(facts, accept_rewrite=accept)
    assert plan.trusted == facts.anchor

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
    # Without trusted state, a local commit the remote-tracking ref held before this fetch is
    # not unpushed work: an upstream (or a deleted branch) that dropped one is refused, so it
    # is never pushed back; and with --accept-rewrite it stays dropped (the plan trusts it,
    # so the replay leaves it out).
    dropped = held - (_ancestors(graph, upstream) if upstream is not None else set())
    if trusted is None and dropped and upstream != local:
        if not accept:
            assert plan.action is Action.REWOUND and not plan.outgoing
        if plan.action is Action.ADOPT:
            assert plan.trusted is not None and dropped <= _ancestors(graph, node[plan.trusted])
    if plan.outgoing and not accept and upstream is not None and trusted is None:
        assert held <= _ancestors(graph, upstream)
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
        judged = None if plan.trusted is None else node[plan.trusted]
        assert (judged is not None and not anc(judged, upstream)) or not (  # type: ignore[arg-type]
            _ancestors(graph, local) & _ancestors(graph, upstream)  # type: ignore[arg-type]
        )
