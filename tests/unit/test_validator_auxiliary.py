"""The auxiliary-file verdict (corrections, collections, inbox, update queue and records) is
remembered by the content ids of those files: a tree whose auxiliary files did not change
reads none of their bytes, and any change to one of them (bytes, a new or deleted file, a
file that turns into a link) gives exactly the verdict of a check without the cache."""

from __future__ import annotations

from collections.abc import Mapping

from hypothesis import given, settings
from hypothesis import strategies as st

from memsync.validators.cache import ParseCache, Uncached
from memsync.validators.corrections import check_collections, check_corrections
from memsync.validators.inbox import check_inbox
from memsync.validators.queue import check_queue, check_records
from memsync.validators.rightmemory import RootValidator, default_graph_validator
from tests.unit.test_queue import (
    LEASE,
    U1,
    U2,
    U3,
    bid,
    cand,
    candidate_path,
    dump,
    good_files,
    lease,
    record,
    record_path,
)
from tests.unit.test_validator_equivalence import blob_id, git_tree

CORRECTIONS = b"## Wrong\n### Bogus\ntext\n"


def base() -> dict[str, bytes | None]:
    files: dict[str, bytes | None] = {
        "MEMORY.md": b"# Memory {#m}\n",
        "PURSUITS.md": b"# Pursuits\n",
        "corrections.md": CORRECTIONS,
        "AGENT_GUIDANCE_INBOX.md": b"not an inbox\n",
    }
    files.update(good_files())
    return files


def problems(files: Mapping[str, bytes | None], cache: ParseCache | Uncached) -> list[object]:
    tree, _ = git_tree(files)
    report = default_graph_validator(enforce_capacity=True, cache=cache).validate(tree)
    return [(p.code, p.path, p.line, p.message) for p in report.problems]


def test_auxiliary_verdicts_follow_every_change_and_skip_unchanged_bytes() -> None:
    cache = ParseCache()
    edits: list[dict[str, bytes | None]] = [
        {},
        {candidate_path(U2): dump(cand(U2, uid=U1))},  # a candidate's bytes change
        {candidate_path("4" * 32): b"{"},  # a (broken) candidate appears
        {LEASE: dump(lease(U1, U2))},  # the lease names another batch
        {record_path(bid(U1, U3)): dump(record(U1))},  # a record under the wrong name
        {"corrections.md": b"## Fine\n"},
        {"AGENT_GUIDANCE_INBOX.md": None},  # becomes a symbolic link
    ]
    files = base()
    seen: set[tuple[object, ...]] = set()
    for change in edits:
        files = {**files, **change}
        want = problems(files, Uncached())
        assert problems(files, cache) == want  # the first time: checked and remembered
        seen.add(tuple(want))
        tree, source = git_tree(files)
        report = default_graph_validator(enforce_capacity=True, cache=cache).validate(tree)
        assert [(p.code, p.path, p.line, p.message) for p in report.problems] == want
        auxiliary = {blob_id(data) for path, data in files.items() if data and "MEMORY" not in path}
        assert not auxiliary & set(source.asked)  # the second time: no auxiliary byte read
    assert len(seen) == len(edits)  # every edit changed the verdict
    # Deleting a file is a change too; and back to the start gives the start's verdict.
    del files[candidate_path(U3)]
    assert problems(files, cache) == problems(files, Uncached())
    assert problems(base(), cache) == problems(base(), Uncached())


def test_capacity_is_part_of_the_key() -> None:
    cache = ParseCache()
    many = b"".join(
        b"## E%d\n### What happened\nx\n### Correction\ny\n### Applies when\nz\n" % n
        for n in range(60)
    )
    files = {**base(), "corrections.md": many}
    tree, _ = git_tree(files)
    strict = default_graph_validator(enforce_capacity=True, cache=cache).validate(tree)
    lax = default_graph_validator(enforce_capacity=False, cache=cache).validate(tree)
    assert "corrections-capacity" in [p.code for p in strict.problems]
    assert "corrections-capacity" not in [p.code for p in lax.problems]


# An inbox or queue file: absent, a symbolic link, not UTF-8, broken, or as `base` has it.
_AUXILIARY = ["AGENT_GUIDANCE_INBOX.md", *good_files()]
_CHOICES = st.sampled_from(["absent", "link", "binary", "broken", "base"])


@settings(max_examples=60, deadline=None)
@given(st.lists(_CHOICES, min_size=len(_AUXILIARY), max_size=len(_AUXILIARY)))
def test_the_auxiliary_verdict_is_every_rule_run_whatever_files_are_absent(
    choices: list[str],
) -> None:
    """Issue 18: the root validator runs the inbox and queue rules only when their files
    are there (a tree without them loads neither); the verdict is every rule's, run."""
    files = base()
    for path, choice in zip(_AUXILIARY, choices, strict=True):
        if choice == "absent":
            del files[path]
        elif choice != "base":
            files[path] = {"link": None, "binary": b"\xff\xfe", "broken": b"{"}[choice]
    tree, _ = git_tree(files)
    every = (
        *check_corrections(tree, enforce_capacity=True),
        *check_collections(tree),
        *check_inbox(tree),
        *check_queue(tree),
        *check_records(tree),
    )
    assert RootValidator(enforce_capacity=True, cache=Uncached()).auxiliary(tree) == every
