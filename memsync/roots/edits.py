"""Local edits in a root's work tree, read from its `git status` entries: those that block a
publication (`blocking_changes`: `status` reports them as dirty) and staged versions only
the index holds (`foreign_staged`). Pure, and apart from the publisher (`publish`), so that
a one-shot `memsync status` loads no more of the sync than these.
"""

from __future__ import annotations

from collections.abc import Iterable

TYPE_CHECKING = False  # `typing` is not loaded by a cold status (issue 18)
if TYPE_CHECKING:
    from memsync.transports.workstate import StatusEntry
    from memsync.validators.policy import SyncPolicy


def blocking_changes(entries: Iterable[StatusEntry], policy: SyncPolicy) -> tuple[str, ...]:
    """Local edits that block publication: tracked changes and synchronized untracked files."""
    listed = tuple(entries)
    if not any(e.untracked for e in listed):  # no name to check: the path rules stay unloaded
        return tuple(sorted({e.path for e in listed}))
    from memsync.validators.paths import check_name  # noqa: PLC0415 - untracked files only

    paths = {e.path for e in listed if not e.untracked or check_name(e.path, policy) is None}
    return tuple(sorted(paths))


def foreign_staged(entries: Iterable[StatusEntry]) -> tuple[str, ...]:
    """Paths whose index holds a staged version that is neither HEAD's nor the work tree's.

    That version exists only in the index: committing the work tree, or moving the index
    to a candidate, would drop it. In `git status` terms: the index differs from HEAD (X)
    and the work tree differs from the index (Y); a staged deletion whose file is back in
    the work tree (listed again as untracked) is one too.
    """
    listed = tuple(entries)
    untracked = {e.path for e in listed if e.untracked}
    found = {
        e.path
        for e in listed
        if not e.untracked
        and not e.unmerged
        and e.xy[0] != "."
        and (e.xy[1] != "." or (e.xy[0] == "D" and e.path in untracked))
    }
    return tuple(sorted(found))
