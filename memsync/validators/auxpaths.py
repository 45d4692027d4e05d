"""Where a root's guidance inbox and update queue live: the paths their rules read.

Here on their own so that the root validator tells a tree without those files from one with
them before loading their rules (`inbox.py`, `queue.py`): a clean sync of a root without
them loads neither (issue 18).
"""

from __future__ import annotations

from memsync.validators.tree import TreeView

INBOX_PATH = "AGENT_GUIDANCE_INBOX.md"
QUEUE_PREFIXES = ("update_queue/", "update_records/")


def queue_paths(tree: TreeView) -> list[str]:
    """The sorted paths under `update_queue/` and `update_records/`: all the queue rules read.
    One scan of all the paths (NUL between two: no path holds one), so that a big tree
    costs little here; only when a queue path is among them, one prefix test per entry."""
    paths = tree.entries
    joined = "\0".join(paths)
    if not any(prefix in joined for prefix in QUEUE_PREFIXES):
        return []
    return sorted(p for p in paths if p.startswith(QUEUE_PREFIXES))
